"""The split between the student's package and the grader's judges.

What a graded notebook can reach (``selfattention_exercises``) holds the
exercises' declarations, ``run`` helpers and student tools; the judges,
case generators, replays and reference helpers live in
``selfattention_course.judges`` and are hidden from the sandbox.
"""

import ast
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from exercise_answers import temperatures_for
import selfattention_exercises as package
from selfattention_exercises.core import NOT_GRADED, Exercise
from selfattention_course import judges
from selfattention_course.assign import find_exercises
from selfattention_course.sandbox import Bubblewrap, Limits
from selfattention_course.sandbox.bubblewrap import _grader_only

EXERCISES = find_exercises()
STUDENT = Path(package.__file__).parent


def test_every_exercise_has_its_judge_with_the_grader():
    stems = set(judges.modules())
    for label, (module, _, ex) in EXERCISES.items():
        assert ex.judge is None and ex.cases is None and ex.replay is None, \
            f"{label} is judged in the student's package"
        assert module.rsplit(".", 1)[-1] in stems
        assert callable(ex.grading().judge), label


def test_a_judge_with_a_case_too_slow_for_a_wrong_method_marks_it_wide():
    """``Judge.wide`` lets the full-marks test judge such cases on a few
    draws: a judge that times out on a wide case must say which it is."""
    for label, (_, _, ex) in EXERCISES.items():
        judge = ex.grading()
        assert (judge.slow is not None) == (judge.wide > 0), label
        if judge.wide:
            draw = ex.draw(np.random.default_rng(0))
            assert 0 < judge.wide < len(draw), label


def test_each_judges_module_judges_only_its_own_chapter():
    for stem in judges.modules():
        table = __import__(f"selfattention_course.judges.{stem}",
                           fromlist=["JUDGES"]).JUDGES
        for label in table:
            module = EXERCISES[label][0]
            assert module == f"selfattention_exercises.{stem}", label


@pytest.mark.parametrize("path", sorted(STUDENT.glob("*.py")),
                         ids=lambda p: p.stem)
def test_the_student_package_imports_nothing_of_the_grader(path):
    """``Exercise.grading`` finds the judges through an entry point, which
    names the grader's finder without importing it here (absent in the
    sandbox, present on a student's machine)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("selfattention_course"):
            found.append(node.lineno)
        elif isinstance(node, ast.Import):
            found += [node.lineno for a in node.names
                      if a.name.startswith("selfattention_course")]
    assert found == [], path.name


def test_the_sandbox_hides_the_judges(tmp_path):
    hidden = _grader_only()
    assert hidden and Path(hidden[0]).name == "judges"
    cmd = Bubblewrap().command(tmp_path, 0, Limits())
    at = cmd.index(hidden[0])
    assert cmd[at - 1] == "--tmpfs"


def test_without_the_judges_a_check_judges_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "selfattention_course.judges", None)
    ex = EXERCISES["ex-definition-limits"][2]
    fb = ex.feedback(lambda Q, K, V: (V, V))
    assert fb.status == NOT_GRADED and fb.points == 0
    case = [{"Q": np.eye(2), "K": np.eye(2), "V": np.eye(2)}]
    fb = ex.assess({"outcomes": [{"output": (np.eye(2), np.eye(2))}],
                    "called": [], "tampered": False}, case)
    assert fb.status == NOT_GRADED and fb.points == 0


def test_an_exercise_without_auto_points_needs_a_written_part():
    with pytest.raises(ValueError):
        Exercise("ex-x-y", kind="Experiment", points=0, answers=("a",))
    ex = Exercise("ex-x-y", kind="Experiment", points=0, answers=("a",),
                  written="why?", written_points=3, judge=lambda out: None)
    assert ex.points == 0 and ex.written_points == 3


def test_a_diagnosis_carries_its_code():
    ex = EXERCISES["ex-definition-tempered"][2]
    fb = ex.feedback(lambda Q, K, V, tau: (Q, np.swapaxes(Q, 1, 2)),
                     temperatures_for)
    assert fb.status == "wrong" and fb.code == "shape"
    assert ex.feedback(None, None).code == "not-done"


#: Lower-case words joined by hyphens; a later word may name a symbol
#: ("output-not-AV").
KEBAB = re.compile(r"[a-z0-9]+(-[a-zA-Z0-9]+)*")

def _wrong_calls(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name) and node.func.id == "Wrong"]


@pytest.mark.parametrize(
    "path", sorted(Path(judges.__file__).parent.glob("*.py")),
    ids=lambda p: p.stem)
def test_every_diagnosis_of_the_judges_names_its_code(path):
    """A gradebook counts diagnoses by code: a ``Wrong`` raised without
    one would read "wrong", whatever it diagnoses."""
    for call in _wrong_calls(path):
        where = f"{path.name}:{call.lineno}"
        codes = call.args[1:2] + [k.value for k in call.keywords
                                  if k.arg == "code"]
        assert len(codes) == 1, f"{where} raises Wrong without a code"
        code = codes[0]
        if isinstance(code, ast.Constant):
            assert isinstance(code.value, str) and \
                KEBAB.fullmatch(code.value) and code.value != "wrong", where


def test_the_harvest_loads_every_core_module_of_the_checks_afresh():
    from selfattention_course import harvest
    from selfattention_exercises import CORE_MODULES

    assert harvest.CHECKS_CORE == CORE_MODULES
    modules = harvest.fresh_modules("selfattention_exercises.definition")
    assert modules[0].__name__ == harvest.CORE
    assert modules[0] is not sys.modules[harvest.CORE]
