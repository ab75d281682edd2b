"""The chapter 7 checks accept right answers and explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import own
from selfattention import blockwise
from selfattention.exercises import cost

online_softmax_update = own(blockwise.online_softmax_update)



@pytest.mark.parametrize("answer, status, words", [
    ((576, 15_925_248), "correct", ["15,925,248"]),
    (None, "not done", ["empty"]),
    (..., "not done", ["empty"]),
    ("576", "wrong", ["pair"]),
    ((24, 15_925_248), "wrong", ["one side"]),
    ((147_456, 1), "wrong", ["per pixel"]),
    ((577, 1), "wrong", ["577 tokens"]),
    ((576, 576**2 * 4), "wrong", ["one head"]),
    ((576, 12 * 576**2), "wrong", ["entries, not bytes"]),
    ((576, 12 * 576**2 * 8), "wrong", ["not 8"]),
    ((576, 12 * 576**2 * 32), "wrong", ["bits"]),
    ((576, 12 * 576 * 4), "wrong", ["n²"]),
    ((576, 123), "wrong", ["heads × n²"]),
])
def test_count_check(answer, status, words):
    fb = cost.check_count.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


def no_rescale(m, l, acc, S, V):
    m_new = np.maximum(m, S.max(axis=-1))
    P = np.exp(S - m_new[:, None])
    return m_new, l + P.sum(-1), acc + P @ V


def flipped(m, l, acc, S, V):
    m_new = np.maximum(m, S.max(axis=-1))
    P = np.exp(S - m_new[:, None])
    a = np.exp(m_new - m)
    return m_new, a * l + P.sum(-1), a[:, None] * acc + P @ V


def no_max(m, l, acc, S, V):
    P = np.exp(S)
    return np.maximum(m, S.max(axis=-1)), l + P.sum(-1), acc + P @ V


def wrong_shape(m, l, acc, S, V):
    return m, l, acc.T


def starter(m, l, acc, S, V):
    pass


@pytest.mark.parametrize("fn, status, words", [
    (online_softmax_update, "correct", ["block by block"]),
    (None, "not done", ["empty"]),
    (starter, "not done", ["returned None"]),
    (lambda *a: (1, 2), "wrong", ["three arrays"]),
    (wrong_shape, "wrong", ["shapes"]),
    (no_rescale, "wrong", ["exp(m - m')", "several"]),
    (flipped, "wrong", ["NaN", "not exp(m' - m)"]),
    (no_max, "wrong", ["1000"]),
    (lambda *a: 1 / 0, "wrong", ["ZeroDivisionError"]),
    (blockwise.online_softmax_update, "for review", ["online_softmax_update"]),
])
def test_online_update_check(fn, status, words):
    fb = cost.check_online_update.feedback(fn)
    assert fb.status == status
    for word in words:
        assert word in fb.message
