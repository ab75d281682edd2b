"""Exercises of chapter 1, Definition."""

from __future__ import annotations

import numpy as np

from ..attention import attention, softmax
from ..example import running_example
from .core import (Exercise, Wrong, answered, call, expect_shape, int_pair,
                   returned_array, returned_arrays)

__all__ = ["check_softmax", "check_attention", "check_cross_attention",
           "cross_attention_pair"]


# ------------------------------------------------------------------ 1.1
def _softmax_cases(rng):
    shape = (2, 3, 5)
    big = (rng.integers(1, 4), rng.integers(3, 7))
    return [{"S": rng.standard_normal(shape)},
            {"S": 1000.0 + 3 * rng.standard_normal(big)}]


def _softmax_run(my_softmax, S):
    return call(my_softmax, S, what="my_softmax")


def _softmax_judge(P, S):
    P = returned_array(P, "my_softmax")
    if P.shape != S.shape:
        raise Wrong(f"my_softmax returned shape {P.shape} for scores of shape "
                    f"{S.shape}; the weights have the shape of the scores")
    if S.min() > 500:                              # scores of size 1000
        if not np.all(np.isfinite(P)):
            raise Wrong("scores of size 1000 give NaN: exp(1000) overflows. "
                        "Subtract each row's maximum first; the result is "
                        "unchanged")
        if not np.allclose(P, softmax(S)):
            raise Wrong("large scores give wrong weights; subtract the row "
                        "maximum (keepdims=True) before exp")
        return None
    if np.allclose(P.sum(axis=-2), 1) and not np.allclose(P.sum(axis=-1), 1):
        raise Wrong("the columns sum to one, not the rows: normalise over the "
                    "last axis (axis=-1), one distribution per query")
    if (P < 0).any():
        raise Wrong("some weights are negative; exp() never is")
    if not np.allclose(P.sum(axis=-1), 1):
        raise Wrong("the rows do not sum to one: divide each exponentiated "
                    "row by its own sum (keepdims=True helps broadcasting)")
    if not np.allclose(P, softmax(S)):
        raise Wrong("rows sum to one but the values differ from "
                    "exp(s_j) / sum_k exp(s_k)")
    return None


check_softmax = Exercise(
    "ex-definition-softmax", kind="Implement", points=1,
    answers=("my_softmax",), cases=_softmax_cases, run=_softmax_run,
    judge=_softmax_judge, references=("selfattention.attention.softmax",),
    seed=11,
    success="rows are non-negative, sum to one, match the reference and "
            "survive scores of size 1000.",
    doc="Exercise 1.1: a numerically stable softmax over the last axis.")


# ------------------------------------------------------------------ 1.2
def _attention_cases(rng):
    n_q, n_k, d_k, d_v = 3, 5, 4, 2          # all different: catches transposes
    return [{"Q": rng.standard_normal((n_q, d_k)),
             "K": rng.standard_normal((n_k, d_k)),
             "V": rng.standard_normal((n_k, d_v))}]


def _attention_run(my_attention, Q, K, V):
    return call(my_attention, Q, K, V, what="my_attention")


def _attention_judge(out, Q, K, V):
    Y, A = returned_arrays(out, 2, "my_attention should return a pair (Y, A): "
                           "outputs and weights", dtype=None)
    n_q, n_k, d_k, d_v = Q.shape[0], K.shape[0], K.shape[1], V.shape[1]
    expect_shape(A, "A", (n_q, n_k), "(n_q, n_k)",
                 "one row per query, one column per key")
    expect_shape(Y, "Y", (n_q, d_v), "(n_q, d_v)")
    Y_ref, A_ref = attention(Q, K, V)
    if np.allclose(A, softmax(Q @ K.T)):
        raise Wrong("the weights are softmax(Q Kᵀ): divide the scores by "
                    "√d_k before the softmax")
    if np.allclose(A, softmax(Q @ K.T / d_k)):
        raise Wrong("you divided by d_k; the scale is 1/√d_k")
    if not np.allclose(A.sum(axis=-1), 1):
        raise Wrong("the rows of A do not sum to one: apply the softmax "
                    "over keys (the last axis)")
    if not np.allclose(A, A_ref):
        raise Wrong("A differs from softmax(Q Kᵀ / √d_k)")
    if not np.allclose(Y, Y_ref):
        raise Wrong("A is right but Y is not: Y = A @ V")
    return None


check_attention = Exercise(
    "ex-definition-attention", kind="Implement", points=1,
    answers=("my_attention",), cases=_attention_cases, run=_attention_run,
    judge=_attention_judge,
    references=("selfattention.attention.attention",
                "selfattention.attention.multi_head_attention"),
    seed=12,
    success="shapes, scaling by √d_k and the weighted sum of values are "
            "right.",
    doc="Exercise 1.2: scaled dot-product attention returning (Y, A).")


# ------------------------------------------------------------------ 1.3
def cross_attention_pair():
    """The two images of exercise 1.3 and the tied projections.

    Returns ``(img1, img2, W_q, W_k, W_v)``: the running example's image and
    the same image rolled cyclically by one patch down and one patch right.
    """
    ex = running_example()
    img2 = np.roll(ex.img, shift=(ex.patch, ex.patch), axis=(0, 1))
    return ex.img, img2, ex.W_q, ex.W_k, ex.W_v


def _cross_judge(answer):
    from ..patches import center, patchify

    answered(answer, "a pair (row, col)")
    if isinstance(answer, int) and not isinstance(answer, bool):
        raise Wrong(f"{answer} is a token index; give the patch as (row, col), "
                    f"e.g. divmod(index, 8)")
    r, c = int_pair(answer, "answer should be a pair (row, col)")
    img1, img2, W_q, W_k, W_v = cross_attention_pair()
    X1, X2 = center(patchify(img1, 4)), center(patchify(img2, 4))
    _, A = attention(X1 @ W_q, X2 @ W_k, X2 @ W_v)
    best = divmod(int(np.argmax(A[1])), 8)
    _, A_self = attention(X1 @ W_q, X1 @ W_k, X1 @ W_v)
    if (r, c) == best:
        return None
    if (r, c) == divmod(int(np.argmax(A_self[1])), 8):
        raise Wrong(f"{(r, c)} is where the query looks in its own image "
                    f"(self-attention); take the keys and values from image 2")
    weight = (f"gets weight {A[1, r * 8 + c]:.3f}"
              if 0 <= r < 8 and 0 <= c < 8 else "is not on the 8 × 8 grid")
    raise Wrong(f"patch {(r, c)} {weight}; another patch of image 2 gets "
                f"more. Use queries from image 1 and keys from image 2, then "
                f"take the argmax of row 1")


check_cross_attention = Exercise(
    "ex-definition-cross", kind="Predict", points=1,
    answers=("answer",), judge=_cross_judge,
    success="the query finds the top edges of the moved squares.",
    doc="Exercise 1.3: the patch of image 2 that patch (0, 1) of image 1 "
        "attends to most.")
