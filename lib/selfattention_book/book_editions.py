"""The site's other editions: each chapter's slides and the PDFs.

* ``doctree-read``: under the title of every chapter (its first page), one
  line linking the chapter's slide deck, the chapter as PDF and the whole
  book as PDF (the course edition's PDF in the course edition); the home
  page gets the same for the whole book.
* ``build-finished`` (HTML builder only): every chapter's deck is written
  into ``<site>/slides/`` by :func:`selfattention_book.slides.write_decks`,
  with MathJax from the site's own copy and links to the site's pages, so
  the decks are built with the site and never lag behind it.

The PDFs are made after the site, by ``make pdf``
(:mod:`selfattention_book.pdf`), which copies them into ``<site>/pdf/``.

* ``builder-inited`` (``singlehtml``, which ``make pdf`` prints): every node
  that an extension taught the HTML builder is taught to the single-page
  one too. Sphinx 7.4 (``SphinxComponentRegistry.create_translator``) looks
  up a builder's node handlers by its name and falls back to its format
  only when no extension registered any for that name; sphinx-exercise
  registers some for ``singlehtml``, so myst-nb's folded cells
  (``HideCodeCellNode``) would have none.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.util import logging

from selfattention_book.pdf import BOOK_PDF, COURSE_PDF
from selfattention_book.slides import DECKS, OutlineError, write_decks

logger = logging.getLogger(__name__)


def _chapters(app) -> list[str]:
    if not hasattr(app.env, "sa_chapters"):
        from .plain import BookIndex

        app.env.sa_chapters = list(BookIndex(Path(app.srcdir)).chapters)
    return app.env.sa_chapters


def _book_pdf(app) -> str:
    return COURSE_PDF if getattr(app.config, "course_edition", False) \
        else BOOK_PDF


def _line(up: str, links: list[tuple[str, str]]) -> nodes.paragraph:
    line = nodes.paragraph(classes=["sa-editions"])
    for i, (text, href) in enumerate(links):
        if i:
            line += nodes.Text(" · ")
        line += nodes.reference(text, text, refuri=up + href)
    return line


def add_edition_links(app, doctree: nodes.document) -> None:
    docname = app.env.docname
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    if docname == app.config.root_doc:
        links = [("The book as PDF", f"pdf/{_book_pdf(app)}")]
        links += [(f"Slides of chapter {i}", f"{DECKS}/{Path(d).name}.html")
                  for i, d in enumerate(_chapters(app), start=1)]
        section.insert(1, _line("", links))
        return
    if docname not in _chapters(app):
        return
    name = Path(docname).name
    up = "../" * docname.count("/")
    line = _line(up, [("Slides of this chapter", f"{DECKS}/{name}.html"),
                      ("This chapter as PDF", f"pdf/chapters/{name}.pdf"),
                      ("The book as PDF", f"pdf/{_book_pdf(app)}")])
    index = 2 if any("sa-executed" in getattr(n, "get", lambda *_: [])(
        "classes", []) for n in section.children[:2]) else 1
    section.insert(index, line)


def write_site_decks(app, exception) -> None:
    if exception is not None or app.builder.name != "html":
        return
    try:
        # the decks carry their own MathJax 3, as make slides writes them:
        # the site's MathJax 4 takes the book's configuration, not theirs
        pages = write_decks(Path(app.srcdir), Path(app.outdir) / DECKS,
                            book_url="..")
    except OutlineError as err:
        logger.warning(str(err), type="book_editions", subtype="slides")
        return
    logger.info(f"[book_editions] {len(pages)} slide decks in {DECKS}/")


def teach_single_page(app) -> None:
    """Give the ``singlehtml`` builder the HTML handlers it lacks."""
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node, pair in handlers.get("html", {}).items():
        single.setdefault(node, pair)


def setup(app):
    app.connect("builder-inited", teach_single_page)
    app.connect("doctree-read", add_edition_links)
    app.connect("build-finished", write_site_decks)
    return {"version": "1.0", "env_version": 1, "parallel_read_safe": True,
            "parallel_write_safe": True}
