"""Written parts scored by hand: scoresheets merged into every gradebook.

A gradebook of two students and two chapters is written as
``selfattention-grade`` writes one (no notebook runs); its scoresheets are
filled and merged with ``selfattention-grade --written``. The totals of
``gradebook.csv``, ``canvas.csv`` and ``moodle.csv`` must then agree with
the rows' points, and each kind of bad scoresheet must be refused with the
file and row named and the gradebook left as it was. Gradescope's results
and written questions are checked on their own here too.
"""

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from selfattention_course import gradebook, gradescope, written
from selfattention_course.cli import main
from selfattention_course.gradebook import Row
from selfattention_course.names import (CORRECT, FOR_REVIEW, NOT_DONE,
                                        TO_BE_READ, WRONG)

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = ["alice", "bob", "=carol"]          # a name a spreadsheet runs
TITLES = {"01_a": "First", "02_b": "Second"}
#: chapter -> auto-graded exercises (label, max) and written parts.
AUTO = {"01_a": [("ex-a-code", 2.0), ("ex-a-other", 1.0)],
        "02_b": [("ex-b-code", 3.0)]}
WRITTEN = {"01_a": {"ex-a-why": 3.0, "ex-a-other": 2.0},
           "02_b": {"ex-b-why": 4.0}}
#: A student whose notebook of a chapter was not graded: no written rows.
NO_NOTEBOOK = ("bob", "02_b")
#: Auto-points each student got.
GOT = {("alice", "ex-a-code"): 2.0, ("alice", "ex-a-other"): 1.0,
       ("alice", "ex-b-code"): 1.5, ("bob", "ex-a-code"): 0.0,
       ("bob", "ex-a-other"): 1.0, ("bob", "ex-b-code"): 3.0,
       ("=carol", "ex-a-code"): 2.0, ("=carol", "ex-a-other"): 0.0,
       ("=carol", "ex-b-code"): 0.0}


def class_rows() -> list[Row]:
    rows = []
    for student in STUDENTS:
        for stem, exercises in AUTO.items():
            for label, top in exercises:
                points = GOT[student, label]
                status = CORRECT if points == top else WRONG
                rows.append(Row(student, stem, label, points, top,
                                f"{status}: ...", code=status,
                                status=status))
            if (student, stem) == NO_NOTEBOOK:
                continue
            for label, top in WRITTEN[stem].items():
                rows.append(Row(student, stem, f"{label} (written)", 0.0,
                                top, "to be read: ...", code="to-be-read",
                                status=TO_BE_READ))
    return rows


@pytest.fixture
def book(tmp_path) -> Path:
    """A gradebook folder as a grading run writes it."""
    out = tmp_path / "gradebook"
    entries = {stem: [(label, "prompt", "**Rubric.** One point for x.", [])
                      for label in parts] for stem, parts in WRITTEN.items()}
    info = {"seed": 1, "titles": TITLES, "written_parts": WRITTEN}
    gradebook.write(out, class_rows(), STUDENTS, [], {}, TITLES, entries,
                    info)
    return out


