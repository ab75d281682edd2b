"""The grader, end to end on chapter 1 (scripts/grade.py).

One class of four students is graded once (each notebook costs a kernel and a
few seconds):

* alice hands in the chapter itself, with its solutions, under another name;
* bob hands in the student notebook untouched;
* carol hands in the solutions with one mistake (softmax without the row
  maximum subtracted), renamed and without the student metadata;
* dave leaves exercise 1 as given but edits its check cell to pass the
  library's softmax (the grader must put the chapter's check back), and his
  attention loops forever (a 10 s limit per cell stops it; shorter
  limits make the other cells flaky on a busy machine).
"""

import csv
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import assignments as asg  # noqa: E402
import grade  # noqa: E402

CHAPTER = ROOT / "chapters" / "01_definition.ipynb"
LABELS = ["ex-definition-softmax", "ex-definition-attention",
          "ex-definition-cross"]


def edit(nb, find, old, new):
    cells = [c for c in nb.cells if find in c.source]
    assert len(cells) == 1, find
    assert old in cells[0].source, old
    cells[0].source = cells[0].source.replace(old, new)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grading")
    asg.build([CHAPTER], tmp / "assignments")
    student = tmp / "assignments" / "student" / CHAPTER.name
    subs = tmp / "submissions"
    for name in ("alice", "bob", "carol", "dave"):
        (subs / name).mkdir(parents=True)
    (subs / "alice" / "homework 1 (final).ipynb").write_bytes(
        CHAPTER.read_bytes())
    (subs / "bob" / CHAPTER.name).write_bytes(student.read_bytes())

    nb = nbformat.read(CHAPTER, as_version=4)
    edit(nb, "def my_softmax", "np.exp(S - S.max(axis=-1, keepdims=True))",
         "np.exp(S)")
    nb.metadata.pop(asg.META, None)
    nbformat.write(nb, subs / "carol" / "my_work.ipynb")

    nb = nbformat.read(student, as_version=4)
    edit(nb, "checks.check_softmax(", "my_softmax", "attention.softmax")
    edit(nb, "def my_attention", "...  # your code here",
         "while True:\n        pass")
    nbformat.write(nb, subs / "dave" / CHAPTER.name)

    out = tmp / "gradebook"
    rows = grade.grade_folder(subs, tmp / "assignments" / "grader" /
                              "manifest.json", out, timeout=10, jobs=2,
                              echo=lambda *a: None)
    book = {(r.student, r.exercise): r for r in rows}
    return out, rows, book


def test_gradebook_has_a_row_per_student_and_exercise(graded):
    out, rows, _ = graded
    with open(out / "gradebook.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == ["student", "chapter", "exercise", "points",
                              "max_points", "feedback"]
    assert [(r["student"], r["exercise"]) for r in table] == [
        (s, lab) for s in ("alice", "bob", "carol", "dave") for lab in LABELS]
    assert {r["chapter"] for r in table} == {"01_definition"}
    for name in ("alice", "bob", "carol", "dave"):
        text = (out / "feedback" / f"{name}.md").read_text()
        assert all(lab in text for lab in LABELS)
        assert (out / "executed" / name / CHAPTER.name).exists()


def test_the_chapter_with_its_solutions_scores_full_marks(graded):
    _, _, book = graded
    for label in LABELS:
        row = book["alice", label]
        assert row.points == row.max_points == 1, row.feedback
        assert row.feedback.startswith("Correct")


def test_the_untouched_student_notebook_scores_zero_and_runs_through(graded):
    out, _, book = graded
    for label in LABELS:
        row = book["bob", label]
        assert row.points == 0
        assert row.feedback.startswith("Not attempted"), row.feedback
    nb = nbformat.read(out / "executed" / "bob" / CHAPTER.name, as_version=4)
    assert grade.errors(nb) == []
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)


def test_one_wrong_exercise_loses_exactly_its_points(graded):
    out, _, book = graded
    assert book["carol", LABELS[0]].points == 0
    assert "exp(1000) overflows" in book["carol", LABELS[0]].feedback
    assert [book["carol", lab].points for lab in LABELS[1:]] == [1, 1]
    text = (out / "feedback" / "carol.md").read_text()
    assert "my_work.ipynb" in text and "exercise labels" in text


