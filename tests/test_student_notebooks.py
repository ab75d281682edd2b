"""Every chapter's student notebook runs top to bottom (make assignments).

Solutions are replaced by stubs, so a chapter cell that uses a student's
answer outside its check (a print of the answer, say) would crash "Run all"
for students. This runs each student notebook in a fresh kernel, as the
grader does, and requires every check to report "not done".
"""

import copy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import assignments as asg  # noqa: E402
from grade import errors, run  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    return {a.stem: a for a in asg.build(CHAPTERS, out)}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_runs_to_the_end_and_reports_not_done(made, path):
    a = made[path.stem]
    nb = copy.deepcopy(a.student)
    results, stop = run(nb, 120)
    assert stop is None, f"the run stopped: {stop}"
    assert errors(nb) == [], f"cells raised: {errors(nb)}"
    status = {r["exercise"]: r["status"] for r in results}
    for ex in a.exercises:
        assert status.get(ex.label) == "not done", (ex.label, status.get(ex.label))
