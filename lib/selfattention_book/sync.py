"""Write the library's code into the chapter cells that show it.

The library is the one source of the book's implementations. A chapter shows
one in a code cell whose metadata names what it shows::

    "metadata": {"selfattention": {"shows": ["selfattention.attention.softmax",
                                             "selfattention.attention.attention"]}}

This module writes that cell's text from the library: a comment naming the
file, then each function (or class) as its source reads, without the
``@boundary`` declaration of its arguments and with each docstring cut to its
summary line. The cell runs in the chapter, so what the chapter computes next
is exactly the code on the page, and the library runs the same lines (behind
its argument checks). ``make execute`` runs it (``scripts/sync_code.py``)
before executing; ``tests/book/test_code_on_page.py`` fails when a cell and
the library differ.

Usage: python scripts/sync_code.py [--check] chapters/*.ipynb
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import sys
import textwrap
from pathlib import Path

import nbformat

from . import META

#: The checkout: the cells name the library's files relative to it.
ROOT = Path(__file__).resolve().parents[2]


def _summary(doc: str) -> str:
    """The first paragraph of a docstring, on one line."""
    first = inspect.cleandoc(doc).split("\n\n")[0]
    return " ".join(first.split())


def _is_boundary(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = getattr(target, "id", None) or getattr(target, "attr", None)
    return name == "boundary"


def source_of(obj) -> str:
    """``obj``'s source without ``@boundary`` and with short docstrings."""
    obj = inspect.unwrap(obj)
    text = textwrap.dedent(inspect.getsource(obj))
    lines = text.split("\n")
    tree = ast.parse(text)
    edits = []                                  # (first, last, replacement)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
            continue
        for dec in node.decorator_list:
            if _is_boundary(dec):
                edits.append((dec.lineno - 1, dec.end_lineno - 1, []))
        body = node.body[0] if node.body else None
        if (isinstance(body, ast.Expr) and isinstance(body.value, ast.Constant)
                and isinstance(body.value.value, str)):
            indent = lines[body.lineno - 1][:body.col_offset]
            short = f'{indent}"""{_summary(body.value.value)}"""'
            edits.append((body.lineno - 1, body.end_lineno - 1, [short]))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last + 1] = new
    return "\n".join(lines).strip("\n")


def render(names: list[str]) -> str:
    """The text of a cell that shows ``names`` (dotted paths), in order."""
    blocks, current = [], None
    for name in names:
        module_name, attr = name.rsplit(".", 1)
        module = importlib.import_module(module_name)
        path = Path(module.__file__).resolve().relative_to(ROOT).as_posix()
        if path != current:
            blocks.append(f"# {path}")
            current = path
        blocks.append(source_of(getattr(module, attr)))
    return blocks[0] + "\n" + "\n\n\n".join(blocks[1:]) if len(blocks) > 1 \
        else blocks[0]


def shown_cells(nb):
    """(index, names) of every cell that shows library code."""
    for i, cell in enumerate(nb.cells):
        names = cell.metadata.get(META, {}).get("shows")
        if cell.cell_type == "code" and names:
            yield i, list(names)


def sync(path: Path, check: bool = False) -> list[int]:
    """Rewrite the shown cells of one chapter; return the indices changed.

    With ``check``, nothing is written.
    """
    nb = nbformat.read(path, as_version=4)
    changed = []
    for i, names in shown_cells(nb):
        text = render(names)
        if nb.cells[i].source != text:
            nb.cells[i].source = text
            changed.append(i)
    if changed and not check:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true",
                        help="only report cells that differ (exit 1 if any)")
    args = parser.parse_args(argv)
    stale = 0
    for path in args.notebooks:
        changed = sync(path, check=args.check)
        if changed:
            stale += 1
            verb = "differs" if args.check else "rewritten"
            print(f"{path}: cell(s) {changed} {verb}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
