"""The checks of chapter 3's exercises accept right answers and explain
wrong ones."""

import numpy as np
import pytest

from exercise_answers import own
from selfattention import attention as lib
from selfattention.exercises import multihead as checks

attention, merge_heads, multi_head_attention, split_heads = (
    own(lib.attention), own(lib.merge_heads), own(lib.multi_head_attention),
    own(lib.split_heads))



# ------------------------------------------------------------ split / merge
def split_by_hand(Z, h):
    n, width = Z.shape[-2:]
    return np.swapaxes(Z.reshape(*Z.shape[:-1], h, width // h), -2, -3)


def merge_no_batch(Z):
    h, n, w = Z.shape
    return Z.transpose(1, 0, 2).reshape(n, h * w)


@pytest.mark.parametrize("split, merge, status, words", [
    (split_heads, merge_heads, "correct", []),
    (split_by_hand, merge_heads, "correct", []),
    (None, merge_heads, "not done", ["empty"]),
    (lambda Z, h: None, merge_heads, "not done", ["None"]),
    (lambda Z, h: Z.reshape(h, Z.shape[0], -1), merge_heads, "wrong",
     ["plain reshape"]),
    (lambda Z, h: Z.reshape(Z.shape[0], -1, h).transpose(2, 0, 1), merge_heads,
     "wrong", ["interleaved"]),
    (lambda Z, h: Z.reshape(Z.shape[0], h, -1), merge_heads, "wrong",
     ["head axis first"]),
    (lambda Z, h: Z.reshape(h, -1), merge_heads, "wrong", ["shape"]),
    (lambda Z, h: Z.reshape(Z.shape[0], h, -1).transpose(1, 0, 2),
     merge_heads, "wrong", ["batch axis"]),
    (split_heads, lambda H: H.reshape(H.shape[-2], -1), "wrong",
     ["without moving"]),
    (split_heads, merge_no_batch, "wrong", ["batch axis"]),
    (split_heads, lambda H: H[0], "wrong", ["shape"]),
    (lib.split_heads, merge_heads, "for review", ["split_heads"]),
    (split_heads, lib.merge_heads, "for review", ["merge_heads"]),
])
def test_split_merge_check(split, merge, status, words):
    fb = checks.check_split_merge.feedback(split, merge)
    assert fb.status == status
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ the loop
def loop(X, W_q, W_k, W_v, W_o, h, scale=None, step=None, order=1, Wo=True):
    d_k = W_q.shape[1] // h
    cols = [slice(i, None, h) if step else slice(i * d_k, (i + 1) * d_k)
            for i in range(h)]
    outs = [attention(X @ W_q[:, c], X @ W_k[:, c], X @ W_v[:, c],
                      scale=scale) for c in cols]
    Y = np.concatenate([o[0] for o in outs][::order], axis=1)
    return (Y @ W_o if Wo else Y), np.stack([o[1] for o in outs])


@pytest.mark.parametrize("answer, status, words", [
    (multi_head_attention, "correct", []),
    (loop, "correct", []),
    (None, "not done", ["empty"]),
    (lambda *a: loop(*a, scale=1 / np.sqrt(8)), "wrong", ["√d = √8"]),
    (lambda *a: loop(*a, scale=1.0), "wrong", ["not scaled"]),
    (lambda *a: loop(*a, step=True), "wrong", ["contiguous"]),
    (lambda *a: loop(*a, Wo=False), "wrong", ["@ W_o"]),
    (lambda *a: loop(*a, order=-1), "wrong", ["reverse"]),
    (lambda *a: loop(*a)[0], "wrong", ["pair"]),
    (lambda *a: (loop(*a)[0], loop(*a)[1][0]), "wrong", ["A has shape"]),
    (lambda *a: (2 * loop(*a)[0], loop(*a)[1]), "wrong", ["side by side"]),
    (lib.multi_head_attention, "for review", ["multi_head_attention"]),
])
def test_multi_head_check(answer, status, words):
    fb = checks.check_multi_head.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ parameters
def test_parameter_formula_matches_pytorch():
    torch = pytest.importorskip("torch")
    for d, h, bias in [(512, 8, True), (512, 8, False), (96, 3, True),
                       (64, 64, False)]:
        mha = torch.nn.MultiheadAttention(d, h, bias=bias)
        assert sum(p.numel() for p in mha.parameters()) == \
            checks.mha_parameter_count(d, h, bias)
    assert checks.mha_parameter_count(512, 8) == 1_050_624


@pytest.mark.parametrize("answer, status, words", [
    (lambda d, h, b: 4 * d * d + 4 * d * b, "correct", []),
    (own(checks.mha_parameter_count), "correct", []),
    (checks.mha_parameter_count, "for review", ["mha_parameter_count"]),
    (None, "not done", ["empty"]),
    (lambda d, h, b: 3 * d * d + 3 * d * b, "wrong", ["W_o"]),
    (lambda d, h, b: h * (4 * d * d + 4 * d * b), "wrong", ["depend on h"]),
    (lambda d, h, b: 4 * d * (d // h) + 4 * d * b, "wrong", ["depend on h"]),
    (lambda d, h, b: 4 * d * d, "wrong", ["biases are missing"]),
    (lambda d, h, b: 4 * d * d + 3 * d * b, "wrong", ["output projection's"]),
    (lambda d, h, b: 4 * d * d + 4 * d, "wrong", ["no biases"]),
    (lambda d, h, b: 7, "wrong", ["expected"]),
    (lambda d, h, b: "many", "wrong", ["integer"]),
])
def test_parameter_count_check(answer, status, words):
    fb = checks.check_parameter_count.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message
