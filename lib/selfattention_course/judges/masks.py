"""The judges of :ref:`ch-masks`, Masks: hidden cases, judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import numpy as np
from selfattention.attention import multi_head_attention, softmax
from selfattention_exercises.core import (
    Opaque,
    Wrong,
    expect_shape,
    returned_array,
    returned_arrays,
    type_name,
)
from selfattention_exercises.masks import _RADII
from selfattention.masks import causal_mask

from . import Judge


def _shrinkage(S, mask):
    """rho_i: the weight that the unmasked softmax leaves on allowed keys."""
    return (softmax(S) * mask).sum(axis=-1)


def _mask_with_keys(rng, n_q: int, n_k: int) -> np.ndarray:
    """A random mask with at least one allowed key in every row."""
    mask = rng.random((n_q, n_k)) < 0.5
    mask[np.arange(n_q), rng.integers(0, n_k, n_q)] = True
    return mask


def _shrinkage_cases(rng):
    mask = _mask_with_keys(rng, 4, 6)
    mask[0] = True                                  # one row loses nothing
    n_q, n_k = int(rng.integers(2, 7)), int(rng.integers(7, 12))
    return [
        {"S": 2.5 * rng.standard_normal((4, 6)), "mask": mask},
        {"S": 2.0 * rng.standard_normal((2, 3, 5)),   # a batch of two
         "mask": _mask_with_keys(rng, 3, 5)},
        {"S": 1000.0 * rng.standard_normal((n_q, n_k)),  # exp overflows
         "mask": _mask_with_keys(rng, n_q, n_k)}]


def _shrinkage_judge(out, S, mask):
    got = returned_array(out, "my_shrinkage")
    rho = _shrinkage(S, mask)
    if got.shape == S.shape:
        raise Wrong(f"my_shrinkage returns shape {got.shape}, one number "
                    f"per score; the output of query i shrinks by one "
                    f"factor: add up over the keys (the last axis)", "shape")
    expect_shape(got, "my_shrinkage(S, mask)", rho.shape, "(..., n_q)",
                 "one factor per query")
    if not np.all(np.isfinite(got)):
        raise Wrong("my_shrinkage returns NaN or inf for scores in the "
                    "hundreds: subtract each row's maximum before "
                    "exponentiating (or use the book's softmax)", "overflow")
    if np.allclose(got, rho, rtol=1e-9, atol=1e-12):
        return None
    P = softmax(S)
    guesses = (
        (1 - rho, "this is the weight the forbidden keys took, 1 − ρ; the "
                  "output keeps the weight of the allowed keys",
         "forbidden-share"),
        (np.ones_like(rho), "you return 1 for every query: that is the row "
                            "sum of the weights masked before the softmax, "
                            "not of the weights zeroed after it",
         "masked-before-softmax"),
        (1 / np.where(rho > 0, rho, np.inf), "the output is multiplied by "
                                             "ρ, not divided by it",
         "inverted"),
        ((np.exp(S - S.max(-1, keepdims=True)) * mask).sum(-1),
         "divide by the sum over all keys: the zeroed weights are a share "
         "of the full softmax", "renormalised"),
        ((P * mask).max(-1), "add up the allowed weights, not only the "
                             "largest", "largest-only"),
    )
    for value, message, code in guesses:
        if value.shape == got.shape and np.allclose(got, value, rtol=1e-9,
                                                    atol=1e-12):
            raise Wrong(message, code)
    raise Wrong(f"for scores of shape {S.shape} the factors differ from "
                f"those of zeroing the softmax weights after the fact, "
                f"e.g. query 0: {float(got.reshape(-1)[0]):.4g}",
                "not-the-shrinkage")


def _allowed(lengths, n: int) -> np.ndarray:
    """(B, n, n): causal and not a padded key, True = may attend."""
    keys = np.arange(n)[None, :] < np.asarray(lengths)[:, None]   # (B, n)
    return causal_mask(n)[None] & keys[:, None, :]


def _batch_cases(rng):
    B, n, h = int(rng.integers(2, 5)), int(rng.integers(3, 9)), \
        int(rng.integers(2, 5))
    lengths = rng.integers(1, n + 1, B)
    lengths[:2] = n, int(rng.integers(1, n))        # two different lengths
    return [{"lengths": np.array([5, 2, 4]), "n": 5, "h": 2},
            {"lengths": np.array([3, 6]), "n": 6, "h": 3},
            {"lengths": lengths, "n": n, "h": h}]


def _as_mask(info, name: str):
    if not (isinstance(info, tuple) and len(info) == 4):
        raise Wrong("batch_masks should return a pair (for_mha, for_sdpa) "
                    "of torch tensors", "not-a-pair")
    kind, dtype, shape, values = info
    if kind == "ndarray":
        raise Wrong(f"{name} is a NumPy array; PyTorch wants a tensor "
                    f"(torch.from_numpy)", "numpy-not-tensor")
    if kind != "Tensor":
        raise Wrong(f"{name} should be a torch.Tensor, got {kind}",
                    "not-a-tensor")
    if values is None:
        raise Wrong(f"{name} has dtype {dtype}; give a boolean mask "
                    f"(torch.bool)", "mask-not-bool")
    return tuple(shape), np.asarray(values, dtype=bool)


def _mistake(allowed, lengths, n):
    """``(message, code)`` naming the mistake if ``allowed`` (B, n, n) is a
    known wrong mask, else None."""
    L = np.asarray(lengths)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    keys = (j < L[:, None, None])                              # (B, 1, n)
    queries = (np.arange(n)[None, :, None] < L[:, None, None])  # (B, n, 1)
    causal = causal_mask(n)[None]
    known = (
        (causal & queries, "you hid the padded queries (rows) instead of the "
                           "padded keys (columns): no query may read a "
                           "padded key", "padded-queries"),
        (np.broadcast_to(causal, allowed.shape), "the padding is missing: "
         "key j of item b must be hidden when j ≥ lengths[b]",
         "padding-missing"),
        (np.broadcast_to(keys, allowed.shape), "the causal part is missing: "
         "query i may use keys j ≤ i only", "causal-missing"),
        ((j >= i)[None] & keys, "query i may use the keys j ≤ i (the lower "
                                "triangle), not j ≥ i", "causal-transposed"),
        ((j < i)[None] & keys, "the diagonal is blocked: a token may attend "
                               "to itself", "diagonal-blocked"),
        (causal | keys, "combine the two masks with 'and' (&): a key must be "
                        "allowed by both", "masks-or"),
    )
    for wrong, message, code in known:
        if np.array_equal(allowed, np.broadcast_to(wrong, allowed.shape)):
            return message, code
    return None


def _batch_judge(out, lengths, n, h):
    if not (isinstance(out, tuple) and len(out) == 2) or out[0] == \
            "not a pair":
        raise Wrong("batch_masks should return a pair (for_mha, for_sdpa) "
                    "of torch tensors", "not-a-pair")
    B = len(lengths)
    allowed = _allowed(lengths, n)                              # (B, n, n)
    shape, got = _as_mask(out[0], "for_mha")
    want_shape = (B * h, n, n)
    if shape != want_shape:
        if shape in ((B, n, n), (n, n)):
            raise Wrong(f"for_mha has shape {shape}; nn.MultiheadAttention "
                        f"needs one mask per item and head, (B·h, n, n) = "
                        f"{want_shape}, when the items differ",
                        "mask-per-item-not-head")
        raise Wrong(f"for_mha has shape {shape}, expected (B·h, n, n) = "
                    f"{want_shape}", "shape")
    want = np.repeat(~allowed, h, axis=0)                  # item-major
    if not np.array_equal(got, want):
        if np.array_equal(got, ~want):
            raise Wrong("for_mha uses True for 'may attend'; "
                        "nn.MultiheadAttention reads True as 'blocked'",
                        "mask-inverted")
        if np.array_equal(got, np.tile(~allowed, (h, 1, 1))):
            raise Wrong("in for_mha the heads vary fastest: PyTorch reads "
                        "entry b·h + k as item b, head k, so each item's "
                        "mask must repeat h times in a row "
                        "(repeat_interleave, or np.repeat along axis 0)",
                        "heads-vary-fastest")
        known = _mistake(~got[::h], lengths, n)
        if known:
            raise Wrong(f"for_mha: {known[0]}", known[1])
        raise Wrong("for_mha differs from the causal mask combined with "
                    "the padding of each item (True = blocked)",
                    "not-the-mask")
    shape, got = _as_mask(out[1], "for_sdpa")
    if shape == (B, n, n) and B != 1:
        raise Wrong(f"for_sdpa has shape {shape}: against scores of shape "
                    f"(B, h, n, n) its first axis would line up with the "
                    f"heads. Give it a head axis: (B, 1, n, n)",
                    "mask-missing-head-axis")
    try:
        got = np.broadcast_to(got, (B, h, n, n))
    except ValueError:
        raise Wrong(f"for_sdpa has shape {shape}; it must broadcast to the "
                    f"scores, (B, h, n, n) = {(B, h, n, n)}, for instance "
                    f"(B, 1, n, n)", "shape") from None
    want = np.broadcast_to(allowed[:, None], (B, h, n, n))
    if not np.array_equal(got, want):
        if np.array_equal(got, ~want):
            raise Wrong("for_sdpa uses True for 'blocked'; "
                        "scaled_dot_product_attention reads True as 'may "
                        "attend'", "mask-inverted")
        known = _mistake(got[:, 0], lengths, n)
        if known:
            raise Wrong(f"for_sdpa: {known[0]}", known[1])
        raise Wrong("for_sdpa differs from the causal mask combined with "
                    "the padding of each item (True = may attend)",
                    "not-the-mask")
    _agrees_with_torch(out, lengths, n, h, allowed)
    return None


def _agrees_with_torch(out, lengths, n, h, allowed):
    """Run both PyTorch functions with the masks; compare with NumPy."""
    import torch
    import torch.nn.functional as F
    from selfattention.torch_bridge import multihead_from_weights

    B, d = len(lengths), 2 * h
    rng = np.random.default_rng(0)
    X = rng.standard_normal((B, n, d))
    W = [rng.standard_normal((d, d)) / np.sqrt(d) for _ in range(4)]
    Y, _ = multi_head_attention(X, *W, h, mask=allowed[:, None])
    Q, K, V = (rng.standard_normal((B, h, n, 2)) for _ in range(3))
    Y_s = softmax(np.where(allowed[:, None], Q @ np.swapaxes(K, -1, -2)
                           / np.sqrt(2), -np.inf)) @ V
    mha = multihead_from_weights(*W, h)
    x = torch.from_numpy(X)
    with torch.no_grad():
        Y_t, _ = mha(x, x, x, attn_mask=torch.from_numpy(out[0][3]))
        Y_st = F.scaled_dot_product_attention(
            *(torch.from_numpy(a) for a in (Q, K, V)),
            attn_mask=torch.from_numpy(out[1][3]))
    if not (np.allclose(Y_t.numpy(), Y, rtol=0, atol=1e-10)
            and np.allclose(Y_st.numpy(), Y_s, rtol=0, atol=1e-10)):
        raise Wrong("the masks look right but PyTorch's outputs differ "
                    "from the NumPy reference", "torch-disagrees")


STATES = ("nan", "zero", "value")


def _rows_cases(rng):
    n = int(rng.integers(4, 8))
    lengths = rng.integers(1, n + 1, 3)
    lengths[0], lengths[1] = n, int(rng.integers(1, n))
    # Left padding with need_weights=True through two layers is always
    # drawn: there a NaN meets the key-padding mask.
    drawn = [{"lengths": lengths.copy(), "n": n, "left_padded": bool(left),
              "need_weights": bool(weights), "layers": layers}
             for left, weights, layers in (
                 (True, True, 2),
                 (rng.random() < 0.5, True, 1),
                 (rng.random() < 0.5, False, int(rng.integers(1, 3))))]
    drawn[int(rng.integers(0, 3))]["lengths"][2] = 0     # an empty item
    public = [{"lengths": np.array([5, 2, 0]), "n": 5, "left_padded": left,
               "need_weights": weights, "layers": layers}
              for layers in (1, 2) for left in (False, True)
              for weights in (True, False)]
    return public + drawn


def _measured_rows(lengths, n, left_padded, need_weights, layers=1):
    """What ``layers`` nn.MultiheadAttention modules in a row return, row by
    row, each with the same causal and key-padding masks: (B, n) of
    STATES."""
    import torch
    from selfattention.torch_bridge import multihead_from_weights

    rng = np.random.default_rng(0)
    d, h = 8, 2
    stack = [multihead_from_weights(*(rng.standard_normal((d, d))
                                      for _ in range(4)), h)
             for _ in range(layers)]
    L = np.asarray(lengths)[:, None]
    pos = np.arange(n)[None, :]
    padded = pos < n - L if left_padded else pos >= L             # (B, n)
    Y = torch.from_numpy(rng.standard_normal((len(L), n, d)))
    with torch.no_grad():
        for mha in stack:
            Y, _ = mha(Y, Y, Y, attn_mask=torch.from_numpy(~causal_mask(n)),
                       key_padding_mask=torch.from_numpy(padded),
                       need_weights=need_weights)
    Y = Y.numpy()
    return np.where(np.isnan(Y).any(-1), "nan",
                    np.where((Y == 0).all(-1), "zero", "value"))


def _rows_judge(out, lengths, n, left_padded, need_weights, layers):
    if isinstance(out, (str, Opaque)):
        raise Wrong(f"predicted_rows should return an array of strings, got "
                    f"{type_name(out)}", "type")
    got = np.asarray(out)
    truth = _measured_rows(lengths, n, left_padded, need_weights, layers)
    expect_shape(got, "predicted_rows(...)", truth.shape, "(B, n)",
                 "one state per output row")
    if got.dtype.kind != "U" or not np.isin(got, STATES).all():
        raise Wrong(f"each entry should be one of {STATES}", "not-a-state")
    if np.array_equal(got, truth):
        return None
    where = (f"for lengths {np.asarray(lengths).tolist()}, n = {n}, "
             f"left_padded = {left_padded}, need_weights = {need_weights}, "
             f"layers = {layers}")
    if layers == 2:
        first = _measured_rows(lengths, n, left_padded, need_weights, 1)
        touched = (first != "value").any(axis=1)          # (B,) items
        if np.array_equal(got, first):
            raise Wrong(f"{where}: the second layer does not only repeat the "
                        f"first. Its key-padding mask hides the first "
                        f"layer's NaN rows as keys, yet a masked score is "
                        f"NaN + (−∞) = NaN and a zero weight times a NaN "
                        f"value is NaN: which rows of that item escape?",
                        "nan-stopped-by-mask")
        if ((got == "nan") & ~touched[:, None]).any():
            raise Wrong(f"{where}: you predict NaN in an item whose first "
                        f"layer gave no NaN; each item of the batch is "
                        f"attended on its own, so a NaN stays in its item",
                        "nan-across-items")
        if not need_weights and ((got == "zero") & (first == "value")).any():
            raise Wrong(f"{where}: a row of zeros is a number, not a NaN: "
                        f"in the second layer it is a padded key, masked "
                        f"out, and changes no other row", "zeros-spread")
    empty = truth != "value"
    if np.array_equal(got != "value", empty):
        path = ("need_weights=True takes the explicit softmax of "
                "F.multi_head_attention_forward: 0/0 = NaN" if need_weights
                else "need_weights=False hands the scores to "
                     "scaled_dot_product_attention, which returns zeros")
        raise Wrong(f"{where}: the right rows are empty, but {path}",
                    "empty-rows-wrong-kind")
    b, i = np.argwhere(got != truth)[0]
    L = int(lengths[b])
    if L == 0:
        raise Wrong(f"{where}: item {b} has no real token, so none of its "
                    f"queries has a key", "no-real-token")
    if truth[b, i] != "value":
        if layers == 2 and need_weights:
            raise Wrong(f"{where}: row ({b}, {i}) is NaN after the second "
                        f"layer: a NaN key of its item reaches it through "
                        f"the mask", "nan-spread-missed")
        raise Wrong(f"{where}: row ({b}, {i}) has no key left: with left "
                    f"padding its causal keys 0 … {i} are all padding",
                    "left-padding-empty-row")
    raise Wrong(f"{where}: row ({b}, {i}) still has a key"
                + (": a padded query at the end keeps the real keys before "
                   "it" if not left_padded else ""), "row-has-keys")


def _local_cases(rng):
    return [{"seed": int(rng.integers(0, 2 ** 31))}]


def _local_judge(out, seed):
    if not (isinstance(out, list) and len(out) == len(_RADII)):
        raise Wrong("local_vs_global could not be run for every radius",
                    "unreadable")
    results = []
    for r, res in zip(_RADII, out):
        inside, gap, spread = returned_arrays(
            res, 3, f"local_vs_global({r}, {seed}) should return a triple "
                    f"(inside, gap, spread)")
        if inside.shape != (64,) or gap.shape != (64,) or spread.ndim:
            raise Wrong(f"local_vs_global({r}, {seed}) returns shapes "
                        f"{inside.shape}, {gap.shape}, {spread.shape}; "
                        f"expected (64,), (64,) and one number", "shape")
        if not (np.all(np.isfinite(inside)) and np.all(np.isfinite(gap))
                and np.isfinite(spread)):
            raise Wrong(f"radius {r}: the results hold NaN or inf",
                        "not-finite")
        results.append((inside, gap, float(spread)))
    tol = 1e-9
    for r, (inside, gap, spread) in zip(_RADII, results):
        if inside.min() < -tol or inside.max() > 1 + tol:
            raise Wrong(f"radius {r}: inside holds {inside.min():.3g} … "
                        f"{inside.max():.3g}; a share of the global weights "
                        f"lies between 0 and 1", "not-a-share")
        if gap.min() < -tol or spread < -tol:
            raise Wrong(f"radius {r}: distances cannot be negative",
                        "negative-distance")
        if np.any(gap > (1 - inside) * spread + 1e-7 * (1 + spread)):
            i = int(np.argmax(gap - (1 - inside) * spread))
            raise Wrong(f"radius {r}, query {i}: the gap {gap[i]:.4g} is "
                        f"larger than (1 − inside)·spread = "
                        f"{(1 - inside[i]) * spread:.4g}, which cannot "
                        f"happen if the local output renormalises over the "
                        f"neighbourhood (mask before the softmax) and spread "
                        f"is the largest distance between two values",
                        "gap-above-bound")
    for (r0, (a, _, _)), (r1, (b, _, _)) in zip(
            zip(_RADII, results), zip(_RADII[1:], results[1:])):
        if np.any(b < a - tol):
            raise Wrong(f"the share inside radius {r1} is smaller than "
                        f"inside radius {r0} for some query; a larger "
                        f"neighbourhood contains the smaller one (and the "
                        f"same seed gives the same data)", "share-not-growing")
    inside, gap, _ = results[-1]
    if not (np.allclose(inside, 1, atol=1e-9) and np.allclose(gap, 0,
                                                                atol=1e-9)):
        raise Wrong("radius 7 covers the whole 8 × 8 grid: inside must be 1 "
                    "and the gap 0 for every query", "whole-grid-not-global")
    return None


JUDGES = {
    "ex-masks-shrink": Judge(cases=_shrinkage_cases, judge=_shrinkage_judge),
    "ex-masks-batch": Judge(cases=_batch_cases, judge=_batch_judge),
    "ex-masks-nan": Judge(cases=_rows_cases, judge=_rows_judge),
    "ex-masks-local": Judge(cases=_local_cases, judge=_local_judge),
}
