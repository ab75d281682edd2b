"""The checks of chapter 4 accept right answers, on public and hidden
cases, and explain wrong ones."""

import numpy as np
import pytest
import torch

from exercise_answers import expect, hidden, own
from selfattention import attention, data, masks, patches, torch_bridge
from selfattention.attention import softmax as library_softmax
from selfattention_exercises import masks as checks

softmax = own(library_softmax)


# ------------------------------------------------------------ 4.1 shrink
def shrinkage(S, mask):
    return (softmax(S) * mask).sum(axis=-1)


def test_the_zeroed_output_is_the_masked_output_times_the_shrinkage():
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((6, 3)) for _ in range(3))
    mask = rng.random((6, 6)) < 0.5
    mask[np.arange(6), np.arange(6)] = True
    S = Q @ K.T / np.sqrt(3)
    Y, _ = attention.attention(Q, K, V, mask=mask)
    Y_zeroed = (softmax(S) * mask) @ V
    assert np.allclose(Y_zeroed, shrinkage(S, mask)[:, None] * Y)


def test_shrinkage_check_accepts_the_factor_on_hidden_cases():
    expect(checks.check_shrinkage.feedback(shrinkage), "correct")
    expect(checks.check_shrinkage.feedback(
        lambda S, m: (library_softmax(S) * m).sum(-1)), "correct")
    hidden(checks.check_shrinkage, shrinkage)


def naive(S, mask):
    E = np.exp(S)
    return (E * mask).sum(-1) / E.sum(-1)


@pytest.mark.parametrize("answer, status, code", [
    (None, "not done", "not-done"),
    (lambda S, m: None, "not done", "not-done"),
    (lambda S, m: "rho", "wrong", "type"),
    (lambda S, m: softmax(S) * m, "wrong", "shape"),
    (lambda S, m: shrinkage(S, m)[..., :1], "wrong", "shape"),
    (naive, "wrong", "overflow"),
    (lambda S, m: 1 - shrinkage(S, m), "wrong", "forbidden-share"),
    (lambda S, m: np.ones(S.shape[:-1]), "wrong", "masked-before-softmax"),
    (lambda S, m: 1 / shrinkage(S, m), "wrong", "inverted"),
    (lambda S, m: (np.exp(S - S.max(-1, keepdims=True)) * m).sum(-1),
     "wrong", "renormalised"),
    (lambda S, m: (softmax(S) * m).max(-1), "wrong", "largest-only"),
    (lambda S, m: shrinkage(S, m) ** 2, "wrong", "not-the-shrinkage"),
])
def test_shrinkage_check_names_the_problem(answer, status, code):
    expect(checks.check_shrinkage.feedback(answer), status, code)


# ------------------------------------------------------- 4.2 batch masks
def allowed(lengths, n):
    i = np.arange(n)
    return ((i[None, :] <= i[:, None])[None]
            & (i[None, None, :] < np.asarray(lengths)[:, None, None]))


def batch_masks(lengths, n, h):
    a = allowed(lengths, n)                                   # (B, n, n)
    return (torch.from_numpy(~a).repeat_interleave(h, dim=0),
            torch.from_numpy(a)[:, None])


def with_own_helpers(lengths, n, h):
    """The library's helpers, retyped: our masks, then the two conversions."""
    a = own(masks.causal_mask)(n) & own(masks.padding_mask)(
        np.asarray(lengths), n)
    return (own(torch_bridge.mask_for_mha)(np.repeat(a, h, axis=0)),
            own(torch_bridge.mask_for_sdpa)(a[:, None]))


def head_major(lengths, n, h):
    a = allowed(lengths, n)
    return (torch.from_numpy(np.tile(~a, (h, 1, 1))),
            torch.from_numpy(a)[:, None])


def from_allowed(make):
    """An answer whose (B, n, n) 'allowed' mask is make(lengths, n)."""
    def answer(lengths, n, h):
        a = np.array(np.broadcast_to(make(np.asarray(lengths), n),
                                     (len(lengths), n, n)))
        return (torch.from_numpy(np.repeat(~a, h, axis=0)),
                torch.from_numpy(a)[:, None])
    return answer


def lower(n, k=0):
    return np.tril(np.ones((n, n), bool), k)[None]


def keys(L, n):
    return (np.arange(n)[None, None, :] < L[:, None, None])


def queries(L, n):
    return (np.arange(n)[None, :, None] < L[:, None, None])


def test_batch_masks_check_accepts_right_answers_on_hidden_cases():
    expect(checks.check_batch_masks.feedback(batch_masks), "correct")
    expect(checks.check_batch_masks.feedback(with_own_helpers), "correct")
    hidden(checks.check_batch_masks, batch_masks)


