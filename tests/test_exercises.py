"""The checks of chapter 1, and what every exercise declaration promises."""

from pathlib import Path

import nbformat
import numpy as np
import pytest

from exercise_answers import own
from selfattention.attention import attention as library_attention
from selfattention.attention import softmax as library_softmax
from selfattention.exercises import definition
from selfattention.exercises.core import (GRADING_ENV, Exercise, Feedback,
                                          to_plain)
from selfattention_course.assign import find_exercises, make_assignment

softmax, attention = own(library_softmax), own(library_attention)
EXERCISES = find_exercises()


def test_a_check_prints_its_feedback_and_returns_nothing(capsys):
    assert definition.check_softmax(softmax) is None
    out = capsys.readouterr().out
    assert out.startswith("[ex-definition-softmax] Correct")
    fb = definition.check_softmax.feedback(softmax)
    assert fb.passed and fb.points == fb.max_points == 1.0


def test_in_the_grader_s_kernel_the_check_stays_silent(capsys, monkeypatch):
    monkeypatch.setenv(GRADING_ENV, "1")
    definition.check_softmax(lambda S: 1 / 0)
    out = capsys.readouterr().out
    assert "grader" in out and "Not yet" not in out
    fb = definition.check_cross_attention.feedback((5, 7))
    assert not fb.passed and fb.status == "not graded"


@pytest.mark.parametrize("answer, status, words", [
    (None, "not done", ["empty"]),
    (lambda S: None, "not done", ["returned None"]),
    (lambda S: np.exp(S) / np.exp(S).sum(-1, keepdims=True), "wrong",
     ["overflows", "maximum"]),
    (lambda S: np.exp(S) / np.exp(S).sum(-2, keepdims=True), "wrong",
     ["columns"]),
    (lambda S: S.T, "wrong", ["shape"]),
    (lambda S: 1 / 0, "wrong", ["ZeroDivisionError"]),
    (lambda S: {"a": 1}, "wrong", ["dict"]),
    (library_softmax, "for review", ["attention.softmax"]),
    (library_softmax.__wrapped__, "for review", ["attention.softmax"]),
    (lambda S: library_softmax(S), "for review", ["attention.softmax"]),
])
def test_softmax_check_names_the_problem(answer, status, words):
    fb = definition.check_softmax.feedback(answer)
    assert fb.status == status and fb.points == 0
    for word in words:
        assert word in fb.message


@pytest.mark.parametrize("answer, words", [
    (lambda Q, K, V: (softmax(Q @ K.T) @ V, softmax(Q @ K.T)), ["√d_k"]),
    (lambda Q, K, V: (softmax(Q @ K.T / 4) @ V, softmax(Q @ K.T / 4)),
     ["d_k"]),
    (lambda Q, K, V: attention(Q, K, V)[1], ["pair"]),
    (lambda Q, K, V: (attention(Q, K, V)[1] @ V[:, :1], attention(Q, K, V)[1]),
     ["Y has shape"]),
])
def test_attention_check_names_the_problem(answer, words):
    fb = definition.check_attention.feedback(answer)
    assert fb.status == "wrong"
    for word in words:
        assert word in fb.message


def test_attention_check_accepts_an_answer_that_calls_the_library_softmax():
    def mine(Q, K, V):
        A = library_softmax(Q @ K.T / np.sqrt(K.shape[1]))
        return A @ V, A

    assert definition.check_attention.feedback(mine).passed
    assert definition.check_attention.feedback(
        library_attention).status == "for review"


@pytest.mark.parametrize("answer, status", [
    ((5, 7), "correct"), ([5, 7], "correct"), (np.array([5, 7]), "correct"),
    ((4, 6), "wrong"), (47, "wrong"), (None, "not done"), (..., "not done"),
    ((9, 9), "wrong"), ("ab", "wrong"),
])
def test_cross_attention_check(answer, status):
    assert definition.check_cross_attention.feedback(answer).status == status


# ------------------------------------------------------------ declarations
def test_every_exercise_is_declared_completely():
    assert len(EXERCISES) == 29
    for label, (module, name, ex) in EXERCISES.items():
        assert label == ex.label and label.startswith("ex-")
        assert getattr(__import__(module, fromlist=[name]), name) is ex
        assert ex.points > 0 and ex.doc and ex.success


def test_every_reference_names_a_library_function():
    """A renamed library function must be renamed in the declarations too."""
    for _, _, ex in EXERCISES.values():
        assert set(ex.targets()) == set(ex.references), ex.label
        for fn in ex.targets().values():
            assert callable(fn)


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_cases_are_plain_data_and_change_with_the_seed(label):
    ex = EXERCISES[label][2]
    first = ex.draw(np.random.default_rng(1))
    for case in first:
        for value in case.values():
            plain = to_plain(value)
            assert type(plain) is type(value) or isinstance(value, np.integer)
    if ex.cases is not None:
        again = ex.draw(np.random.default_rng(2))
        assert any(not _same(a, b) for a, b in zip(first, again)), \
            "hidden cases must depend on the seed"


def _same(a, b):
    return a.keys() == b.keys() and all(
        np.array_equal(np.asarray(a[k]), np.asarray(b[k]))
        if np.shape(a[k]) == np.shape(b[k]) else False for k in a)


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
    ex = definition.check_attention
    cases = ex.public_cases()
    result = ex.attempt([lambda Q, K, V: (Q, {"A": 1})], cases)
    Y, A = result["outcomes"][0]["output"]
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
CHAPTERS = sorted(Path(__file__).resolve().parents[1].glob("chapters/*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_chapter_s_solutions_pass_hidden_cases(path):
    """The answers a chapter's solutions define pass cases of any seed."""
    nb = nbformat.read(path, as_version=4)
    made = make_assignment(path, EXERCISES)
    namespace: dict = {}
    imports = next(c for c in nb.cells if c.cell_type == "code"
                   and "selfattention.exercises import" in c.source)
    exec(imports.source, namespace)
    cells = {c.get("id"): c for c in nb.cells}
    functions = [i for i in made.items if i.exercise.cases is not None]
    for item in functions:
        for cell_id in item.answer_cells:
            exec(cells[cell_id].source, namespace)
    for item in functions:
        ex = item.exercise
        answers = [namespace[name] for name in ex.answers]
        for seed in (0, 1, 2):
            cases = ex.draw(np.random.default_rng(seed))
            fb = ex.assess(ex.attempt(answers, cases), cases)
            assert fb.passed, (ex.label, seed, fb.message)
