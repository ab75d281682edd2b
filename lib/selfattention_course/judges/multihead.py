"""The judges of :ref:`ch-multihead`, Multi-head attention: hidden cases,
judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import math

import numpy as np
from selfattention.attention import multi_head_attention
from selfattention.exercises.core import (
    Opaque,
    Wrong,
    int_pair,
    returned_arrays,
    type_name,
)
from selfattention.exercises.multihead import mha_counts

from . import Judge


def _counts_cases(rng):
    fixed = [(512, 512, 8, 196, 196),       # the base width, ViT's tokens
             (16, 16, 4, 64, 64),           # the running example
             (64, 32, 4, 10, 7),            # cross-attention, d_c != d
             (48, 96, 1, 5, 9), (48, 96, 16, 5, 9)]
    drawn = []
    for _ in range(2):
        h = int(rng.integers(2, 13))
        drawn.append((h * int(rng.integers(2, 33)), int(rng.integers(2, 200)),
                      h, int(rng.integers(1, 300)), int(rng.integers(1, 300))))
    return [dict(zip(("d", "d_c", "h", "n", "m"), c)) for c in fixed + drawn]


def _counts_judge(out, d, d_c, h, n, m):
    params, macs = int_pair(out, "my_counts should return a pair "
                                 "(parameters, multiply_adds) of integers")
    want_p, want_m = mha_counts(d, d_c, h, n, m)
    where = f"for d = {d}, d_c = {d_c}, h = {h}, n = {n}, m = {m}"
    if params != want_p:
        _wrong_parameters(params, where, d, d_c, h)
    if macs != want_m:
        _wrong_macs(macs, where, d, d_c, h, n, m)
    return None


def _wrong_parameters(got, where, d, d_c, h):
    right = 2 * d * d + 2 * d * d_c
    if got == 4 * d * d and d != d_c:
        raise Wrong(f"{where} you count 4d² = {got} parameters: W_K and W_V "
                    f"read the context tokens, so each is d_c × d",
                    "context-width-ignored")
    if got == d * d + 2 * d * d_c:
        raise Wrong(f"{where} you count {got} parameters: the output "
                    f"projection W_O (d × d) is missing",
                    "output-projection-missing")
    if got == h * right or got == right // h:
        raise Wrong(f"{where} you count {got} parameters: the h heads share "
                    f"out the width (each d × d/h), so the total does not "
                    f"depend on h", "params-depend-on-h")
    raise Wrong(f"{where} you count {got} parameters; count the weights of "
                f"the four projections W_Q, W_K, W_V, W_O", "not-the-params")


def _wrong_macs(got, where, d, d_c, h, n, m):
    proj = 2 * n * d * d + 2 * m * d_c * d
    attend = 2 * n * m * d
    guesses = [
        (attend, "you counted only Q Kᵀ and A V; the four projections cost "
                 "multiply-adds too", "projections-missing"),
        (proj, "you counted only the projections; forming Q Kᵀ and A V "
               "costs multiply-adds too", "products-missing"),
        (2 * n * d * d + 2 * n * d_c * d + attend,
         "keys and values are computed for the m context tokens, not for "
         "the n queries", "keys-per-query"),
        (n * d * d + 2 * m * d_c * d + attend,
         "the output projection W_O (n rows times a d × d matrix) is "
         "missing", "output-projection-missing"),
        (proj + attend // h, "each head costs n·m·d/h for Q Kᵀ and as much "
                             "for A V, and there are h heads",
         "one-head-counted"),
        (proj + attend * h, "a head's scores cost n·m·d/h, not n·m·d: the "
                            "total does not depend on h", "macs-depend-on-h"),
        (proj + attend // 2, "count both products, Q Kᵀ and A V, each n·m·d",
         "one-product-counted"),
        (proj + 2 * n * n * d, "the score matrix is n × m: every query meets "
                               "every context token, not every query",
         "scores-n-by-n"),
    ]
    # Where two values coincide, the later entry names the mistake.
    for value, message, code in reversed(guesses):
        if got == value:
            raise Wrong(f"{where}: {message}", code)
    raise Wrong(f"{where} you count {got} multiply-adds; add up the four "
                f"projections, Q Kᵀ and A V", "not-the-macs")


def _invertible(rng, h: int, w: int) -> np.ndarray:
    """(h, w, w) matrices well away from singular."""
    return rng.standard_normal((h, w, w)) + 2.5 * np.eye(w)


def _permutation(rng, h: int) -> np.ndarray:
    """A permutation of range(h) that differs from its inverse."""
    while True:
        order = rng.permutation(h)
        if not np.array_equal(order, np.argsort(order)):
            return order


def _equivalent_cases(rng):
    cases = []
    for h, w, d_out in ((3, 2, 4), (4, 3, 5)):
        d = h * w
        cases.append({
            "X": rng.standard_normal((5, d)),
            "W_q": rng.standard_normal((d, d)), "W_k": rng.standard_normal(
                (d, d)), "W_v": rng.standard_normal((d, d)),
            "W_o": rng.standard_normal((d, d_out)), "h": h,
            "order": _permutation(rng, h), "G": _invertible(rng, h, w)})
    return cases


def _transform(W_q, W_k, W_v, W_o, h, order, G, key="inv_T", out="inv",
               rows=True):
    """The transformed weights, or one of the mistakes the judge names."""
    w = W_q.shape[1] // h

    def block(W, i):
        return W[:, i * w:(i + 1) * w]

    G_inv = np.linalg.inv(G)                                  # (h, w, w)
    on_keys = {"inv_T": np.swapaxes(G_inv, -1, -2), "inv": G_inv,
               "same": np.broadcast_to(np.eye(w), G.shape)}[key]
    on_out = {"inv": G_inv, "inv_T": np.swapaxes(G_inv, -1, -2),
              "same": np.broadcast_to(np.eye(w), G.shape)}[out]
    q, k, v, o = [], [], [], []
    for i, old in enumerate(order):
        q.append(block(W_q, old) @ G[i])
        k.append(block(W_k, old) @ on_keys[i])
        v.append(block(W_v, old) @ G[i])
        o.append(on_out[i] @ W_o[(old if rows else i) * w:
                                 ((old if rows else i) + 1) * w])
    return (np.concatenate(q, axis=1), np.concatenate(k, axis=1),
            np.concatenate(v, axis=1), np.concatenate(o, axis=0))


def _equivalent_judge(out, X, W_q, W_k, W_v, W_o, h, order, G):
    given = (W_q, W_k, W_v, W_o)
    new = returned_arrays(out, 4, "equivalent_weights should return four "
                                  "arrays (W_q, W_k, W_v, W_o)")
    for name, got, old in zip(("W_q", "W_k", "W_v", "W_o"), new, given):
        if got.shape != old.shape:
            raise Wrong(f"the new {name} has shape {got.shape}; it should "
                        f"keep the shape of the old one, {old.shape}", "shape")
    if not all(np.all(np.isfinite(W)) for W in new):
        raise Wrong("the new weights contain NaN or inf", "not-finite")
    Y, A = multi_head_attention(X, *given, h)
    Y_new, A_new = multi_head_attention(X, *new, h)

    def close(a, b):
        return np.allclose(a, b, rtol=1e-7, atol=1e-9)

    if not close(A_new, A[order]):
        if close(A_new, A[np.argsort(order)]):
            raise Wrong(f"the heads are permuted the other way round: with "
                        f"order = {order.tolist()}, new head i must be old "
                        f"head order[i], but yours puts old head i at place "
                        f"order[i]", "heads-inverse-order")
        if close(A_new, A):
            raise Wrong("your maps come out in the old order: new head i "
                        "must be old head order[i]", "heads-not-reordered")
        for key, why, code in (
                ("same", "the queries were multiplied by G[i] but the keys "
                         "were not changed to compensate", "keys-unchanged"),
                ("inv", "the keys need G[i]⁻ᵀ, not G[i]⁻¹: (X W_q G)(X W_k "
                        "G⁻ᵀ)ᵀ = X W_q G G⁻¹ W_kᵀ Xᵀ", "keys-inverse")):
            _, A_alt = multi_head_attention(
                X, *_transform(*given, h, order, G, key=key), h)
            if close(A_new, A_alt):
                raise Wrong(f"the attention maps change: {why}", code)
        raise Wrong("the attention maps of your layer are not the old maps "
                    "in the new order; check which columns of W_q and W_k "
                    "each new head takes and how G[i] enters", "maps-change")
    if not close(Y_new, Y):
        for kwargs, why, code in (
                ({"rows": False}, "the row blocks of W_o must move with "
                                  "their heads: head i's output meets rows "
                                  "i·w … (i+1)·w − 1", "output-rows-stay"),
                ({"out": "same"}, "the values were multiplied by G[i], so "
                                  "that head's rows of W_o need G[i]⁻¹ on "
                                  "the left", "output-rows-unchanged"),
                ({"out": "inv_T"}, "the rows of W_o need G[i]⁻¹, not "
                                   "G[i]⁻ᵀ: (A X W_v G)(G⁻¹ W_o) = A X W_v "
                                   "W_o", "output-rows-transposed")):
            Y_alt, _ = multi_head_attention(
                X, *_transform(*given, h, order, G, **kwargs), h)
            if close(Y_new, Y_alt):
                raise Wrong(f"the maps are right but the outputs change: "
                            f"{why}", code)
        raise Wrong("the maps are right but the outputs change; check the "
                    "value projections and the rows of W_o", "outputs-change")
    # The same maps and outputs also come from reordering the heads alone:
    # the task fixes the new query and value projections, old head
    # order[i]'s times G[i].
    w = W_q.shape[1] // h
    for name, got, old in (("W_q", new[0], W_q), ("W_v", new[2], W_v)):
        for i, j in enumerate(order):
            if not close(got[:, i * w:(i + 1) * w],
                         old[:, j * w:(j + 1) * w] @ G[i]):
                raise Wrong(f"the maps and outputs are right, but head {i}'s "
                            f"block of the new {name} is not old head "
                            f"{int(j)}'s times G[{i}]: change each head's "
                            f"basis, not only the order of the heads",
                            "basis-unchanged")
    return None


_ONE_HEAD_FLOOR = 0.25      # one head, trained for long: about 0.38
_MANY_HEADS_CEILING = 0.1   # two heads or more: below 0.001 in 200 steps


def _heads_cases(rng):
    seed = int(rng.integers(0, 2 ** 31))
    more = int(rng.choice([2, 4, 8]))
    return [{"h": 1, "seed": seed}, {"h": more, "seed": seed + 1}]


def _heads_judge(out, h, seed):
    try:
        if isinstance(out, (str, Opaque, bool)) or out is None:
            raise TypeError
        error = float(np.asarray(out, dtype=float))
    except (TypeError, ValueError):
        raise Wrong(f"retrieval_error should return one number, got "
                    f"{type_name(out)}", "not-a-number") from None
    if not math.isfinite(error) or error < 0:
        raise Wrong(f"retrieval_error({h}, {seed}) returned {error}; a "
                    f"relative squared error is a number ≥ 0", "not-an-error")
    if error > 1.5:
        raise Wrong(f"retrieval_error({h}, {seed}) = {error:.3g}: a layer "
                    f"that always outputs zeros scores 1. Divide the summed "
                    f"squared error by the summed squared target, on fresh "
                    f"test sequences", "error-not-relative")
    if h == 1 and error < _ONE_HEAD_FLOOR:
        raise Wrong(f"one head reaches {error:.3g}, below what a single "
                    f"weighted average can do on this task (about 0.38 "
                    f"after long training). Is the error measured on fresh "
                    f"sequences, against the target of retrieval_task?",
                    "one-head-too-good")
    if h > 1 and error > _MANY_HEADS_CEILING:
        raise Wrong(f"with h = {h} heads the error is {error:.3g}; a layer "
                    f"of {h} heads can solve the task (below 0.01). Train "
                    f"longer or with a larger learning rate, and read the "
                    f"output of token 0", "heads-not-trained")
    return None


JUDGES = {
    "ex-multihead-counts": Judge(cases=_counts_cases, judge=_counts_judge),
    "ex-multihead-equivalent": Judge(
        cases=_equivalent_cases, judge=_equivalent_judge),
    "ex-multihead-heads": Judge(cases=_heads_cases, judge=_heads_judge),
}