def table(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def filled(book: Path, tmp_path: Path, scores: dict) -> Path:
    """The gradebook's scoresheets copied out and filled with ``scores``
    (``(student, chapter, label) -> (points, comment)``)."""
    folder = tmp_path / "scores"
    shutil.copytree(book / written.SCORES_DIR, folder)
    for sheet in folder.glob("*.csv"):
        lines = table(sheet)
        for line in lines[1:]:
            key = (line[0].removeprefix("'"), sheet.stem, line[1])
            if key in scores:
                line[2], line[3] = (str(v) for v in scores[key])
        with open(sheet, "w", newline="", encoding="utf-8") as out:
            csv.writer(out).writerows(lines)
    return folder


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        h.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


SCORES = {("alice", "01_a", "ex-a-why"): (2.5, "clear, no tie case"),
          ("alice", "01_a", "ex-a-other"): (2, ""),
          ("bob", "01_a", "ex-a-why"): (0, "=SUM(A1) missing"),
          ("=carol", "02_b", "ex-b-why"): (4, "full")}


def test_the_scoresheets_list_every_student_and_written_part(book):
    for stem, parts in WRITTEN.items():
        lines = table(book / written.SCORES_DIR / f"{stem}.csv")
        assert tuple(lines[0]) == written.SHEET_COLUMNS
        assert sorted((r[0].removeprefix("'"), r[1]) for r in lines[1:]) \
            == sorted((s, p) for s in STUDENTS for p in parts
                      if (s, stem) != NO_NOTEBOOK)
        assert all(r[2] == "" for r in lines[1:])


def test_a_filled_scoresheet_gives_one_total_per_chapter(book, tmp_path):
    assert main(["--out", str(book), "--written",
                 str(filled(book, tmp_path, SCORES))]) == 0
    expected = {}
    for student in STUDENTS:
        for stem in AUTO:
            auto = sum(GOT[student, label] for label, _ in AUTO[stem])
            hand = sum(p for (s, c, _), (p, _) in SCORES.items()
                       if s == student and c == stem)
            expected[student, stem] = auto + hand
    possible = {stem: sum(t for _, t in AUTO[stem]) +
                sum(WRITTEN[stem].values()) for stem in AUTO}
    rows = table(book / "gradebook.csv")
    for student, stem in expected:
        mine = [r for r in rows[1:] if r[0].removeprefix("'") == student
                and r[1] == stem]
        assert sum(float(r[3]) for r in mine) == expected[student, stem]
    canvas = table(book / "canvas.csv")
    columns = {title: i for i, title in enumerate(canvas[0])}
    moodle = table(book / "moodle.csv")
    for stem, title in TITLES.items():
        column = columns[f"{title} ({stem})"]
        assert float(canvas[1][column]) == possible[stem]
        for line in canvas[2:]:
            assert float(line[column]) == \
                expected[line[0].removeprefix("'"), stem]
        index = moodle[0].index(f"{title} ({stem})")
        for line in moodle[1:]:
            assert float(line[index]) == \
                expected[line[0].removeprefix("'"), stem]
    # No cell a spreadsheet would run, comments included.
    for name in ("gradebook.csv", "canvas.csv", "moodle.csv"):
        assert not any(cell.startswith("=") for line in
                       table(book / name) for cell in line)
    page = (book / "feedback" / "alice.md").read_text()
    assert "2.5 points" in page
    # The scoresheets now hold what was merged: merging them again changes
    # nothing but the folder named in run.json.
    before = {name: digest(book / name) for name in
              ("feedback", written.SCORES_DIR)}
    again = tmp_path / "again"
    shutil.copytree(book / written.SCORES_DIR, again)
    assert main(["--out", str(book), "--written", str(again)]) == 0
    assert table(book / "canvas.csv") == canvas
    assert table(book / "moodle.csv") == moodle
    assert table(book / "gradebook.csv") == rows
    assert before == {name: digest(book / name) for name in before}


def test_blank_points_leave_a_part_unscored(book, tmp_path):
    canvas = table(book / "canvas.csv")
    assert main(["--out", str(book), "--written",
                 str(filled(book, tmp_path, {}))]) == 0
    assert table(book / "canvas.csv") == canvas


BAD = {
    "unknown-student": ("01_a", ["mallory", "ex-a-why", "1", ""]),
    "unknown-exercise": ("01_a", ["alice", "ex-a-code", "1", ""]),
    "other-chapter-part": ("01_a", ["alice", "ex-b-why", "1", ""]),
    "above-maximum": ("01_a", ["alice", "ex-a-why", "3.5", ""]),
    "below-zero": ("02_b", ["alice", "ex-b-why", "-1", ""]),
    "no-notebook": ("02_b", ["bob", "ex-b-why", "1", ""]),
    "duplicate": ("01_a", ["bob", "ex-a-other", "1", "again"]),
    "malformed-number": ("02_b", ["alice", "ex-b-why", "2,5", ""]),
    "not-finite": ("02_b", ["alice", "ex-b-why", "nan", ""]),
    "short-row": ("02_b", ["alice", "ex-b-why"]),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_scoresheet_is_refused_and_changes_nothing(book, tmp_path,
                                                         kind, capsys):
    folder = filled(book, tmp_path, SCORES)
    stem, bad = BAD[kind]
    sheet = folder / f"{stem}.csv"
    lines = table(sheet)
    if kind == "duplicate":
        first = next(i for i, r in enumerate(lines) if r[0] == "bob" and
                     r[1] == "ex-a-other")
        lines[first][2] = "1"
    lines.append(bad)
    with open(sheet, "w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows(lines)
    before = digest(book)
    assert main(["--out", str(book), "--written", str(folder)]) == 1
    message = capsys.readouterr().err
    assert f"{sheet}, row {len(lines)}" in message
    assert digest(book) == before


@pytest.mark.parametrize("name, text", [
    ("03_c.csv", "student,exercise,points,comment\n"),
    ("01_a.csv", "student,points\nalice,1\n")])
def test_an_unknown_chapter_or_wrong_columns_are_refused(book, tmp_path,
                                                         name, text, capsys):
    folder = filled(book, tmp_path, SCORES)
    (folder / name).write_text(text)
    before = digest(book)
    assert main(["--out", str(book), "--written", str(folder)]) == 1
    assert str(folder / name) in capsys.readouterr().err
    assert digest(book) == before


def test_results_follow_gradescope_s_specification():
    rows = [Row("s", "01_a", "ex-a-code", 2.0, 2.0, "Correct: fine",
                status=CORRECT),
            Row("s", "01_a", "ex-a-other", 0.0, 1.0, "Wrong: on case 3",
                status=WRONG),
            Row("s", "01_a", "ex-a-copied", 0.0, 2.0, "For review: cell 4 "
                "calls the library", for_student="For review: see your "
                "instructor", status=FOR_REVIEW),
            Row("s", "01_a", "ex-a-why (written)", 0.0, 3.0, "to be read",
                status=TO_BE_READ),
            Row("s", "01_a", "ex-a-none", 0.0, 0.0, "", status=NOT_DONE),
            Row("s", "", "", 0.0, 0.0, "Refused: a.ipynb is a link")]
    data = gradescope.results(rows, [], "01_a", "First")
    assert json.loads(json.dumps(data)) == data
    tests = {t["name"]: t for t in data["tests"]}
    assert set(tests) == {"ex-a-code", "ex-a-other", "ex-a-copied"}
    assert data["score"] == 2.0
    assert tests["ex-a-other"]["visibility"] == "after_published"
    assert tests["ex-a-copied"]["visibility"] == "hidden"
    assert "calls the library" in tests["ex-a-copied"]["output"]
    assert "a.ipynb is a link" in data["output"]
    assert "calls the library" not in data["output"]
    assert data["visibility"] == "visible"


def test_each_written_part_is_a_question_with_its_points():
    chapter = {"title": "First", "file": "01_a", "exercises": [
        {"label": "ex-a-why", "written": {
            "points": 3, "prompt": "Why?",
            "rubric": "Solution text.\n\n**Rubric for the written part "
                      "(3 points).** Two points for the rule (one if "
                      "stated without reason), one for the case. Half a "
                      "point for (a) alone."}},
        {"label": "ex-a-code"}]}
    text = written.questions(chapter)
    assert "ex-a-why (3 points)" in text and "ex-a-code" not in text
    items = written.rubric_items(chapter["exercises"][0]["written"]
                                 ["rubric"], 3)
    assert [points for points, _ in items] == [3.0, 0.5]
    assert "add up to 3.5 points" in text
    assert written.rubric_items("No rubric paragraph here.", 2) == \
        [(2.0, "No rubric paragraph here.")]
