"""Chapter 5's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import expect, own, verdict
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


def first_pair_only(n, d):
    """Right in columns 0 and 1, the base 1000 instead of 10000 after."""
    E = sinusoidal_1d(n, d)
    angle = np.arange(n)[:, None] / 1000.0 ** (2 * np.arange(d // 2) / d)
    E[:, 2::2], E[:, 3::2] = np.sin(angle[:, 1:]), np.cos(angle[:, 1:])
    return E


def exponent_i_over_d(n, d):
    angle = np.arange(n)[:, None] / 10000.0 ** (np.arange(d // 2) / d)
    E = np.empty((n, d))
    E[:, 0::2], E[:, 1::2] = np.sin(angle), np.cos(angle)
    return E


@pytest.mark.parametrize("answer, status, code", [
    (sinusoidal_1d, "correct", None),
    (None, "not done", "not-done"),
    (lambda n, d: None, "not done", "not-done"),
    (lambda n, d: sinusoidal_1d(n, d).T, "wrong", "shape-transposed"),
    (lambda n, d: np.zeros((n, d + 2)), "wrong", "shape"),
    (halves, "wrong", "sines-then-cosines"),
    (swapped, "wrong", "sin-cos-swapped"),
    (lambda n, d: sinusoidal_1d(n + 1, d)[1:], "wrong",
     "positions-from-one"),
    (exponent_i_over_d, "wrong", "exponent-i-over-d"),
    (first_pair_only, "wrong", "later-pairs-wrong"),
    (lambda n, d: np.ones((n, d)), "wrong", "not-the-encoding"),
    (lambda n, d: 1 / 0, "wrong", "raised"),
    (lib.sinusoidal_1d, "for review", "for-review"),
])
def test_sinusoidal_check(answer, status, code):
    verdict(checks.check_sinusoidal, [answer], status, code)


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


@pytest.mark.parametrize("answer, status, code", [
    (right_unshuffle, "correct", None),
    (scatter_unshuffle, "correct", None),
    (None, "not done", "not-done"),
    (lambda Y, A, perm: None, "not done", "not-done"),
    (lambda Y, A, perm: Y[np.argsort(perm)], "wrong", "type"),
    (lambda Y, A, perm: (Y, A), "wrong", "still-shuffled"),
    (lambda Y, A, perm: (Y[perm], A), "wrong", "permuted-twice"),
    (lambda Y, A, perm: (Y[:5], A), "wrong", "shape"),
    (lambda Y, A, perm: (2 * Y[np.argsort(perm)], A), "wrong",
     "rows-changed"),
    (rows_only, "wrong", "columns-not-restored"),
    (columns_only, "wrong", "rows-not-restored"),
    (lambda Y, A, perm: (Y[np.argsort(perm)], A[perm][:, perm]), "wrong",
     "permuted-twice"),
    (lambda Y, A, perm: (Y[np.argsort(perm)], A.T), "wrong",
     "weights-changed"),
])
def test_unshuffle_check(answer, status, code):
    verdict(checks.check_unshuffle, [answer], status, code)


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


@pytest.mark.parametrize("answer, status, code", [
    (relative_position_bias, "correct", None),
    (None, "not done", "not-done"),
    (transposed_bias, "wrong", "bias-transposed"),
    (column_major_bias, "wrong", "not-row-major"),
    (unshifted_bias, "wrong", "offset-not-shifted"),
    (lambda t, r, c: np.zeros((r, c)), "wrong", "shape"),
    (lambda t, r, c: lib.relative_position_bias(t, (r, c)), "for review",
     "for-review"),
])
def test_bias_check(answer, status, code):
    verdict(checks.check_bias, [answer], status, code)


# ------------------------------------------------------------ experiment
def test_position_experiment_public_case_is_the_chapters_run():
    assert checks.check_positions.public_cases() == [
        {"kind": "sinusoidal", "seed": 0}]
    kinds = {case["kind"] for seed in range(30) for case in
             checks.check_positions.draw(np.random.default_rng(seed))}
    assert kinds == set(judges.KINDS)


@pytest.mark.parametrize("kind, out, status, code", [
    ("learned", (0.92, 0.17), "correct", None),
    ("sinusoidal", (0.9, 0.12), "correct", None),
    ("none", (0.6, 0.6), "correct", None),
    ("none", (0.6, 0.58), "wrong", "no-position-differs"),
    ("none", (0.93, 0.93), "wrong", "off-the-expected"),
    ("sinusoidal", (0.61, 0.61), "wrong", "codes-moved-with-patches"),
    ("learned", (0.6, 0.1), "wrong", "intact-too-low"),
    ("learned", (0.92, 0.9), "wrong", "shuffled-too-high"),
    ("learned", (92, 17), "wrong", "not-a-share"),
    ("learned", 0.92, "wrong", "type"),
])
def test_position_experiment_judge(kind, out, status, code):
    cases = [{"kind": kind, "seed": 7}]
    answer = lambda k, s: out                     # noqa: E731
    ex = checks.check_positions
    expect(ex.assess(ex.attempt([answer], cases), cases, replay=False),
           status, code)


def test_position_experiment_check_reports_not_done():
    fb = checks.check_positions.feedback(lambda kind, seed: None)
    assert fb.status == "not done"
    assert checks.check_positions.feedback(None).status == "not done"


def test_the_position_experiment_gives_no_auto_points():
    """Its numbers could be trained at home for every case: the written
    part carries its points, and the grader runs none of it."""
    ex = checks.check_positions
    assert ex.points == 0 and ex.written_points > 0
