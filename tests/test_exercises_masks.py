"""The checks of chapter 4 accept right answers and explain wrong ones."""

import numpy as np
import pytest
import torch

from exercise_answers import own
from selfattention import masks, torch_bridge
from selfattention.attention import attention as library_attention
from selfattention.attention import softmax
from selfattention.exercises import masks as checks

attention = own(library_attention)


def expect(fb, status, words=()):
    assert fb.status == status, fb.message
    assert fb.points == (fb.max_points if status == "correct" else 0)
    for word in words:
        assert word in fb.message, fb.message


# ------------------------------------------------------------- causal mask
def test_causal_check_accepts_a_copy_and_reviews_the_library(capsys):
    checks.check_causal_mask(own(masks.causal_mask))
    assert "Correct" in capsys.readouterr().out
    expect(checks.check_causal_mask.feedback(masks.causal_mask), "for review",
           ["masks.causal_mask"])


def starter_causal(n):
    ...                        # the student version of the solution cell


def starter_attention(Q, K, V, mask):
    ...


def starter_to_mha(mask):
    ...


@pytest.mark.parametrize("answer, status, words", [
    (None, "not done", ["empty"]),
    (starter_causal, "not done", ["returned None"]),
    (lambda n: np.triu(np.ones((n, n), bool)), "wrong", ["future", "tril"]),
    (lambda n: ~np.tril(np.ones((n, n), bool)), "wrong", ["blocked"]),
    (lambda n: np.tril(np.ones((n, n), bool), -1), "wrong", ["diagonal"]),
    (lambda n: np.tril(np.ones((n, n))), "wrong", ["dtype", "boolean"]),
    (lambda n: np.where(np.tril(np.ones((n, n), bool)), 0.0, -np.inf),
     "wrong", ["additive"]),
    (lambda n: np.tril(np.ones((5, 5), bool)), "wrong", ["shape"]),
    (lambda n: np.ones((n, n), bool), "wrong", ["entry [0, 1]"]),
    (lambda n: 1 / 0, "wrong", ["ZeroDivisionError"]),
])
def test_causal_check_names_the_problem(answer, status, words):
    expect(checks.check_causal_mask.feedback(answer), status, words)


# ------------------------------------------------------- masked attention
def reference(Q, K, V, mask):
    return attention(Q, K, V, mask)


def after_softmax(Q, K, V, mask):
    A = softmax(Q @ K.T / np.sqrt(K.shape[1])) * mask
    return A @ V, A


def after_softmax_renormalised(Q, K, V, mask):
    A = softmax(Q @ K.T / np.sqrt(K.shape[1])) * mask
    A = A / A.sum(axis=-1, keepdims=True)
    return A @ V, A


def big_negative(Q, K, V, mask):
    A = softmax(np.where(mask, Q @ K.T / np.sqrt(K.shape[1]), -1e9))
    return A @ V, A


def ignored(Q, K, V, mask):
    return attention(Q, K, V)


def inverted(Q, K, V, mask):
    return attention(Q, K, V, ~mask)


def zero_scores(Q, K, V, mask):
    A = softmax(Q @ K.T / np.sqrt(K.shape[1]) * mask)
    return A @ V, A


def unscaled(Q, K, V, mask):
    A = softmax(np.where(mask, Q @ K.T, -np.inf))
    return A @ V, A


def small_penalty(Q, K, V, mask):
    A = softmax(np.where(mask, Q @ K.T / np.sqrt(K.shape[1]), -30.0))
    return A @ V, A


def wrong_output(Q, K, V, mask):
    Y, A = attention(Q, K, V, mask)
    return Y + 1, A


def weights_only(Q, K, V, mask):
    return attention(Q, K, V, mask)[1]


@pytest.mark.parametrize("answer", [reference, after_softmax_renormalised,
                                    big_negative])
def test_masked_attention_check_accepts_right_answers(answer):
    expect(checks.check_masked_attention.feedback(answer), "correct")


@pytest.mark.parametrize("answer, status, words", [
    (None, "not done", ["empty"]),
    (starter_attention, "not done", ["returned None"]),
    (after_softmax, "wrong", ["after the softmax", "sum to", "-inf"]),
    (ignored, "wrong", ["no effect"]),
    (inverted, "wrong", ["blocked the allowed"]),
    (zero_scores, "wrong", ["set to 0"]),
    (unscaled, "wrong", ["√d_k"]),
    (small_penalty, "wrong", ["not exactly zero"]),
    (wrong_output, "wrong", ["Y = A @ V"]),
    (weights_only, "wrong", ["pair"]),
    (library_attention, "for review", ["attention.attention"]),
])
def test_masked_attention_check_names_the_problem(answer, status, words):
    expect(checks.check_masked_attention.feedback(answer), status, words)


def test_after_softmax_message_reports_row_sums_below_one():
    msg = checks.check_masked_attention.feedback(after_softmax).message
    sums = [float(s) for s in msg.split("sum to ")[1].split(", not")[0]
            .split(", ")]
    assert len(sums) == 4 and all(0 < s < 1 for s in sums)


# ----------------------------------------------- PyTorch's convention
@pytest.mark.parametrize("answer", [
    own(torch_bridge.mask_for_mha),
    lambda m: torch.from_numpy(~m),
    lambda m: torch.logical_not(torch.tensor(m)),
])
def test_mha_check_accepts_right_answers(answer):
    expect(checks.check_mha_mask.feedback(answer), "correct")


@pytest.mark.parametrize("answer, status, words", [
    (None, "not done", ["empty"]),
    (starter_to_mha, "not done", ["returned None"]),
    (lambda m: torch.from_numpy(m.copy()), "wrong", ["unchanged", "~"]),
    (own(torch_bridge.mask_for_sdpa), "wrong", ["unchanged"]),
    (torch_bridge.mask_for_mha, "for review", ["torch_bridge.mask_for_mha"]),
    (lambda m: ~m, "wrong", ["NumPy array", "torch.from_numpy"]),
    (lambda m: torch.from_numpy((~m).astype(float)), "wrong", ["torch.bool"]),
    (lambda m: torch.from_numpy(np.ascontiguousarray(~m.T)), "wrong",
     ["transposed"]),
    (lambda m: torch.from_numpy(~m[:5]), "wrong", ["shape"]),
    (lambda m: [[True]], "wrong", ["torch.Tensor", "list"]),
    (lambda m: torch.from_numpy(np.zeros_like(m)), "wrong", ["entry [0, 1]"]),
])
def test_mha_check_names_the_problem(answer, status, words):
    expect(checks.check_mha_mask.feedback(answer), status, words)
