"""What every exercise declaration promises, and how a check behaves."""

import ast
import builtins
import contextlib
import io
import os
import secrets
import types
import zlib
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat

import numpy as np
import pytest

from exercise_answers import own, temperatures_for
from support import sampled, stem
from selfattention.attention import softmax as library_softmax
from selfattention_exercises import definition
from selfattention_exercises.core import (GRADING_ENV, Exercise, Feedback,
                                          to_plain)
from selfattention_course.assign import find_exercises, make_assignment

softmax = own(library_softmax)
EXERCISES = find_exercises()


def tempered(Q, K, V, tau):
    """A right answer to chapter 1's first exercise."""
    A = softmax(Q @ np.swapaxes(K, -1, -2)
                / (np.sqrt(Q.shape[-1]) * tau[..., None]))
    return A @ V, A


def test_a_check_prints_its_feedback_and_returns_nothing(capsys):
    check = definition.check_tempered_attention
    assert check(tempered, temperatures_for) is None
    out = capsys.readouterr().out
    assert out.startswith("[ex-definition-tempered] Correct")
    fb = check.feedback(tempered, temperatures_for)
    assert fb.passed and fb.points == fb.max_points == check.points


def test_feedback_shown_as_html_is_escaped_text_that_wraps_at_words():
    """A notebook shows the feedback as a block of its own (the <pre> of a
    printed line breaks words in JupyterLab); the message may quote what a
    student's code raised, so none of it is read as markup."""
    import html
    import re

    from selfattention_exercises.core import Feedback, WRONG

    hostile = "<img src=x onerror=alert(1)> & </div><script>x</script>"
    fb = Feedback("ex-a-b", WRONG, hostile, 0.0, 1.0)
    shown = fb._repr_html_()
    assert "<img" not in shown and "<script" not in shown
    assert shown.count("</div>") == 1 and shown.endswith("</div>")
    inner = re.sub(r"^<div[^>]*>|</div>$", "", shown)
    assert html.unescape(inner) == str(fb)


def test_in_the_grader_s_kernel_the_check_stays_silent(capsys, monkeypatch):
    monkeypatch.setenv(GRADING_ENV, "1")
    definition.check_tempered_attention(lambda *a: 1 / 0)
    out = capsys.readouterr().out
    assert "grader" in out and "Not yet" not in out
    fb = definition.check_moved.feedback(lambda query, shift: (5, 7))
    assert not fb.passed and fb.status == "not graded"


# ------------------------------------------------------------ declarations
def test_every_exercise_is_declared_completely():
    assert len(EXERCISES) >= 40
    for label, (module, name, ex) in EXERCISES.items():
        assert label == ex.label and label.startswith("ex-")
        assert getattr(__import__(module, fromlist=[name]), name) is ex
        assert ex.points > 0 or ex.written_points > 0
        assert ex.doc and ex.success


def test_every_reference_names_a_library_function():
    """A renamed library function must be renamed in the declarations too."""
    for _, _, ex in EXERCISES.values():
        assert set(ex.targets()) == set(ex.references), ex.label
        for fn in ex.targets().values():
            assert callable(fn) or isinstance(fn, types.ModuleType)


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_cases_are_plain_data_and_change_with_the_seed(label):
    ex = EXERCISES[label][2]
    first = ex.draw(np.random.default_rng(1))
    for case in first:
        for value in case.values():
            plain = to_plain(value)
            assert type(plain) is type(value) or isinstance(value, np.integer)
    if ex.grading().cases is not None:
        again = ex.draw(np.random.default_rng(2))
        assert any(not _same(a, b) for a, b in zip(first, again)), \
            "hidden cases must depend on the seed"


def _same(a, b):
    return a.keys() == b.keys() and all(
        np.array_equal(np.asarray(a[k]), np.asarray(b[k]))
        if np.shape(a[k]) == np.shape(b[k]) else False for k in a)


@pytest.mark.slow                   # about 3 s: every chapter's checks
def test_a_check_never_raises_and_accepts_no_wrong_number_of_answers():
    for _, _, ex in EXERCISES.values():
        for answers in [(), (1, 2, 3), ("x",) * len(ex.answers),
                        (lambda *a: "x",) * len(ex.answers),
                        (object(),) * len(ex.answers)]:
            fb = ex.feedback(*answers)
            assert isinstance(fb, Feedback) and fb.points == 0


def test_starters_are_not_done_for_every_exercise():
    for _, _, ex in EXERCISES.values():
        fb = ex.feedback(*([None] * len(ex.answers)))
        assert fb.status == "not done", (ex.label, fb)


def test_attempt_returns_plain_data_only():
    ex = definition.check_tempered_attention
    cases = ex.public_cases()
    result = ex.attempt([lambda Q, K, V, tau: (Q, {"A": 1}),
                         temperatures_for], cases)
    (Y, A), _ = result["outcomes"][0]["output"]
    assert isinstance(Y, np.ndarray) and repr(A) == "Opaque('dict')"
    assert ex.assess(result, cases).status == "wrong"


