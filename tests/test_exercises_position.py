"""Chapter 5's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import own
from selfattention import position as lib
from selfattention.exercises import position as checks
from selfattention_course.judges import position as judges

sinusoidal_1d = own(lib.sinusoidal_1d)


def relative_position_bias(table, rows, cols):
    r, c = np.divmod(np.arange(rows * cols), cols)
    return table[r[:, None] - r[None, :] + rows - 1,
                 c[:, None] - c[None, :] + cols - 1]



def halves(n, d):
    E = sinusoidal_1d(n, d)
    return np.concatenate([E[:, 0::2], E[:, 1::2]], axis=1)


def swapped(n, d):
    E = sinusoidal_1d(n, d)
    return E[:, [i + 1 if i % 2 == 0 else i - 1 for i in range(d)]]


def exponent_i_over_d(n, d):
    angle = np.arange(n)[:, None] / 10000.0 ** (np.arange(d // 2) / d)
    E = np.empty((n, d))
    E[:, 0::2], E[:, 1::2] = np.sin(angle), np.cos(angle)
    return E


@pytest.mark.parametrize("answer, status, words", [
    (sinusoidal_1d, "correct", []),
    (None, "not done", ["empty"]),
    (lambda n, d: None, "not done", ["returned None"]),
    (lambda n, d: sinusoidal_1d(n, d).T, "wrong", ["one row per"]),
    (lambda n, d: np.zeros((n, d + 2)), "wrong", ["shape"]),
    (halves, "wrong", ["interleaves"]),
    (swapped, "wrong", ["swapped"]),
    (lambda n, d: sinusoidal_1d(n + 1, d)[1:], "wrong",
     ["start at 0"]),
    (exponent_i_over_d, "wrong", ["2i/d"]),
    (lambda n, d: np.ones((n, d)), "wrong", ["differ"]),
    (lambda n, d: 1 / 0, "wrong", ["ZeroDivisionError"]),
    (lib.sinusoidal_1d, "for review", ["sinusoidal_1d"]),
])
def test_sinusoidal_check(answer, status, words):
    fb = checks.check_sinusoidal.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


def right_unshuffle(Y_shuffled, A_shuffled, perm):
    inv = np.argsort(perm)
    return Y_shuffled[inv], A_shuffled[inv][:, inv]


def scatter_unshuffle(Y_shuffled, A_shuffled, perm):
    Y, A = np.empty_like(Y_shuffled), np.empty_like(A_shuffled)
    Y[perm] = Y_shuffled                     # row k came from token perm[k]
    A[np.ix_(perm, perm)] = A_shuffled
    return Y, A


def rows_only(Y, A, perm):
    inv = np.argsort(perm)
    return Y[inv], A[inv]


def columns_only(Y, A, perm):
    inv = np.argsort(perm)
    return Y[inv], A[:, inv]


@pytest.mark.parametrize("answer, status, words", [
    (right_unshuffle, "correct", []),
    (scatter_unshuffle, "correct", []),
    (None, "not done", ["empty"]),
    (lambda Y, A, perm: None, "not done", ["None"]),
    (lambda Y, A, perm: Y[np.argsort(perm)], "wrong", ["pair (Y, A)"]),
    (lambda Y, A, perm: (Y, A), "wrong", ["shuffled order"]),
    (lambda Y, A, perm: (Y[perm], A), "wrong", ["a second time"]),
    (lambda Y, A, perm: (Y[:5], A), "wrong", ["shape"]),
    (lambda Y, A, perm: (2 * Y[np.argsort(perm)], A), "wrong",
     ["never change"]),
    (rows_only, "wrong", ["columns"]),
    (columns_only, "wrong", ["rows are not"]),
    (lambda Y, A, perm: (Y[np.argsort(perm)], A[perm][:, perm]), "wrong",
     ["second time to A"]),
    (lambda Y, A, perm: (Y[np.argsort(perm)], A.T), "wrong",
     ["only moves"]),
])
def test_unshuffle_check(answer, status, words):
    fb = checks.check_unshuffle.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


def test_unshuffle_case_is_equivariant():
    X, perm, f = checks.unshuffle_case()
    Y, A = f(X)
    Y_s, A_s = f(X[perm])
    assert np.allclose(Y_s, Y[perm]) and np.allclose(A_s, A[perm][:, perm])
    assert not np.array_equal(perm, np.arange(len(perm)))
    assert checks.check_unshuffle.written


def transposed_bias(table, rows, cols):
    return relative_position_bias(table, rows, cols).T


def column_major_bias(table, rows, cols):
    c, r = np.divmod(np.arange(rows * cols), rows)      # wrong numbering
    return table[r[:, None] - r[None, :] + rows - 1,
                 c[:, None] - c[None, :] + cols - 1]


def unshifted_bias(table, rows, cols):
    r, c = np.divmod(np.arange(rows * cols), cols)
    return table[r[:, None] - r[None, :], c[:, None] - c[None, :]]


@pytest.mark.parametrize("answer, status, words", [
    (relative_position_bias, "correct", []),
    (None, "not done", ["empty"]),
    (transposed_bias, "wrong", ["transposed"]),
    (column_major_bias, "wrong", ["row-major"]),
    (unshifted_bias, "wrong", ["centre"]),
    (lambda t, r, c: np.zeros((r, c)), "wrong", ["shape"]),
    (lambda t, r, c: lib.relative_position_bias(t, (r, c)), "for review",
     ["relative_position_bias"]),
])
def test_bias_check(answer, status, words):
    fb = checks.check_bias.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ experiment
def test_position_experiment_public_case_is_the_chapters_run():
    assert checks.check_positions.public_cases() == [
        {"kind": "sinusoidal", "seed": 0}]
    kinds = {case["kind"] for seed in range(30) for case in
             checks.check_positions.draw(np.random.default_rng(seed))}
    assert kinds == set(judges.KINDS)


@pytest.mark.parametrize("kind, out, status, words", [
    ("learned", (0.92, 0.17), "correct", []),
    ("sinusoidal", (0.9, 0.12), "correct", []),
    ("none", (0.6, 0.6), "correct", []),
    ("none", (0.6, 0.58), "wrong", ["same answers"]),
    ("none", (0.93, 0.93), "wrong", ["35% to 75%"]),
    ("sinusoidal", (0.61, 0.61), "wrong", ["moved with the patches"]),
    ("learned", (0.6, 0.1), "wrong", ["at least 75%"]),
    ("learned", (0.92, 0.9), "wrong", ["shuffled digits"]),
    ("learned", (92, 17), "wrong", ["shares"]),
    ("learned", 0.92, "wrong", ["pair"]),
])
def test_position_experiment_judge(kind, out, status, words):
    cases = [{"kind": kind, "seed": 7}]
    answer = lambda k, s: out                     # noqa: E731
    ex = checks.check_positions
    fb = ex.assess(ex.attempt([answer], cases), cases, replay=False)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


def test_position_experiment_check_reports_not_done():
    fb = checks.check_positions.feedback(lambda kind, seed: None)
    assert fb.status == "not done"
    assert checks.check_positions.feedback(None).status == "not done"


def test_the_position_experiment_gives_no_auto_points():
    """Its numbers could be trained at home for every case: the written
    part carries its points, and the grader runs none of it."""
    ex = checks.check_positions
    assert ex.points == 0 and ex.written_points > 0