@pytest.mark.parametrize("answer, status, code", [
    (None, "not done", "not-done"),
    (lambda L, n, h: None, "not done", "not-done"),
    (lambda L, n, h: batch_masks(L, n, h)[0], "wrong", "not-a-pair"),
    (lambda L, n, h: (batch_masks(L, n, h)[0].numpy(),
                      batch_masks(L, n, h)[1]), "wrong", "numpy-not-tensor"),
    (lambda L, n, h: (batch_masks(L, n, h)[0].double(),
                      batch_masks(L, n, h)[1]), "wrong", "mask-not-bool"),
    (lambda L, n, h: ("mask", batch_masks(L, n, h)[1]), "wrong",
     "not-a-tensor"),
    (lambda L, n, h: (torch.from_numpy(~allowed(L, n)),
                      batch_masks(L, n, h)[1]), "wrong",
                       "mask-per-item-not-head"),
    (lambda L, n, h: (~batch_masks(L, n, h)[0], batch_masks(L, n, h)[1]),
     "wrong", "mask-inverted"),
    (head_major, "wrong", "heads-vary-fastest"),
    (lambda L, n, h: (torch.zeros_like(batch_masks(L, n, h)[0]),
                      batch_masks(L, n, h)[1]), "wrong", "not-the-mask"),
    (from_allowed(lambda L, n: lower(n) & queries(L, n)), "wrong",
     "padded-queries"),
    (from_allowed(lambda L, n: np.broadcast_to(lower(n), (len(L), n, n))),
     "wrong", "padding-missing"),
    (from_allowed(lambda L, n: np.broadcast_to(keys(L, n), (len(L), n, n))),
     "wrong", "causal-missing"),
    (from_allowed(lambda L, n: ~lower(n, -1) & keys(L, n)), "wrong",
     "causal-transposed"),
    (from_allowed(lambda L, n: lower(n, -1) & keys(L, n)), "wrong",
     "diagonal-blocked"),
    (from_allowed(lambda L, n: lower(n) | keys(L, n)), "wrong", "masks-or"),
    (lambda L, n, h: (batch_masks(L, n, h)[0],
                      torch.from_numpy(allowed(L, n))), "wrong",
     "mask-missing-head-axis"),
    (lambda L, n, h: (batch_masks(L, n, h)[0],
                      torch.from_numpy(allowed(L, n)[:, :1])), "wrong",
     "shape"),
    (lambda L, n, h: (batch_masks(L, n, h)[0], ~batch_masks(L, n, h)[1]),
     "wrong", "mask-inverted"),
    (lambda L, n, h: (batch_masks(L, n, h)[0],
                      torch.from_numpy(lower(n) & queries(L, n))[:, None]),
     "wrong", "padded-queries"),
    (torch_bridge.mask_for_mha, "wrong", "raised"),
    (lambda L, n, h: (torch_bridge.mask_for_mha(np.repeat(allowed(L, n), h,
                                                          axis=0)),
                      torch_bridge.mask_for_sdpa(allowed(L, n)[:, None])),
     "for review", "for-review"),
    (lambda L, n, h: batch_masks(L, n, h) if masks.causal_mask(n) is not None
     else None, "for review", "for-review"),
])
def test_batch_masks_check_names_the_problem(answer, status, code):
    expect(checks.check_batch_masks.feedback(answer), status, code)


# ------------------------------------------------------------- 4.3 rows
def predicted(lengths, n, left_padded, need_weights, layers, spread=True):
    L = np.asarray(lengths)[:, None]
    i = np.arange(n)[None, :]
    empty = np.broadcast_to((i < n - L) if left_padded else L == 0,
                            (len(L), n))
    if layers == 2 and need_weights and spread:
        empty = np.broadcast_to(empty.any(axis=1, keepdims=True), empty.shape)
    return np.where(empty, "nan" if need_weights else "zero", "value")


def test_the_prediction_is_what_pytorch_does_on_hidden_cases():
    expect(checks.check_empty_rows.feedback(predicted), "correct")
    hidden(checks.check_empty_rows, predicted)


def test_every_draw_sends_a_nan_through_a_second_masked_layer():
    for seed in range(10):
        cases = checks.check_empty_rows.draw(np.random.default_rng(seed))
        assert any(c["layers"] == 2 and c["need_weights"]
                   and c["left_padded"] for c in cases[8:])


def no_empty_item(lengths, n, left_padded, need_weights, layers):
    out = predicted(lengths, n, left_padded, need_weights, layers)
    out[np.asarray(lengths) == 0] = "value"
    return out


def right_padding_empties(lengths, n, left_padded, need_weights, layers):
    L = np.asarray(lengths)[:, None]
    empty = np.arange(n)[None, :] >= L
    state = "nan" if need_weights else "zero"
    if left_padded:
        return predicted(lengths, n, left_padded, need_weights, layers)
    return np.where(empty, state, "value")


