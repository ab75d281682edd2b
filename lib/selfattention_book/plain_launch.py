"""Launch buttons and the download button open the plain notebooks.

The chapters under ``chapters/`` and the appendices written as notebooks
under ``appendices/`` are written in MyST for this site; Colab, Binder,
JupyterHub and a downloaded notebook show plain Jupyter, so they get the
notebooks that ``scripts/plain_notebooks.py`` writes into ``notebooks/``
(:mod:`selfattention_book.plain`). This extension

* points every launch link of such a page (sphinx-book-theme builds them
  in ``header_buttons.launch.add_launch_buttons``, on ``html-page-context``
  at the default priority 500) at ``notebooks/<name>.ipynb``;
* replaces the downloadable ``_sources/<folder>/<name>.ipynb`` with the same
  plain notebook, unless the course edition puts the student version there.

A further page of a chapter (``chapters/<name>/<page>``, written by
:mod:`selfattention_book.book_pages`) is a part of the chapter's notebook,
which no kernel can run alone: its buttons open and download the whole chapter,
``notebooks/<name>.ipynb``, and it offers no "Live code". Live code (Thebe,
through sphinx-thebe 0.3.1) runs a page's own cells on a Binder kernel, and
a further page's cells use names that the chapter's earlier pages define,
so they would stop at a NameError. On such a page this extension drops the
theme's Live code button (sphinx-book-theme 1.3.0 adds it in
``header_buttons.launch.add_launch_buttons`` with ``label:
"launch-thebe"``) and the ``text/x-thebe-config`` script that sphinx-thebe
appends to the doctree on ``doctree-resolved`` (``update_thebe_context``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes

from .pages import chapter_of

FOLDERS, PLAIN = ("chapters/", "appendices/"), "notebooks/"


def plain_notebook_of(pagename: str) -> str:
    """``chapters/06_transformer/practice`` -> ``notebooks/06_transformer``,
    as ``chapters/06_transformer`` and ``appendices/pytorch`` -> theirs."""
    return PLAIN + pagename.split("/")[1]


def _rewrite(buttons, pagename: str) -> None:
    """Point the launch links (absolute URLs naming the page's notebook) at
    its plain version; the download links stay (their file is replaced)."""
    own, plain = f"{pagename}.ipynb", f"{plain_notebook_of(pagename)}.ipynb"
    for button in buttons:
        if isinstance(button.get("buttons"), list):
            _rewrite(button["buttons"], pagename)
        url = button.get("url")
        if isinstance(url, str) and url.startswith("https://"):
            button["url"] = url.replace(f"/{own}", f"/{plain}").replace(
                "%2F" + own.replace("/", "%2F"),
                "%2F" + plain.replace("/", "%2F"))


THEBE_BUTTON = "launch-thebe"       # the theme's label of "Live code"


def without_live_code(buttons: list) -> list:
    """The theme's header buttons without its Live code button, at any
    depth of its groups."""
    kept = []
    for button in buttons:
        if button.get("label") == THEBE_BUTTON:
            continue
        if isinstance(button.get("buttons"), list):
            button = dict(button, buttons=without_live_code(
                button["buttons"]))
        kept.append(button)
    return kept


def _launch_plain(app, pagename, templatename, context, doctree) -> None:
    if pagename.startswith(FOLDERS):
        _rewrite(context.get("header_buttons", []), pagename)
    if chapter_of(pagename) and "header_buttons" in context:
        context["header_buttons"] = without_live_code(
            context["header_buttons"])


def _no_thebe_config(app, doctree, docname) -> None:
    """Drop sphinx-thebe's configuration from a chapter's further page."""
    if not chapter_of(docname):
        return
    for node in list(doctree.findall(nodes.raw)):
        if "text/x-thebe-config" in node.astext():
            node.parent.remove(node)


def _plain_downloads(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    if getattr(app.config, "course_edition", False):
        return                   # the course edition ships student versions
    sources = Path(app.outdir) / "_sources"
    for folder in FOLDERS:
        for copied in sorted((sources / folder).rglob("*.ipynb")):
            pagename = copied.relative_to(sources).with_suffix("").as_posix()
            plain = Path(app.srcdir) / f"{plain_notebook_of(pagename)}.ipynb"
            if plain.is_file():
                shutil.copyfile(plain, copied)


def setup(app):
    app.connect("html-page-context", _launch_plain, priority=600)
    # after sphinx-thebe's update_thebe_context (default priority 500)
    app.connect("doctree-resolved", _no_thebe_config, priority=600)
    app.connect("build-finished", _plain_downloads, priority=600)
    # env_version: raise it when a change here alters the pages, so that an
    # incremental build rewrites all of them
    return {"env_version": 3, "parallel_read_safe": True,
            "parallel_write_safe": True}
