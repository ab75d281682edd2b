"""The code a chapter shows is the code the library runs.

The library is the source: ``scripts/sync_code.py`` writes every cell whose
metadata says ``{"selfattention": {"shows": [...]}}`` from the library's
functions (decorators dropped, docstrings cut to their summary line). These
tests run that script as the contributor does, and read the chapters the
reader sees.
"""

import ast
import importlib
import inspect
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
SYNC = ROOT / "scripts" / "sync_code.py"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

# What each chapter that teaches an implementation must show.
MUST_SHOW = {
    "01_definition": ["selfattention.attention.softmax",
                      "selfattention.attention.attention"],
    "03_multihead": ["selfattention.attention.split_heads",
                     "selfattention.attention.merge_heads",
                     "selfattention.attention.multi_head_attention"],
    "04_masks": ["selfattention.masks.causal_mask",
                 "selfattention.masks.padding_mask",
                 "selfattention.masks.local_mask",
                 "selfattention.masks.neighborhood_mask",
                 "selfattention.masks.window_mask"],
    "06_transformer": ["selfattention.vit.Block",
                       "selfattention.vit.TinyViT"],
    "08_cost": ["selfattention.blockwise.online_softmax_update",
                "selfattention.blockwise.blockwise_attention"],
    "09_windows": ["selfattention.windows.window_partition",
                   "selfattention.windows.window_reverse",
                   "selfattention.windows.cyclic_shift",
                   "selfattention.windows.reverse_cyclic_shift",
                   "selfattention.windows.region_labels",
                   "selfattention.windows.rolled_window_masks",
                   "selfattention.windows.shifted_window_mask",
                   "selfattention.position.relative_position_index",
                   "selfattention.windows.layer_norm",
                   "selfattention.windows.patch_merging"],
    "10_nonlocal": ["selfattention.nonlocal_block.scope_mask",
                    "selfattention.nonlocal_block.nonlocal_op"],
    "11_matching": ["selfattention.matching.correlation_volume",
                    "selfattention.matching.lookup",
                    "selfattention.stereo.epipolar_mask",
                    "selfattention.stereo.disparity_volume",
                    "selfattention.stereo.soft_argmax",
                    "selfattention_models.stereo_matcher.match_rows"],
}


def shown_cells(path):
    """(cell, names) of every code cell of a chapter that shows library code."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        names = cell.metadata.get("selfattention", {}).get("shows")
        if cell.cell_type == "code" and names:
            yield cell, list(names)


def library_object(name):
    module, attr = name.rsplit(".", 1)
    return getattr(importlib.import_module(module), attr)


def sync(*args):
    return subprocess.run([sys.executable, str(SYNC), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)


@pytest.mark.slow        # a fresh interpreter imports the whole library
def test_every_shown_cell_is_what_the_library_writes():
    done = sync("--check", *CHAPTERS)
    assert done.returncode == 0, (
        f"{done.stdout}{done.stderr}\nrun `make execute NB=<chapter>` to "
        f"rewrite these cells from the library")


@pytest.mark.slow                    # runs the sync script on every chapter
def test_the_check_catches_a_cell_edited_by_hand(tmp_path):
    path = tmp_path / "01_definition.ipynb"
    shutil.copy(ROOT / "chapters" / path.name, path)
    nb = nbformat.read(path, as_version=4)
    cell, _ = next(shown_cells(path))
    index = nb.cells.index(cell)
    nb.cells[index].source += "\n# a local tweak"
    nbformat.write(nb, path)
    assert sync("--check", path).returncode == 1
    assert sync(path).returncode == 0                   # rewrites the cell
    assert sync("--check", path).returncode == 0
    assert "a local tweak" not in nbformat.read(path, as_version=4).cells[
        index].source


@pytest.mark.parametrize("stem", sorted(MUST_SHOW))
def test_chapter_shows_the_implementation_it_teaches(stem):
    shown = {name for _, names in
             shown_cells(ROOT / "chapters" / f"{stem}.ipynb")
             for name in names}
    assert set(MUST_SHOW[stem]) <= shown, set(MUST_SHOW[stem]) - shown


def statements(fn_node):
    """The statements of a function without its docstring, as AST dumps."""
    body = fn_node.body
    if ast.get_docstring(fn_node) is not None:
        body = body[1:]
    return [ast.dump(s) for s in body]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_shown_functions_are_the_bare_functions_the_library_runs(path):
    for cell, names in shown_cells(path):
        defs = {node.name: node for node in ast.parse(cell.source).body
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        for name in names:
            shown = defs[name.rsplit(".", 1)[1]]
            assert shown.decorator_list == [], f"{name}: argument checks"
            doc = ast.get_docstring(shown)
            assert doc and "\n" not in doc, f"{name}: summary line only"
            bare = inspect.unwrap(library_object(name))
            source = textwrap.dedent(inspect.getsource(bare))
            assert statements(shown) == statements(ast.parse(source).body[0])
            lines = ast.get_source_segment(cell.source, shown).split("\n")
            assert len(lines) <= 30, f"{name}: {len(lines)} lines"
