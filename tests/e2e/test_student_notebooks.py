"""Every chapter's student notebook runs top to bottom in the grader.

Solutions are replaced by stubs, so a chapter cell that uses a student's
answer outside its check (a print of the answer, say) would crash "Run all"
for students. The student notebooks are graded here as a class of their
own, in the sandbox, two at a time: each must run to the end without an
error, and every exercise must be "not attempted". make test grades the
sample chapter's (tests/support.py), make sweep every other one.
"""

import os
from pathlib import Path

import pytest

from selfattention_course import assign
from selfattention_course.cli import grade_folder
from selfattention_course.sandbox import Bubblewrap, Limits
from support import sampled, stem

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

# CI must run these: there a missing bubblewrap is a failure, not a skip.
# Sandboxed notebook runs: make test runs them, make unit does not.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not Bubblewrap().works() and not os.environ.get("CI"),
    reason="bubblewrap cannot run here")]


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """The student notebooks of the chapters this run tests, graded as one
    class."""
    chosen = sorted({item.callspec.params["path"]
                     for item in request.session.items
                     if getattr(item, "module", None) is request.module})
    out = tmp_path_factory.mktemp("student")
    made = assign.build(chosen, out)
    rows, graded = grade_folder(out / "student", out / "grader" /
                                "manifest.json", out / "gradebook", jobs=2,
                                limits=Limits(cell_seconds=120,
                                              notebook_seconds=300),
                                echo=lambda *a: None)
    return made, {g.student: g for g in graded}


@pytest.mark.parametrize("path", sampled(CHAPTERS, stem), ids=stem)
def test_student_notebook_runs_to_the_end_and_reports_not_done(graded, path):
    made, by_student = graded
    g = by_student[path.stem]
    assert g.chapter == path.stem and g.problems == [], g.problems
    labels = [row for a in made if a.stem == path.stem for i in a.items
              for row in [i.label] + [f"{i.label} (written)"]
              * bool(i.exercise.written)]
    assert [r.exercise for r in g.rows] == labels
    for row in g.rows:
        # an exercise whose points are all in its written part has an
        # auto-graded row that says so, whatever the notebook holds
        untouched = ("to-be-read" if row.max_points == 0
                     and not row.exercise.endswith("(written)")
                     else "not-done")
        assert row.points == 0 and row.code == untouched, \
            (row.exercise, row.code, row.feedback)
