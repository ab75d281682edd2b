"""Launch buttons and the download button open the plain notebooks.

The chapters under ``chapters/`` and the appendices written as notebooks
under ``appendices/`` are written in MyST for this site; Colab, Binder,
JupyterHub and a downloaded notebook show plain Jupyter, so they get the
notebooks that ``scripts/plain_notebooks.py`` writes into ``notebooks/``
(:mod:`selfattention_course.plain`). This extension

* points every launch link of such a page (sphinx-book-theme builds them
  in ``header_buttons.launch.add_launch_buttons``, on ``html-page-context``
  at the default priority 500) at ``notebooks/<name>.ipynb``;
* replaces the downloadable ``_sources/<folder>/<name>.ipynb`` with the same
  plain notebook, unless the course edition puts the student version there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FOLDERS, PLAIN = ("chapters/", "appendices/"), "notebooks/"


def _rewrite(buttons, folder: str) -> None:
    """Point the launch links (absolute URLs naming a notebook of
    ``folder``) at its plain version; the download links stay (their file
    is replaced)."""
    for button in buttons:
        if isinstance(button.get("buttons"), list):
            _rewrite(button["buttons"], folder)
        url = button.get("url")
        if isinstance(url, str) and url.startswith("https://"):
            button["url"] = url.replace(f"/{folder}", f"/{PLAIN}") \
                .replace(f"%2F{folder[:-1]}%2F", f"%2F{PLAIN[:-1]}%2F")


def _launch_plain(app, pagename, templatename, context, doctree) -> None:
    for folder in FOLDERS:
        if pagename.startswith(folder):
            _rewrite(context.get("header_buttons", []), folder)


def _plain_downloads(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    if getattr(app.config, "course_edition", False):
        return                   # the course edition ships student versions
    plain = Path(app.srcdir) / PLAIN
    for folder in FOLDERS:
        sources = Path(app.outdir) / "_sources" / folder
        for copied in sorted(sources.glob("*.ipynb")):
            if (plain / copied.name).is_file():
                shutil.copyfile(plain / copied.name, copied)


def setup(app):
    app.connect("html-page-context", _launch_plain, priority=600)
    app.connect("build-finished", _plain_downloads, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
