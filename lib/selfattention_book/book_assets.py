"""Sphinx extension of the book: a self-contained site and dated chapters.

Loaded through ``sphinx.local_extensions`` in ``_config.yml``. It does three
things (and keeps a single search field, see :func:`theme_defaults`):

* **MathJax from the site itself, on every page.** After an HTML build it
  copies MathJax 3 (the ``es5/`` folder shipped as package data by the PyPI
  wheel ``django-static-mathjax``, pinned in ``constraints.txt``) to
  ``<output>/_vendor/mathjax/``; ``mathjax_path`` in ``_config.yml`` points
  there. It is copied after the build, not placed in the book's ``_static/``,
  because Jupyter Book adds every ``.js`` file under ``_static/`` to every
  page. A ``.nojekyll`` file keeps GitHub Pages from hiding ``_``-folders.
  Every page loads MathJax, because the navigation of every page shows the
  chapter titles, and titles may hold math.
* **Each inline script once.** Sphinx 7.4 lists an inline script (one added
  with ``app.add_js_file(None, body=...)``) twice when an extension adds it
  after the builder started: the builder keeps the entry with filename
  ``None`` and, before writing, re-adds the registry's copy with filename
  ``''``; the two differ only in that spelling, so the duplicate check misses
  it. sphinx-thebe adds ``const THEBE_JS_URL = ...`` that way, and a second
  ``const`` declaration is a SyntaxError in the browser ("Identifier
  'THEBE_JS_URL' has already been declared"), on every page. We drop exact
  duplicates from each page's script list before it is rendered.
* **When and with what each chapter was executed.** ``make execute``
  (``scripts/execute_notebooks.py``) stores ``metadata.selfattention =
  {executed, python, numpy, torch}`` in a notebook; here that becomes one
  line under the chapter's title. A notebook without it gets a warning
  (an error in the strict build) that says how to add it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from selfattention_book.pages import chapter_of

logger = logging.getLogger(__name__)

VENDOR_DIR = "_vendor"
MATHJAX_DIR = f"{VENDOR_DIR}/mathjax"
STAMP_KEY = "selfattention"
STAMP_FIELDS = ("executed", "python", "numpy", "torch")


# ------------------------------------------------------------------ MathJax
def mathjax_source() -> Path:
    """The ``es5/`` folder of MathJax 3 inside the ``mathjax`` package."""
    import mathjax  # the import name of django-static-mathjax

    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (es5 / "tex-mml-chtml.js").is_file():
        raise FileNotFoundError(
            f"MathJax's es5/tex-mml-chtml.js not found under {es5}; "
            "install the pinned django-static-mathjax (make install)")
    return es5


def copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: put MathJax and ``.nojekyll`` into the output."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    source = mathjax_source()
    target = out / MATHJAX_DIR
    version = (source.parent / "package.json").read_text()
    version = json.loads(version)["version"]
    marker = target / ".version"
    if not (marker.is_file() and marker.read_text() == version):
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
        marker.write_text(version)
    (out / ".nojekyll").touch()
    logger.info(f"[book_assets] MathJax {version} served from {MATHJAX_DIR}/")


# ------------------------------------------------------------ inline scripts
def _script_key(script) -> tuple:
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {})
    priority = getattr(script, "priority", 500)
    return (str(filename), priority, tuple(sorted(attributes.items())))


def unique_scripts(app: Sphinx, pagename: str, templatename: str,
                   context: dict, doctree) -> None:
    """``html-page-context``: list each script of the page once."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


# --------------------------------------------------------------------- theme
def theme_defaults(app: Sphinx, config) -> None:
    """``config-inited``: one search field, in the sidebar.

    pydata-sphinx-theme 0.17 turns an unset ``navbar_persistent`` into a
    search field in a bar of its own above every page; under
    sphinx-book-theme that bar only repeats the sidebar's search field.
    """
    config.html_theme_options.setdefault("navbar_persistent", [])


# -------------------------------------------------------------- version line
def stamp_of(path: Path) -> dict | None:
    """The ``selfattention`` metadata of a notebook, if complete."""
    metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    stamp = metadata.get(STAMP_KEY) or {}
    if all(stamp.get(field) for field in STAMP_FIELDS):
        return stamp
    return None


def stamp_sentence(stamp: dict) -> str:
    return (f"Last executed on {stamp['executed']} with Python "
            f"{stamp['python']}, NumPy {stamp['numpy']} and PyTorch "
            f"{stamp['torch']}.")


def add_version_line(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read``: one line under the title of every notebook page."""
    docname = app.env.docname
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    stamp = stamp_of(path)
    if stamp is None:
        relative = path.relative_to(app.srcdir).as_posix()
        logger.warning(
            f"{relative} has no execution stamp (metadata.{STAMP_KEY} with "
            f"{', '.join(STAMP_FIELDS)}); run `make execute NB={relative}`",
            location=docname, type="book_assets", subtype="stamp")
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    line = nodes.paragraph(classes=["sa-executed"])
    sentence = stamp_sentence(stamp)
    if chapter_of(docname):     # a chapter's further page (book_pages.py)
        # the course edition (course_edition.py) has no launch buttons
        opener = ("the download button gives"
                  if getattr(app.config, "course_edition", False)
                  else "the launch buttons open")
        sentence = ("This page runs as part of its chapter's notebook, "
                    f"which {opener}. " + sentence)
    line += nodes.emphasis(text=sentence)
    section.insert(1, line)  # right after the title


def setup(app: Sphinx) -> dict:
    # MathJax on every page, not only on pages with equations of their own:
    # the navigation shows every chapter title, and titles hold math
    # ("Scaling by sqrt(d_k)"), which would stay raw TeX elsewhere.
    app.set_html_assets_policy("always")
    app.connect("config-inited", theme_defaults)
    app.connect("build-finished", copy_mathjax)
    app.connect("html-page-context", unique_scripts)
    app.connect("doctree-read", add_version_line)
    # env_version: raise it when a change here alters the pages, so that an
    # incremental build rewrites all of them
    return {"version": "1.1", "env_version": 5, "parallel_read_safe": True,
            "parallel_write_safe": True}
