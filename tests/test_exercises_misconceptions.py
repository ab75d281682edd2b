"""Chapter 11's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest

from selfattention.attention import softmax
from selfattention.exercises import misconceptions as checks



def right(S, mask):
    return softmax(np.where(mask, S, -np.inf))


def zero_then_renormalise(S, mask):
    W = softmax(S) * mask
    return W / W.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("answer, status, words", [
    (right, "correct", []),
    (zero_then_renormalise, "correct", []),
    (None, "not done", ["empty"]),
    (lambda S, m: None, "not done", ["returned None"]),
    (lambda S, m: softmax(S) * m, "wrong", ["zeroing", "-inf", "sum to"]),
    (lambda S, m: softmax(np.where(m, S, 0.0)), "wrong", ["exp(0)"]),
    (lambda S, m: softmax(np.where(~m, S, -np.inf)), "wrong", ["True means"]),
    (lambda S, m: right(S, m)[:2], "wrong", ["shape"]),
    (lambda S, m: right(S, m) * np.nan, "wrong", ["NaN"]),
    (lambda S, m: 0.5 * right(S, m), "wrong", ["not one"]),
    (lambda S, m: "weights", "wrong", ["array"]),
])
def test_masked_softmax_check(answer, status, words):
    fb = checks.check_masked_softmax.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


A = [0.5, 0.5, 0.0, 0.0, 0.0]
B = [0.0, 0.0, 0.5, 0.5, 0.0]


@pytest.mark.parametrize("a, b, status, words", [
    (A, B, "correct", []),
    (B, A, "correct", []),
    (None, B, "not done", ["`a`"]),
    (A, ..., "not done", ["`b`"]),
    (A, A, "wrong", ["no key in common"]),
    (A, [0.0, 0.0, 1.0, 0.0, 0.0], "wrong", ["must be equal"]),
    ([1.0, -0.5, 0.5, 0.0, 0.0], B, "wrong", ["negative"]),
    ([0.5, 0.5, 0.5, 0.0, 0.0], B, "wrong", ["sum to"]),
    (A, [0.0, 0.5, 0.5], "wrong", ["shape (5,)"]),
    ("abc", B, "wrong", ["five numbers"]),
])
def test_same_output_check(a, b, status, words):
    fb = checks.check_same_output.feedback(a, b)
    assert fb.status == status
    for word in words:
        assert word in fb.message
