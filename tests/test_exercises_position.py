"""Chapter 5's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import own
from selfattention import position as lib
from selfattention.exercises import position as checks

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


def right_unshuffle(Y_shuffled, perm):
    return Y_shuffled[np.argsort(perm)]


@pytest.mark.parametrize("answer, status, words", [
    (right_unshuffle, "correct", []),
    (None, "not done", ["empty"]),
    (lambda Y, perm: Y, "wrong", ["shuffled order"]),
    (lambda Y, perm: Y[perm], "wrong", ["a second time"]),
    (lambda Y, perm: Y[:5], "wrong", ["shape"]),
    (lambda Y, perm: 2 * Y[np.argsort(perm)], "wrong", ["never change"]),
])
def test_unshuffle_check(answer, status, words):
    fb = checks.check_unshuffle.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


def test_unshuffle_case_is_equivariant():
    X, perm, f = checks.unshuffle_case()
    assert np.allclose(f(X[perm]), f(X)[perm])
    assert not np.array_equal(perm, np.arange(len(perm)))


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
