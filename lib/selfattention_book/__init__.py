"""The book's own tooling: what turns ``chapters/`` into the site and the
plain notebooks.

* Sphinx extensions, loaded by ``_config.yml`` (``sphinx.local_extensions``):
  :mod:`.book_assets` (MathJax served from the site, dated chapters),
  :mod:`.book_pages` (a chapter read as several pages), :mod:`.book_a11y`,
  :mod:`.plain_launch` (launch buttons open ``notebooks/``) and
  :mod:`.course_edition` (``make book SOLUTIONS=hidden``);
* :mod:`.plain`: MyST chapters as plain Jupyter (``make notebooks``; the
  instructors' ``selfattention-assign`` writes its student notebooks with it);
* :mod:`.pages`: where a chapter notebook splits into pages;
* :mod:`.diagrams`: the book's diagrams, drawn by ``make diagrams``;
* :mod:`.sync`: the library's code written into the cells that show it
  (``make execute``);
* :mod:`.slides`: a reveal.js deck per chapter from its outline in
  ``slides/`` (``make slides``); :mod:`.pdf`: the book and its course edition
  printed to PDF (``make pdf``); :mod:`.book_editions` links both from the
  site.

It imports the readers' library (:mod:`selfattention`) and the students'
checks, never the grader (:mod:`selfattention_course`), and it is not part
of the package students install (``pyproject.toml`` leaves it out): the
build, ``make`` and the instructors' commands run in a checkout, where the
editable install of ``make install`` puts ``lib/`` on the path.
"""

#: Key of this book's entries in notebook and cell metadata.
META = "selfattention"
