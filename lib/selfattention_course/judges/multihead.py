"""The judges of :ref:`ch-multihead`, Multi-head attention: hidden cases,
judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import math

import numpy as np
from selfattention.attention import multi_head_attention
from selfattention_exercises.core import (
    Opaque,
    Wrong,
    returned_arrays,
    type_name,
)

from . import Judge


def grouped_counts(d, h, g, n, m):
    """Weights, multiply-adds and cached numbers of a bias-free layer whose
    h query heads of width d/h share g key and value heads of that width:
    n queries of width d attend to m context tokens of width d."""
    kv = g * (d // h)                             # width of K and of V
    return (2 * d * d + 2 * d * kv,
            2 * n * d * d + 2 * m * d * kv + 2 * n * m * d,
            2 * m * kv)


def _grouped_cases(rng):
    fixed = [(768, 12, 4, 197, 197),      # ViT-B: width, heads, tokens
             (16, 4, 1, 64, 64),          # the running example, one K, V
             (64, 8, 4, 10, 7),           # cross-attention, n != m
             (96, 12, 3, 1, 50)]          # one new query, 50 kept tokens
    drawn = []
    for _ in range(2):
        h = int(rng.integers(2, 17))
        below = [g for g in range(1, h) if h % g == 0]
        g = int(rng.choice(below))
        n, m = (int(x) for x in rng.choice(np.arange(1, 300), 2,
                                           replace=False))
        drawn.append((h * int(rng.integers(2, 33)), h, g, n, m))
    return [dict(zip(("d", "h", "g", "n", "m"), c)) for c in fixed + drawn]


def _int_triple(out):
    wrong = ("grouped_counts should return three integers (parameters, "
             "multiply_adds, cached)")
    if not (isinstance(out, (tuple, list)) and len(out) == 3):
        raise Wrong(f"{wrong}, got {type_name(out)}", "not-a-triple")
    try:
        values = []
        for v in out:
            if isinstance(v, (str, Opaque, bool)) or v is None:
                raise TypeError
            x = float(np.asarray(v, dtype=float))
            if not math.isfinite(x) or x != round(x):
                raise ValueError
            values.append(int(round(x)))
    except (TypeError, ValueError):
        raise Wrong(f"{wrong}; one of yours is not a whole number",
                    "not-a-triple") from None
    return tuple(values)


def _grouped_judge(out, d, h, g, n, m):
    params, macs, cached = _int_triple(out)
    want = grouped_counts(d, h, g, n, m)
    where = f"for d = {d}, h = {h}, g = {g}, n = {n}, m = {m}"
    w = d // h
    kv = g * w
    if params != want[0]:
        _diagnose(params, where, "parameters", [
            (2 * d * d + d * kv, "count both W_K and W_V",
             "one-of-k-v-missing"),
            (d * d + 2 * d * kv, "the output projection W_O (d × d) is "
                                 "missing", "output-projection-missing"),
            (4 * d * d, "you count W_K and W_V at the full width d; with g "
                        "key heads of width d/h each is d × g·d/h",
             "kv-not-shared"),
            (2 * d * d + 2 * d * (h // g) * w,
             "g is the number of key and value heads, not the number of "
             "query heads in a group", "groups-inverted"),
            (2 * d * d + 2 * d * w, "that is one key head and one value "
                                    "head (g = 1); there are g of each",
             "one-kv-head"),
        ], "count the weights of W_Q, W_K, W_V and W_O", "not-the-params")
    if macs != want[1]:
        proj = 2 * n * d * d + 2 * m * d * kv
        attend = 2 * n * m * d
        _diagnose(macs, where, "multiply-adds", [
            (2 * want[1], "that is twice the multiply-adds: count a "
                          "multiply-add once, not as two operations",
             "macs-doubled"),
            (attend, "you counted only Q Kᵀ and A V; the projections cost "
                     "multiply-adds too", "projections-missing"),
            (proj, "you counted only the projections; Q Kᵀ and A V cost "
                   "multiply-adds too", "products-missing"),
            (2 * n * d * d + 2 * m * d * d + attend,
             "you project the keys and values at the full width d; only g "
             "heads of width d/h are computed", "kv-not-shared"),
            (2 * n * d * d + 2 * m * d * w + attend,
             "that is one key head and one value head (g = 1); there are g "
             "of each", "one-kv-head"),
            (2 * n * d * d + 2 * m * d * (h // g) * w + attend,
             "g is the number of key and value heads, not the number of "
             "query heads in a group", "groups-inverted"),
            (2 * n * d * d + 2 * n * d * kv + attend,
             "keys and values are computed for the m context tokens, not "
             "for the n queries", "keys-per-query"),
            (proj + attend * g // h,
             "sharing a key head does not share its products: each of the "
             "h query heads still scores its n queries against all m keys "
             "and averages the values itself", "products-shared"),
            (proj + attend // 2, "count both products, Q Kᵀ and A V, each "
                                 "n·m·d", "one-product-counted"),
            (n * d * d + 2 * m * d * kv + attend,
             "the output projection W_O is missing",
             "output-projection-missing"),
        ], "add up the four projections, Q Kᵀ and A V", "not-the-macs")
    if cached != want[2]:
        _diagnose(cached, where, "cached numbers", [
            (4 * want[2], "count numbers, not bytes", "cache-in-bytes"),
            (8 * want[2], "count numbers, not bytes", "cache-in-bytes"),
            (2 * n * kv, "the keys and values to keep are the m context "
                         "tokens', not the n queries'", "cache-per-query"),
            (m * kv, "keep the values as well as the keys",
             "cache-keys-only"),
            (2 * m * d, "you keep keys and values at the full width d; "
                        "only g heads of width d/h are computed",
             "kv-not-shared"),
            (2 * m * (h // g) * w, "g is the number of key and value heads, "
                                   "not the number of query heads in a "
                                   "group", "groups-inverted"),
            (2 * m * w, "that is one key head and one value head (g = 1); "
                        "there are g of each", "one-kv-head"),
        ], "count the keys and values of the m context tokens",
            "not-the-cache")
    return None


def _diagnose(got, where, what, guesses, hint, code):
    """Raise the Wrong of the first guess equal to ``got`` (the later entry
    where two coincide), else the generic one."""
    for value, message, guess_code in reversed(guesses):
        if got == value:
            raise Wrong(f"{where} you count {got} {what}: {message}",
                        guess_code)
    raise Wrong(f"{where} you count {got} {what}; {hint}", code)


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
    "ex-multihead-grouped": Judge(cases=_grouped_cases,
                                  judge=_grouped_judge),
    "ex-multihead-equivalent": Judge(
        cases=_equivalent_cases, judge=_equivalent_judge),
    "ex-multihead-heads": Judge(cases=_heads_cases, judge=_heads_judge),
}
