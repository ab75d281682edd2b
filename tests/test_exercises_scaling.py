"""The checks of chapter 2's exercises accept right answers and explain
wrong ones."""

import math

import numpy as np
import pytest

from exercise_answers import own
from selfattention import scaling
from selfattention.exercises import scaling as checks

softmax_jacobian = own(scaling.softmax_jacobian)


def jacobian_norm(P):                      # the norm, built from a copy
    return np.sqrt((softmax_jacobian_rows(P) ** 2).sum(axis=(-2, -1)))


def softmax_jacobian_rows(P):
    return P[..., :, None] * np.eye(P.shape[-1]) - P[..., :, None] * \
        P[..., None, :]



# ------------------------------------------------------------ scale factor
@pytest.mark.parametrize("answer, status, words", [
    (lambda d_k, s: 1 / (s ** 2 * math.sqrt(d_k)), "correct", []),
    (lambda d_k, s: 1 / (s * s * d_k ** 0.5), "correct", []),
    (None, "not done", ["empty"]),
    (lambda d_k, s: None, "not done", ["None"]),
    (lambda d_k, s: 1 / math.sqrt(d_k), "wrong", ["ignores σ"]),
    (lambda d_k, s: 1 / (s * math.sqrt(d_k)), "wrong", ["σ², not σ"]),
    (lambda d_k, s: 1 / d_k, "wrong", ["variance d_k"]),
    (lambda d_k, s: 1 / (s ** 4 * d_k), "wrong", ["square root"]),
    (lambda d_k, s: s ** 2 * math.sqrt(d_k), "wrong", ["inverse"]),
    (lambda d_k, s: 0.1, "wrong", ["standard deviation"]),
    (lambda d_k, s: "x", "wrong", ["one number"]),
])
def test_scale_factor_check(answer, status, words):
    fb = checks.check_scale_factor.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ Jacobian
@pytest.mark.parametrize("answer, status, words", [
    (softmax_jacobian, "correct", []),
    (lambda p: np.diag(p) - np.outer(p, p), "correct", []),
    (None, "not done", ["empty"]),
    (lambda p: None, "not done", ["None"]),
    (lambda p: np.outer(p, p) - np.diag(p), "wrong", ["sign"]),
    (lambda p: np.diag(p), "wrong", ["outer product"]),
    (lambda p: np.diag(p * (1 - p)), "wrong", ["off-diagonal"]),
    (lambda p: np.diag(p) - p * p, "wrong", ["elementwise"]),
    (lambda p: p, "wrong", ["shape"]),
    (lambda p: np.diag(p) - 2 * np.outer(p, p), "wrong", ["sum to zero"]),
    (lambda p: np.diag(p) - np.outer(p, np.sqrt(p)), "wrong", ["differ"]),
    (scaling.softmax_jacobian, "for review", ["softmax_jacobian"]),
])
def test_softmax_jacobian_check(answer, status, words):
    fb = checks.check_softmax_jacobian.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ norm
def closed_form(p):
    sq = (p ** 2).sum(-1)
    return np.sqrt(sq - 2 * (p ** 3).sum(-1) + sq ** 2)


@pytest.mark.parametrize("answer, status, words", [
    (jacobian_norm, "correct", []),
    (closed_form, "correct", []),
    (None, "not done", ["empty"]),
    (lambda p: jacobian_norm(p).mean(), "wrong", ["one number"]),
    (lambda p: jacobian_norm(p) ** 2, "wrong", ["squared"]),
    (lambda p: np.sqrt((p ** 2 * (1 - p) ** 2).sum(-1)), "wrong",
     ["diagonal"]),
    (lambda p: jacobian_norm(p)[..., :2], "wrong", ["shape"]),
    (lambda p: 2 * jacobian_norm(p), "wrong", ["differ"]),
    (lambda p: 1 / 0, "wrong", ["ZeroDivisionError"]),
    (scaling.jacobian_norm, "for review", ["jacobian_norm"]),
])
def test_jacobian_norm_check(answer, status, words):
    fb = checks.check_jacobian_norm.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message