def test_a_declaration_checks_its_kind_and_answers():
    with pytest.raises(ValueError, match="kind"):
        Exercise("ex-x", kind="Guess", points=1, answers=("a",),
                 judge=lambda out: None)
    with pytest.raises(ValueError, match="names"):
        Exercise("ex-x", kind="Derive", points=1, answers=("not a name",),
                 judge=lambda out: None)


# ------------------------------------------------------------ solutions
CHAPTERS = sorted(Path(__file__).resolve().parents[2].glob("chapters/*.ipynb"))


def _names(source: str) -> tuple[set, set]:
    """Names a cell reads from its module and names it assigns there."""
    tree = ast.parse(source)
    stored = {n.id for n in ast.walk(tree)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    stored |= {n.name for n in tree.body
               if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    read = {n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read, stored


def _run_with_context(cells: list, answer_ids: list, namespace: dict) -> None:
    """Run the answer cells after the earlier cells that define what they
    read (an Experiment's solution uses the chapter's data and results)."""
    codes = [c for c in cells if c.cell_type == "code"]
    done: set = set()

    def run(index: int) -> None:
        if index in done:
            return
        done.add(index)
        read, _ = _names(codes[index].source)
        for name in sorted(read - set(namespace) - set(dir(builtins))):
            for k in range(index - 1, -1, -1):      # the latest definition
                if name in _names(codes[k].source)[1]:
                    run(k)
                    break
        exec(codes[index].source, namespace)

    for k, cell in enumerate(codes):
        if cell.get("id") in answer_ids:
            run(k)


#: Draws of hidden cases per exercise, as the grader makes them for one
#: student each; the seed of the run is printed (HIDDEN_SEED replays it).
HIDDEN_DRAWS = 200
#: Draws whose wide cases (``Judge.wide``: sizes there for their cost, a
#: second or so each for the intended method) are judged too; the other
#: draws keep their small cases, where rounding and saturation vary.
WIDE_DRAWS = 5
#: Exercises whose every case runs a trained model (a pass per patch, a
#: gradient): fewer draws, as many cases in all as the others take time.
MODEL_DRAWS = {"ex-misconceptions-faithfulness": 50,
               "ex-misconceptions-gradient": 50,
               "ex-transformer-shift": 50}
HIDDEN_SEED = int(os.environ.get("HIDDEN_SEED", secrets.randbits(32)))


def _without_wide(draw: list, wide: int, k: int) -> list:
    """The cases of the ``k``-th draw, its last ``wide`` ones only in the
    first :data:`WIDE_DRAWS` draws."""
    return draw if k < WIDE_DRAWS or not wide else draw[:-wide]


def test_fewer_draws_name_exercises_with_auto_points():
    for label, draws in MODEL_DRAWS.items():
        assert EXERCISES[label][2].points > 0 and 0 < draws < HIDDEN_DRAWS


@pytest.mark.slow
@pytest.mark.parametrize("path", sampled(CHAPTERS, stem), ids=stem)
def test_the_chapter_s_solutions_get_full_marks_on_hidden_cases(path):
    """No honest answer marked wrong: the answers a chapter's solutions
    define get full marks on 200 draws of hidden cases of every exercise
    that gives auto-points (50 where a case runs a model), judged (and
    replayed) as the grader judges. (Each exercise's tests also judge its
    answers on hidden draws: make test runs this whole-chapter pass on the
    sample chapter, make sweep on the others.)"""
    print(f"HIDDEN_SEED={HIDDEN_SEED}")
    nb = nbformat.read(path, as_version=4)
    made = make_assignment(path, EXERCISES)
    namespace: dict = {}
    imports = next(c for c in nb.cells if c.cell_type == "code"
                   and "selfattention_exercises import" in c.source)
    exec(imports.source, namespace)
    graded = [i for i in made.items if i.exercise.points > 0]
    with contextlib.redirect_stdout(io.StringIO()):
        _run_with_context(nb.cells, [c for i in graded
                                     for c in i.answer_cells], namespace)
    plt.close("all")                    # figures of the cells it needed
    counted = {}
    for item in graded:
        ex = item.exercise
        answers = [namespace[name] for name in ex.answers]
        rng = np.random.default_rng(np.random.SeedSequence(
            HIDDEN_SEED, spawn_key=[zlib.crc32(ex.label.encode())]))
        wide = ex.grading().wide
        draws = MODEL_DRAWS.get(ex.label, HIDDEN_DRAWS)
        cases = [case for k in range(draws)
                 for case in _without_wide(ex.draw(rng), wide, k)]
        fb = ex.assess(ex.attempt(answers, cases), cases)
        assert fb.passed and fb.points == ex.points, \
            (ex.label, f"HIDDEN_SEED={HIDDEN_SEED}", fb.code, fb.message)
        counted[ex.label] = len(cases)
    print(f"{path.stem}: hidden cases per exercise {counted}, "
          f"{sum(counted.values())} in all")
