"""The pages of the online book: one chapter notebook, several pages.

A chapter is one notebook (``chapters/06_transformer.ipynb``): one kernel
runs it, nbval checks it, a student gets it whole. Read online, a long
chapter is split into pages. A markdown cell whose metadata holds
``{"selfattention": {"page": {"file": "real-digits"}}}`` starts a new page,
``chapters/06_transformer/real-digits``, that runs to the next such cell.
The page's title is the cell's first ``##`` heading, raised to ``#`` (with
the ``###`` headings under it, up to the next ``##``, raised to ``##``);
with ``"title": "..."`` in the marker, a new ``#`` heading with that text
comes before the cell and the cell keeps its ``##``.

The first page keeps the chapter's name, so that its address does not
change. :mod:`selfattention_book.book_pages` writes the other pages before
Sphinx reads the book and cuts the chapter to its first page as Sphinx reads it;
``_toc.yml`` lists the pages as the chapter's sections, and
:class:`~selfattention_book.plain.BookIndex` numbers them as Sphinx does
(the first page's sections are 6.1 to 6.k, the next pages 6.(k+1), ...).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from . import META

__all__ = ["Page", "pages", "page_notebook", "chapter_of", "PAGE_KEY"]

#: Key, under the cell metadata's ``selfattention`` entry, of a page start.
PAGE_KEY = "page"
#: How a page's first cell starts: its labels, then its ``##`` heading.
STARTS = re.compile(r"(\([\w.:-]+\)=[ \t]*\n)*##(?=[ \t])")
DEEPER = re.compile(r"^#(#{2,6}[ \t])", re.M)
SECTION = re.compile(r"^##[ \t]", re.M)
FILE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass(frozen=True)
class Page:
    """One page of a chapter: its document name and its cells (``#``
    title included)."""

    doc: str
    cells: list


def _marker(cell) -> dict | None:
    if cell.get("cell_type") != "markdown":
        return None
    marker = cell.get("metadata", {}).get(META, {}).get(PAGE_KEY)
    if marker is None:
        return None
    if not isinstance(marker, dict) or not FILE.fullmatch(
            str(marker.get("file", ""))):
        raise ValueError(f"a page marker needs a file name in lower case "
                         f"words joined by '-', not {marker!r}")
    if not STARTS.match("".join(cell["source"])):
        raise ValueError(f"page {marker['file']!r}: its first cell must "
                         f"start with a '## ' heading (after its labels)")
    return marker


def _title_cells(cell, marker: dict) -> list:
    """The first cells of a page: the marked cell with its ``##`` raised,
    or a new ``#`` title before it."""
    cell = copy.deepcopy(cell)
    cell["metadata"][META].pop(PAGE_KEY)
    if not cell["metadata"][META]:
        del cell["metadata"][META]
    if "title" in marker:
        title = {"cell_type": "markdown", "id": f"page-{marker['file']}"[:64],
                 "metadata": {}, "source": f"# {marker['title']}"}
        return [title, cell]
    source = "".join(cell["source"])
    heading = STARTS.match(source).end()
    cell["source"] = source[:heading - 2] + "#" + source[heading:]
    return [cell]


def pages(nb, doc: str) -> list[Page]:
    """The pages of chapter notebook ``nb`` whose document is ``doc``
    (``chapters/06_transformer``); one page if it has no marker."""
    out = [Page(doc, [])]
    raising = False           # in the first section of a raised title
    for cell in nb["cells"]:
        marker = _marker(cell)
        if marker is not None:
            name = f"{doc}/{marker['file']}"
            if any(page.doc == name for page in out):
                raise ValueError(f"two pages of {doc} are named {name!r}")
            out.append(Page(name, _title_cells(cell, marker)))
            raising = "title" not in marker
            if raising:
                out[-1].cells[0]["source"] = _raised(out[-1].cells[0]["source"])
            continue
        if raising and cell["cell_type"] == "markdown":
            if SECTION.search("".join(cell["source"])):
                raising = False
            else:
                cell = copy.deepcopy(cell)
                cell["source"] = _raised(cell["source"])
        out[-1].cells.append(cell)
    return out


def _raised(source) -> str:
    """``source`` with its ``###``-and-deeper headings one level up."""
    return DEEPER.sub(r"\1", "".join(source))


def chapter_of(doc: str) -> str | None:
    """The chapter of a further page (``chapters/06_transformer/inside`` ->
    ``chapters/06_transformer``); None for any other document."""
    parts = doc.split("/")
    return "/".join(parts[:2]) if len(parts) == 3 and parts[0] == "chapters" \
        else None


def page_notebook(nb, page: Page) -> dict:
    """A notebook of ``page``'s cells with the chapter's metadata (kernel,
    execution stamp)."""
    return {"cells": page.cells, "metadata": copy.deepcopy(nb["metadata"]),
            "nbformat": nb["nbformat"], "nbformat_minor": nb["nbformat_minor"]}