def nan_everywhere(lengths, n, left_padded, need_weights, layers):
    """A NaN in the first layer taken to reach every item."""
    out = predicted(lengths, n, left_padded, need_weights, layers)
    if layers == 2 and (out == "nan").any():
        out[:] = "nan"
    return out


def zeros_spread(lengths, n, left_padded, need_weights, layers):
    """Rows of zeros taken to empty their whole item in the second layer."""
    out = predicted(lengths, n, left_padded, need_weights, layers)
    if layers == 2 and not need_weights:
        out = predicted(lengths, n, left_padded, True, 2)
        out = np.where(out == "nan", "zero", "value")
    return out


def spread_in_the_wrong_place(lengths, n, left_padded, need_weights,
                              layers):
    """The spread, but only to the rows after the first layer's NaN."""
    out = predicted(lengths, n, left_padded, need_weights, 1)
    if layers == 2 and need_weights:
        out[:, :-1] = np.where((out == "nan").any(axis=1, keepdims=True),
                               "nan", out[:, :-1])
    return out


@pytest.mark.parametrize("answer, status, code", [
    (None, "not done", "not-done"),
    (lambda *a: None, "not done", "not-done"),
    (lambda *a: "nan", "wrong", "type"),
    (lambda L, n, l, w, k: np.full((n, len(L)), "nan"), "wrong", "shape"),
    (lambda L, n, l, w, k: np.zeros((len(L), n)), "wrong", "not-a-state"),
    (lambda L, n, l, w, k: np.full((len(L), n), "NaN"), "wrong",
     "not-a-state"),
    (lambda L, n, l, w, k: predicted(L, n, l, not w, 1), "wrong",
     "empty-rows-wrong-kind"),
    (lambda L, n, l, w, k: np.full((len(L), n), "value"), "wrong",
     "no-real-token"),
    (no_empty_item, "wrong", "no-real-token"),
    (right_padding_empties, "wrong", "row-has-keys"),
    (lambda L, n, l, w, k: predicted(L, n, False, w, k), "wrong",
     "left-padding-empty-row"),
    (lambda L, n, l, w, k: predicted(L, n, l, w, k, spread=False), "wrong",
     "nan-stopped-by-mask"),
    (nan_everywhere, "wrong", "nan-across-items"),
    (zeros_spread, "wrong", "zeros-spread"),
    (spread_in_the_wrong_place, "wrong", "nan-spread-missed"),
])
def test_rows_check_names_the_problem(answer, status, code):
    expect(checks.check_empty_rows.feedback(answer), status, code)


# ------------------------------------------------------------ 4.4 local
def local_vs_global(radius, seed, after=False, full_radius=None):
    rng = np.random.default_rng(seed)
    X = patches.center(patches.patchify(data.two_squares(rng), 4))
    W = [rng.standard_normal((16, 16)) for _ in range(3)]
    Q, K, V = (X @ w for w in W)
    near = masks.neighborhood_mask((8, 8), radius)
    Y, A = attention.attention(Q, K, V)
    Y_near = (A * near) @ V if after else \
        attention.attention(Q, K, V, mask=near)[0]
    inside = (A * near).sum(axis=1)
    gap = np.linalg.norm(Y_near - Y, axis=1)
    spread = np.linalg.norm(V[:, None] - V[None], axis=-1).max()
    return inside, gap, spread


def test_local_check_accepts_a_real_experiment_on_hidden_cases():
    expect(checks.check_local.feedback(local_vs_global), "correct")
    hidden(checks.check_local, local_vs_global)


def shifted(radius, seed):
    inside, gap, spread = local_vs_global(radius, seed)
    return inside, gap + (radius < 7) * 1e3, spread


@pytest.mark.parametrize("answer, status, code", [
    (None, "not done", "not-done"),
    (lambda r, s: None, "not done", "not-done"),
    (lambda r, s: local_vs_global(r, s)[:2], "wrong", "type"),
    (lambda r, s: (np.ones(16), np.zeros(16), 1.0), "wrong", "shape"),
    (lambda r, s: (np.full(64, np.nan), np.zeros(64), 1.0), "wrong",
     "not-finite"),
    (lambda r, s: (local_vs_global(r, s)[0] * 2, *local_vs_global(r, s)[1:]),
     "wrong", "not-a-share"),
    (lambda r, s: (local_vs_global(r, s)[0], -local_vs_global(r, s)[1],
                   1.0), "wrong", "negative-distance"),
    (shifted, "wrong", "gap-above-bound"),
    (lambda r, s: local_vs_global(r, s + r), "wrong", "share-not-growing"),
    (lambda r, s: (np.full(64, 0.5), np.zeros(64), 1.0), "wrong",
     "whole-grid-not-global"),
])
def test_local_check_names_the_problem(answer, status, code):
    expect(checks.check_local.feedback(answer), status, code)
