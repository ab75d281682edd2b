"""A chapter notebook read as several pages (selfattention_book.pages).

Nothing is lost or repeated between the notebook and its pages, the toc
lists exactly the pages the markers make, and a malformed marker is
refused. The built pages are measured in tests/e2e/test_layout.py (at most
MAX_SCREENS laptop screens each) and numbered in
tests/book/test_plain_notebooks.py (the plain notebooks' numbers are the
site's).
"""

import copy
import json
from pathlib import Path

import pytest
import yaml

from selfattention_course.names import META
from selfattention_book.pages import (PAGE_KEY, chapter_of, page_notebook,
                                        pages)

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def markdown(source: str, page: dict | None = None) -> dict:
    metadata = {META: {PAGE_KEY: page}} if page is not None else {}
    return {"cell_type": "markdown", "id": str(abs(hash(source)))[:8],
            "metadata": metadata, "source": source}


def code(source: str) -> dict:
    return {"cell_type": "code", "id": str(abs(hash(source)))[:8],
            "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}


def notebook(*cells) -> dict:
    return {"cells": list(cells), "metadata": {"kernelspec": {"name": "x"}},
            "nbformat": 4, "nbformat_minor": 5}


def text_of(cells) -> list[str]:
    return ["".join(c["source"]) for c in cells]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_pages_hold_every_cell_of_the_chapter_once(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    doc = f"chapters/{path.stem}"
    split = pages(nb, doc)
    assert [p.doc for p in split][0] == doc
    ids = {c["id"] for c in nb["cells"]}
    cells = [c for page in split for c in page.cells]
    kept = [c for c in cells if c["id"] in ids]
    titled = [c for c in nb["cells"] if "title" in c["metadata"].get(
        META, {}).get(PAGE_KEY, {})]
    assert len(cells) - len(kept) == len(titled)   # a title of its own
    assert [c["id"] for c in kept] == [c["id"] for c in nb["cells"]]
    for before, after in zip(nb["cells"], kept):
        if before["cell_type"] == "code":
            assert before == after                 # code and outputs as run
        else:
            # only heading levels change, never the words
            strip = "".join(before["source"]).replace("#", "")
            assert "".join(after["source"]).replace("#", "") == strip


def test_a_raised_title_takes_its_subsections_with_it():
    nb = notebook(markdown("(ch-x)=\n# X\n\nintro"), code("a = 1"),
                  markdown("(sec-y)=\n## Y\n\ntext\n\n### Y.a",
                           {"file": "y"}),
                  markdown("### Y.b"), markdown("## Z\n\n### Z.a"))
    first, second = pages(nb, "chapters/x")
    assert second.doc == "chapters/x/y"
    assert text_of(second.cells) == ["(sec-y)=\n# Y\n\ntext\n\n## Y.a",
                                     "## Y.b", "## Z\n\n### Z.a"]
    assert text_of(first.cells)[1] == "a = 1"
    assert META not in second.cells[0]["metadata"]
    assert PAGE_KEY in nb["cells"][2]["metadata"][META]   # not mutated


def test_a_title_of_its_own_comes_before_the_cell():
    nb = notebook(markdown("# X"), markdown("## Y\n\n### Y.a",
                                            {"file": "y", "title": "Both"}))
    _, second = pages(nb, "chapters/x")
    assert text_of(second.cells) == ["# Both", "## Y\n\n### Y.a"]
    made = page_notebook(nb, second)
    assert made["metadata"] == nb["metadata"]
    assert made["cells"] is second.cells


def test_a_chapter_without_markers_is_one_page():
    nb = notebook(markdown("# X"), code("1"), markdown("## Y"))
    assert [(p.doc, p.cells) for p in pages(nb, "chapters/x")] == \
        [("chapters/x", nb["cells"])]


@pytest.mark.parametrize("marker, first", [
    ({"file": "Has Spaces"}, "## Y"),
    ({"file": "../up"}, "## Y"),
    ({"title": "no file"}, "## Y"),
    ("y", "## Y"),
    ({"file": "y"}, "text first\n\n## Y"),
    ({"file": "y"}, "### Y"),
])
def test_a_malformed_marker_is_refused(marker, first):
    nb = notebook(markdown("# X"), markdown(first, marker))
    with pytest.raises(ValueError):
        pages(nb, "chapters/x")


def test_two_pages_of_one_name_are_refused():
    nb = notebook(markdown("# X"), markdown("## Y", {"file": "y"}),
                  markdown("## Z", {"file": "y"}))
    with pytest.raises(ValueError):
        pages(nb, "chapters/x")


def test_the_toc_lists_exactly_the_pages_of_each_chapter():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = {entry["file"]: [s["file"] for s in entry.get("sections", [])]
              for part in toc["parts"] for entry in part["chapters"]}
    for path in CHAPTERS:
        doc = f"chapters/{path.stem}"
        split = pages(json.loads(path.read_text(encoding="utf-8")), doc)
        assert listed[doc] == [p.doc for p in split[1:]], doc


def test_the_pages_leave_the_notebook_as_it_was():
    nb = json.loads(CHAPTERS[0].read_text(encoding="utf-8"))
    before = copy.deepcopy(nb)
    pages(nb, "chapters/x")
    assert nb == before


def test_a_further_page_belongs_to_its_chapter():
    assert chapter_of("chapters/06_transformer/inside") == \
        "chapters/06_transformer"
    for doc in ("chapters/06_transformer", "appendices/pytorch", "intro",
                "appendices/x/y"):
        assert chapter_of(doc) is None
