"""Docstrings point to the book by label, and every label they name exists.

A docstring that says "chapter 8" or "Exercise 6.3" goes stale when the
chapters are renumbered; one that says :ref:`ch-windows` is a link in the
library's reference (autodoc) and is checked here against the labels the
chapters and appendices define. The test reads every module under ``lib/``
with ``ast`` (nothing is imported).
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "lib").rglob("*.py"))

NUMBERED = re.compile(r"\b(?:[Cc]hapters?|[Ee]xercises?|[Ss]ections?)"
                      r"\s+\d")
REF = re.compile(r":ref:`(?:[^`<]*<)?([^`<>]+)>?`")

# Files whose docstrings still number chapters or exercises by hand, to be
# converted to labels (each file's line goes once it is): the test lists
# their numbered docstrings but fails only on the other files.
NUMBERED_STILL: set = set()


def _labels() -> set:
    """Every ``(label)=`` target and exercise ``:label:`` of the book."""
    texts = [p.read_text(encoding="utf-8") for p in
             [*ROOT.glob("*.md"), *(ROOT / "appendices").rglob("*.md")]]
    for nb in [*(ROOT / "chapters").glob("*.ipynb"),
               *(ROOT / "appendices").glob("*.ipynb")]:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        texts += ["".join(c["source"]) for c in cells
                  if c["cell_type"] == "markdown"]
    labels = set()
    for text in texts:
        labels |= set(re.findall(r"^\(([\w-]+)\)=\s*$", text, re.M))
        labels |= set(re.findall(r"^:label:\s*([\w-]+)", text, re.M))
    return labels


def _docstrings():
    """``(file, owner, docstring)`` of every module, class and function."""
    for path in MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(ROOT / "lib"))
        for node in [tree, *ast.walk(tree)]:
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    owner = getattr(node, "name", "<module>")
                    yield where, owner, doc


DOCSTRINGS = list(_docstrings())


def test_the_scan_reads_the_library():
    files = {where for where, _, _ in DOCSTRINGS}
    assert "selfattention/attention.py" in files
    assert len(DOCSTRINGS) > 200


def test_docstrings_name_chapters_by_label_not_by_number():
    numbered = sorted((where, owner) for where, owner, doc in DOCSTRINGS
                      if NUMBERED.search(doc))
    listed = [n for n in numbered if n[0] in NUMBERED_STILL]
    print("numbered by hand, in files still listed:", *listed, sep="\n  ")
    assert [n for n in numbered if n[0] not in NUMBERED_STILL] == [], (
        "write :ref:`ch-...` instead of a chapter or exercise number")


@pytest.mark.parametrize("where, owner, doc",
                         [d for d in DOCSTRINGS if REF.search(d[2])],
                         ids=lambda v: v if isinstance(v, str) and
                         len(v) < 60 else "")
def test_every_label_a_docstring_names_exists(where, owner, doc):
    missing = set(REF.findall(doc)) - LABELS
    assert not missing, f"{where} {owner}: no such label {sorted(missing)}"


LABELS = _labels()
