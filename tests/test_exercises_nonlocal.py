"""Chapter 9's checks accept right answers and name typical mistakes."""

import numpy as np
import pytest
import torch

from selfattention.attention import softmax
from selfattention.exercises import nonlocal_block as checks
from exercise_answers import own
from selfattention import nonlocal_block as lib
from selfattention.nonlocal_block import NonLocalBlock

scope_mask = own(lib.scope_mask)



def dot_product(x, Wt, Wp, Wg):
    F = (x @ Wt) @ (x @ Wp).T / x.shape[0]
    return F @ (x @ Wg), F


def with_weights(fn):
    def answer(x, Wt, Wp, Wg):
        F = fn((x @ Wt) @ (x @ Wp).T, x.shape[0], Wt.shape[1])
        return F @ (x @ Wg), F
    return answer


@pytest.mark.parametrize("answer, status, words", [
    (dot_product, "correct", ["N"]),
    (None, "not done", ["empty"]),
    (lambda x, Wt, Wp, Wg: None, "not done", ["None"]),
    (with_weights(lambda S, N, d: softmax(S)), "wrong", ["embedded Gaussian"]),
    (with_weights(lambda S, N, d: S), "wrong", ["raw scores"]),
    (with_weights(lambda S, N, d: S / np.sqrt(d)), "wrong", ["√d_k"]),
    (with_weights(lambda S, N, d: S / S.sum(1, keepdims=True)), "wrong",
     ["its sum"]),
    (with_weights(lambda S, N, d: S.T / N), "wrong", ["transposed"]),
    (lambda x, Wt, Wp, Wg: dot_product(x, Wt, Wp, Wg)[1], "wrong", ["pair"]),
    (lambda x, Wt, Wp, Wg: (x @ Wg, dot_product(x, Wt, Wp, Wg)[1]), "wrong",
     ["Y = F"]),
])
def test_dot_product_check(answer, status, words):
    fb = checks.check_dot_product.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


def time_mask(T, H, W):
    place = np.arange(T * H * W) % (H * W)
    return place[:, None] == place[None, :]


@pytest.mark.parametrize("answer, status, words", [
    (time_mask, "correct", ["T keys"]),
    (lambda T, H, W: scope_mask(T, H, W, "time"), "correct", []),
    (lambda T, H, W: scope_mask(T, H, W, "space"), "wrong", ["space-only"]),
    (lambda T, H, W: np.eye(T * H * W, dtype=bool), "wrong", ["only itself"]),
    (lambda T, H, W: ~time_mask(T, H, W), "wrong", ["swapped"]),
    (lambda T, H, W: time_mask(T, H, W).astype(int), "wrong", ["boolean"]),
    (lambda T, H, W: time_mask(T, H, W)[:4], "wrong", ["shape"]),
    (lambda T, H, W: (lambda p: p[:, None] == p[None, :])(
        np.arange(T * H * W) // T), "wrong", ["wrong places"]),
    (None, "not done", []),
    (lambda T, H, W: lib.scope_mask(T, H, W, "time"), "for review",
     ["scope_mask"]),
])
def test_time_mask_check(answer, status, words):
    fb = checks.check_time_mask.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


def test_gate_check_agrees_with_a_real_block():
    torch.manual_seed(0)
    block = NonLocalBlock(4)
    x = torch.randn(1, 4, 2, 3, 3)
    ((block(x) - 2 * x) ** 2).mean().backward()
    nonzero = {n for n, p in block.named_parameters() if p.grad.abs().max() > 0}
    assert checks.check_gate.feedback(nonzero).passed


@pytest.mark.parametrize("answer, status, words", [
    ({"gamma"}, "correct", []),
    ("gamma", "correct", []),
    (None, "not done", ["empty"]),
    (set(), "wrong", ["empty set"]),
    ({"gamma", "theta.weight", "phi.weight", "g.weight", "out.weight"},
     "wrong", ["exactly 0"]),
    ({"out.weight"}, "wrong", ["gamma is missing"]),
    ({"gamma", "out.weight"}, "wrong", ["out.weight"]),
    (3, "wrong", ["set of names"]),
])
def test_gate_check(answer, status, words):
    fb = checks.check_gate.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message