def test_edited_check_cell_is_restored(graded):
    _, _, book = graded
    assert book["dave", LABELS[0]].points == 0
    assert book["dave", LABELS[0]].feedback.startswith("Not attempted")


def test_endless_loop_is_stopped_and_reported(graded):
    out, _, book = graded
    stopped = book["dave", LABELS[1]]
    assert stopped.points == 0
    assert "still running after 10 s" in stopped.feedback
    later = book["dave", LABELS[2]]
    assert later.points == 0 and "never reached its check" in later.feedback
    assert "checks.check_attention(my_attention)" in later.feedback
    text = (out / "feedback" / "dave.md").read_text()
    assert "endless loop" in text and "did not run" in text


# ------------------------------------------------------------ no kernel
@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("manifest")
    asg.build([CHAPTER], tmp)
    return grade.load_manifest(tmp / "grader" / "manifest.json")


def test_notebooks_are_matched_by_metadata_labels_or_check_calls(manifest):
    chapter = nbformat.read(CHAPTER, as_version=4)
    assert grade.identify(chapter, manifest) == ("01_definition",
                                                 "exercise labels")
    tagged = nbformat.v4.new_notebook(
        metadata={asg.META: {"chapter": "ch-definition"}})
    assert grade.identify(tagged, manifest)[1] == "notebook metadata"
    only_code = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("checks.check_attention(f)")])
    assert grade.identify(only_code, manifest) == ("01_definition",
                                                   "check calls")
    other = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# My own notes"),
        nbformat.v4.new_code_cell("print(1)")])
    assert grade.identify(other, manifest) == (None, "")


def test_a_missing_check_cell_is_reported(manifest):
    ch = manifest["01_definition"]
    nb = nbformat.read(CHAPTER, as_version=4)
    nb.cells = [c for c in nb.cells
                if "checks.check_cross_attention(" not in c.source]
    where = grade.check_cells(nb, ch)
    assert set(where) == set(LABELS[:2])
    text = grade.why_missing(nb, LABELS[2], None, None, [],
                             ch["exercises"][2]["check_source"])
    assert "missing" in text and "checks.check_cross_attention(answer)" in text


def test_error_in_a_check_cell_is_named(manifest):
    nb = nbformat.read(CHAPTER, as_version=4)
    i = grade.check_cells(nb, manifest["01_definition"])[LABELS[0]]
    nb.cells[i].outputs = [nbformat.v4.new_output(
        "error", ename="NameError", evalue="name 'my_softmax' is not defined",
        traceback=[])]
    text = grade.why_missing(nb, LABELS[0], i, None, grade.errors(nb), "")
    assert "NameError: name 'my_softmax' is not defined" in text


def test_unreadable_and_unknown_notebooks_are_reported(manifest, tmp_path):
    (tmp_path / "erin").mkdir()
    (tmp_path / "erin" / "broken.ipynb").write_text("{not json")
    (tmp_path / "erin" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "erin" / ".ipynb_checkpoints" / "x.ipynb").write_text("{}")
    (tmp_path / "loose.ipynb").write_text("{}")
    pairs = grade.submissions(tmp_path)
    assert [p.name for _, p in pairs] == ["broken.ipynb"]
    g = grade.grade_notebook("erin", pairs[0][1], manifest, timeout=3)
    assert g.chapter is None and "could not be read" in g.problems[0]


def test_folder_with_no_gradable_notebook_is_reported(tmp_path):
    asg.build([CHAPTER], tmp_path / "a")
    subs = tmp_path / "subs"
    (subs / "erin").mkdir(parents=True)
    (subs / "erin" / "notes.ipynb").write_text(nbformat.writes(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("Hi")])))
    (subs / "loose.ipynb").write_text("{}")
    said = []
    rows = grade.grade_folder(subs, tmp_path / "a" / "grader" /
                              "manifest.json", tmp_path / "out",
                              echo=said.append)
    assert any("skipped loose.ipynb" in s for s in said)
    assert [(r.student, r.chapter, r.points) for r in rows] == [
        ("erin", "", 0.0)]
    assert "not one of the chapters' notebooks" in rows[0].feedback
    assert "notes.ipynb" in (tmp_path / "out" / "feedback" /
                             "erin.md").read_text()
