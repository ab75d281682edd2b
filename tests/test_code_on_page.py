"""The code a chapter shows is the code the library runs (scripts/sync_code.py)."""

import ast
import importlib
import inspect
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from sync_code import render, shown_cells, source_of  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

# What each chapter that teaches an implementation must show.
MUST_SHOW = {
    "01_definition": ["selfattention.attention.softmax",
                      "selfattention.attention.attention"],
    "07_windows": ["selfattention.windows.window_partition",
                   "selfattention.windows.window_reverse",
                   "selfattention.windows.cyclic_shift",
                   "selfattention.windows.reverse_cyclic_shift",
                   "selfattention.windows.region_labels",
                   "selfattention.windows.rolled_window_masks",
                   "selfattention.windows.shifted_window_mask",
                   "selfattention.position.relative_position_index"],
    "08_nonlocal": ["selfattention.nonlocal_block.scope_mask",
                    "selfattention.nonlocal_block.nonlocal_op"],
    "09_matching": ["selfattention.matching.correlation_volume",
                    "selfattention.matching.lookup"],
}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_shown_cells_match_the_library(path):
    nb = nbformat.read(path, as_version=4)
    for index, names in shown_cells(nb):
        assert nb.cells[index].source == render(names), (
            f"{path.name}, cell {index} differs from the library: run "
            f"`make execute NB={path.relative_to(ROOT)}`")


@pytest.mark.parametrize("stem", sorted(MUST_SHOW))
def test_chapter_shows_the_implementation_it_teaches(stem):
    nb = nbformat.read(ROOT / "chapters" / f"{stem}.ipynb", as_version=4)
    shown = {name for _, names in shown_cells(nb) for name in names}
    assert set(MUST_SHOW[stem]) <= shown, set(MUST_SHOW[stem]) - shown


def test_shown_source_is_the_bare_function_that_runs():
    from selfattention import attention

    text = source_of(attention.attention)
    tree = ast.parse(text)
    fn = tree.body[0]
    assert fn.decorator_list == []                  # no argument checks
    doc = ast.get_docstring(fn)
    assert "\n" not in doc and doc                  # the summary line only
    bare = inspect.unwrap(attention.attention)
    # the same statements as the function the library calls
    full = ast.parse(inspect.getsource(bare).strip()).body[0]
    assert [ast.dump(s) for s in fn.body[1:]] == \
        [ast.dump(s) for s in full.body[1:]]


def test_shown_functions_are_short():
    for path in CHAPTERS:
        nb = nbformat.read(path, as_version=4)
        for _, names in shown_cells(nb):
            for name in names:
                module, attr = name.rsplit(".", 1)
                obj = getattr(importlib.import_module(module), attr)
                body = source_of(obj).split("\n")
                assert len(body) <= 30, f"{name}: {len(body)} lines"
