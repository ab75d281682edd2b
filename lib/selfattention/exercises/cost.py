"""Exercises of chapter 7, Cost."""

from __future__ import annotations

import numpy as np

from ..attention import softmax
from .core import (Exercise, Wrong, answered, call, expect_shape, int_pair,
                   returned_arrays)

__all__ = ["check_count", "check_online_update", "COUNT_SETTING"]

#: Image side, patch side, heads and bytes per entry of exercise 6.1.
COUNT_SETTING = dict(image_size=384, patch_size=16, heads=12, itemsize=4)


# ------------------------------------------------------------------ 6.1
def _count_judge(answer):
    answered(answer, "a pair (n_tokens, n_bytes)")
    n, nbytes = int_pair(answer, "answer should be a pair (n_tokens, n_bytes)")
    S, P, h, b = (COUNT_SETTING[k] for k in
                  ("image_size", "patch_size", "heads", "itemsize"))
    n_ok = (S // P) ** 2
    if n == S // P:
        raise Wrong(f"{n} is the number of patches along one side; the grid "
                    f"is {S // P} × {S // P}")
    if n == S * S:
        raise Wrong(f"{n} is one token per pixel; with {P} × {P} patches "
                    f"divide by the patch area {P * P}")
    if n != n_ok:
        raise Wrong(f"{n} tokens is not right: count the patches of a "
                    f"{S} × {S} image cut into {P} × {P} squares")
    right = h * n_ok ** 2 * b
    if nbytes == right:
        return None
    if nbytes == n_ok ** 2 * b:
        raise Wrong("that is one head's matrix; every one of the 12 heads "
                    "holds its own")
    if nbytes == h * n_ok ** 2:
        raise Wrong("that counts entries, not bytes: a float32 takes 4 bytes")
    if nbytes == h * n_ok ** 2 * 8:
        raise Wrong("float32 takes 4 bytes per entry, not 8")
    if nbytes == h * n_ok ** 2 * 32:
        raise Wrong("that counts bits; divide by 8 for bytes")
    if nbytes == h * n_ok * b:
        raise Wrong("the score matrix is n × n, so the entries grow with "
                    "n², not n")
    raise Wrong(f"the token count is right but {nbytes:,} bytes is not: "
                f"heads × n² × bytes per entry")


check_count = Exercise(
    "ex-cost-count", kind="Derive", points=1,
    answers=("answer",), judge=_count_judge,
    success="576 tokens, and 12 float32 matrices of 576² entries take "
            "15,925,248 bytes (about 15.9 MB) per layer.",
    doc="Exercise 7.1: tokens and score bytes of a 384 × 384 ViT-B/16 "
        "input.")


# ------------------------------------------------------------------ 6.2
def _online_cases(rng):
    S = 3 * rng.standard_normal((4, 10))
    V = rng.standard_normal((10, 3))
    return [{"S": S, "V": V, "block": 10},          # one block
            {"S": S, "V": V, "block": 3},
            {"S": S + 1000.0, "V": V, "block": 4}]  # scores near 1000


def _fold(update, S, V, block):
    """Fold the student's update over the key blocks; the final state."""
    n_q = S.shape[0]
    m = np.full(n_q, -np.inf)
    l = np.zeros(n_q)
    acc = np.zeros((n_q, V.shape[1]))
    for k0 in range(0, S.shape[1], block):
        out = call(update, m.copy(), l.copy(), acc.copy(),
                   S[:, k0:k0 + block].copy(), V[k0:k0 + block].copy(),
                   what="my_online_update")
        m, l, acc = returned_arrays(out, 3, "my_online_update should return "
                                    "three arrays (m, l, acc)")
        if m.shape != (n_q,) or l.shape != (n_q,) or acc.shape != (
                n_q, V.shape[1]):
            raise Wrong(f"shapes should stay m {(n_q,)}, l {(n_q,)}, acc "
                        f"{(n_q, V.shape[1])}; got {m.shape}, {l.shape}, "
                        f"{acc.shape}")
    return m, l, acc


def _online_run(my_online_update, S, V, block):
    with np.errstate(all="ignore"):
        return _fold(my_online_update, S, V, block)


def _online_judge(out, S, V, block):
    m, l, acc = returned_arrays(out, 3, "my_online_update should return "
                                "three arrays (m, l, acc)")
    n_q, d_v = S.shape[0], V.shape[1]
    for arr, name, want in ((m, "m", (n_q,)), (l, "l", (n_q,)),
                            (acc, "acc", (n_q, d_v))):
        expect_shape(arr, name, want, "its starting shape")
    Y = acc / l[:, None]
    want = softmax(S) @ V
    if block >= S.shape[1]:                         # a single block
        if not np.all(np.isfinite(Y)):
            raise Wrong("the first block already gives NaN or inf. At the "
                        "start m = -inf, so the factor for the old sums must "
                        "be exp(m - m') (which is 0 there), not exp(m' - m)")
        if not np.allclose(m, S.max(axis=1)):
            raise Wrong("after one block, m should be each row's largest "
                        "score")
        if not np.allclose(Y, want):
            raise Wrong("with a single block, acc / l is not the softmax "
                        "average of the values: l = Σ exp(s - m), "
                        "acc = Σ exp(s - m) v")
        return None
    if S.min() > 500:                               # scores near 1000
        if not np.all(np.isfinite(Y)):
            raise Wrong("scores near 1000 give NaN or inf: subtract the new "
                        "running maximum before exp, exp(s - m')")
        if not np.allclose(Y, want):
            raise Wrong("scores near 1000 give a wrong average; subtract the "
                        "running maximum m' before exp")
        return None
    if not np.allclose(Y, want):
        # Diagnose the usual mistakes against what they would produce.
        if np.allclose(Y, _without_rescaling(S, V, block)):
            raise Wrong("one block works, several do not: when the maximum "
                        "grows from m to m', multiply the old l and acc by "
                        "exp(m - m') before adding the new block")
        if not np.allclose(m, S.max(axis=1)):
            raise Wrong("the running maximum is wrong: m' = max(m, max_j s_j)")
        raise Wrong(f"blocks of {block} keys give a different average than "
                    f"the softmax over all {S.shape[1]} keys")
    return None


def _without_rescaling(S, V, block):
    """What the update gives if it forgets to rescale the old sums."""
    n_q = S.shape[0]
    m, l = np.full(n_q, -np.inf), np.zeros(n_q)
    acc = np.zeros((n_q, V.shape[1]))
    for k0 in range(0, S.shape[1], block):
        s, v = S[:, k0:k0 + block], V[k0:k0 + block]
        m = np.maximum(m, s.max(axis=-1))
        P = np.exp(s - m[:, None])
        l, acc = l + P.sum(axis=-1), acc + P @ v
    return acc / l[:, None]


check_online_update = Exercise(
    "ex-cost-online", kind="Implement", points=1,
    answers=("my_online_update",), cases=_online_cases, run=_online_run,
    judge=_online_judge,
    references=("selfattention.blockwise.online_softmax_update",
                "selfattention.blockwise.blockwise_attention"), seed=62,
    success="folding the scores block by block gives exactly the softmax "
            "average, even for scores near 1000.",
    doc="Exercise 7.2: one step of the online softmax.")
