"""A long chapter read as several pages (:mod:`selfattention_book.pages`).

* ``config-inited``, before sphinx-external-toc reads ``_toc.yml`` (priority
  400 < 500): the pages after the first of every chapter notebook are
  written as notebooks to ``chapters/<chapter>/<page>.ipynb`` (a file is
  rewritten only when it changes, so that an incremental build re-reads
  only what changed; pages no longer marked are removed). These files are
  made by the build, like ``_build/``: git, ruff and pytest leave them out.
* ``source-read``, before the course edition (priority 400 < 500): the
  chapter's own page is its notebook cut at the first page marker.
"""

from __future__ import annotations

import json
from pathlib import Path

from selfattention_book.pages import page_notebook, pages

CHAPTERS = "chapters"


def _chapters(srcdir: Path):
    for path in sorted((srcdir / CHAPTERS).glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        yield path, nb, pages(nb, f"{CHAPTERS}/{path.stem}")


def _dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def write_pages(app, config) -> None:
    srcdir = Path(app.srcdir)
    for path, nb, chapter in _chapters(srcdir):
        folder = path.with_suffix("")
        wanted = {srcdir / f"{page.doc}.ipynb": _dump(page_notebook(nb, page))
                  for page in chapter[1:]}
        for stale in sorted(folder.glob("*.ipynb")):
            if stale not in wanted:
                stale.unlink()
        for target, text in wanted.items():
            target.parent.mkdir(exist_ok=True)
            if not target.exists() or \
                    target.read_text(encoding="utf-8") != text:
                target.write_text(text, encoding="utf-8")
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def first_page(app, docname: str, source: list) -> None:
    if docname.count("/") != 1 or not docname.startswith(f"{CHAPTERS}/"):
        return
    path = Path(app.srcdir) / f"{docname}.ipynb"
    if not path.is_file():
        return
    nb = json.loads(source[0])
    chapter = pages(nb, docname)
    if len(chapter) > 1:
        source[0] = _dump(page_notebook(nb, chapter[0]))


def setup(app):
    app.connect("config-inited", write_pages, priority=400)
    app.connect("source-read", first_page, priority=400)
    return {"version": "1.0", "parallel_read_safe": True,
            "parallel_write_safe": True}
