"""Grade the instructors' page's sample class and print its gradebook.

Seven students hand in chapter 1 (``make sample-gradebook``):

- alice: the instructor's version, solutions and all (renamed);
- bob: the student notebook as given;
- carol: the solutions, but an attention that does not subtract the row
  maximum before ``exp``;
- dave: the solutions, but a ``my_tempered_attention`` that never returns;
- erin: an answer that calls the library's ``attention``;
- frank: a FIFO named ``homework.ipynb``;
- gina: the student notebook with one written answer and nothing else.

The printed CSV is what ``appendices/instructors/workflow.md`` shows; the test
``test_the_sample_gradebook_on_the_instructors_page_is_current`` checks that
the page's rows still fit the exercises' points.
"""

import os
import sys
import tempfile
from pathlib import Path

import nbformat

from selfattention_course import assign
from selfattention_course.cli import grade_folder
from selfattention_course.names import META

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "01_definition.ipynb"


def _edit(nb, marker: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the one code cell holding ``marker``."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code"
               and marker in c.source]
    assert old in cell.source, (marker, old)
    cell.source = cell.source.replace(old, new)


def _class(folder: Path, student_nb: Path) -> None:
    solutions = CHAPTER.read_text(encoding="utf-8")
    given = student_nb.read_text(encoding="utf-8")

    def hand_in(student: str, text: str) -> None:
        (folder / student).mkdir(parents=True)
        (folder / student / "homework.ipynb").write_text(text,
                                                         encoding="utf-8")

    hand_in("alice", solutions)
    hand_in("bob", given)
    nb = nbformat.reads(solutions, as_version=4)
    _edit(nb, "def my_tempered_attention", "np.exp(S - S.max(axis=-1, "
          "keepdims=True))", "np.exp(S)")
    hand_in("carol", nbformat.writes(nb))
    nb = nbformat.reads(solutions, as_version=4)
    _edit(nb, "def my_tempered_attention", "    S = Q @ np.swapaxes",
          "    while True:\n        pass\n    S = Q @ np.swapaxes")
    hand_in("dave", nbformat.writes(nb))
    nb = nbformat.reads(given, as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code"
               and "def my_tempered_attention" in c.source]
    cell.source = ("from selfattention.attention import attention\n\n\n"
                   "def my_tempered_attention(Q, K, V, tau):\n"
                   "    return attention(Q / tau[..., :, None], K, V)\n")
    hand_in("erin", nbformat.writes(nb))
    (folder / "frank").mkdir()
    os.mkfifo(folder / "frank" / "homework.ipynb")
    nb = nbformat.reads(given, as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "markdown"
               and isinstance(c.metadata.get(META), dict)
               and c.metadata[META].get("written") == "ex-definition-moved"]
    cell.source = ("**Your answer.**\n\nA roll by whole patches permutes "
                   "the tokens, so a query's best key moves with its "
                   "content, modulo 8. After the 2-pixel shift the "
                   "squares' horizontal borders fall on boundaries between "
                   "rows of patches, so patch (0, 1) sees no edge and "
                   "attends almost uniformly.")
    hand_in("gina", nbformat.writes(nb))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        assign.build([CHAPTER], tmp / "a")
        _class(tmp / "class", tmp / "a" / "student" / CHAPTER.name)
        grade_folder(tmp / "class", tmp / "a" / "grader" / "manifest.json",
                     tmp / "out", jobs=2, echo=lambda *a: print(
                         *a, file=sys.stderr))
        sys.stdout.write((tmp / "out" / "gradebook.csv").read_text(
            encoding="utf-8"))


if __name__ == "__main__":
    main()
