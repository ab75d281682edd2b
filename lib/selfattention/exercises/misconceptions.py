"""Exercises of chapter 11, Misconceptions."""

from __future__ import annotations

import numpy as np

from ..attention import softmax
from .core import (Exercise, Opaque, Wrong, answered, call, returned_array,
                   type_name)

__all__ = ["check_masked_softmax", "same_output_values", "check_same_output"]


# ------------------------------------------------------------------ 10.1
def _mask_cases(rng):
    S = 2.0 * rng.standard_normal((5, 7))
    mask = rng.random((5, 7)) < 0.5
    mask[np.arange(5), rng.integers(0, 7, 5)] = True     # no empty row
    return [{"S": S, "mask": mask}]


def _mask_run(masked_softmax, S, mask):
    return call(masked_softmax, S, mask, what="masked_softmax")


def _mask_judge(A, S, mask):
    A = returned_array(A, "masked_softmax", "an array of weights")
    if A.shape != S.shape:
        raise Wrong(f"masked_softmax returned shape {A.shape}; the weights "
                    f"have the shape of the scores, {S.shape}")
    if not np.all(np.isfinite(A)):
        raise Wrong("some weights are NaN or infinite; exp(-inf) = 0 is "
                    "fine, but check for -inf - (-inf) or 0/0")
    ref = softmax(np.where(mask, S, -np.inf))
    if np.allclose(A, ref):
        return None
    if np.allclose(A, softmax(np.where(~mask, S, -np.inf))):
        raise Wrong("you masked the wrong keys: in this book True means "
                    "'this query may use this key'")
    sums = A.sum(axis=-1)
    if np.allclose(A, softmax(S) * mask):
        raise Wrong(f"the rows sum to {np.round(sums, 2).tolist()}, not one: "
                    f"zeroing weights after the softmax leaves the rest "
                    f"unnormalised. Set masked scores to -inf before it")
    if np.abs(A[~mask]).max() > 1e-12:
        raise Wrong("keys the mask forbids still get weight; a score of 0 is "
                    "not forbidden (exp(0) = 1): use -inf")
    if not np.allclose(sums, 1):
        raise Wrong(f"the rows sum to {np.round(sums, 2).tolist()}, not one")
    raise Wrong("masked keys get zero weight and rows sum to one, but the "
                "weights differ from softmax over the allowed scores")


check_masked_softmax = Exercise(
    "ex-misconceptions-mask", kind="Implement", points=1,
    answers=("masked_softmax",), cases=_mask_cases, run=_mask_run,
    judge=_mask_judge,
    references=("selfattention.attention.attention",), seed=101,
    success="masked keys get exactly zero weight and every row still sums "
            "to one.",
    doc="Exercise 11.1: attention weights that respect a boolean mask.")


# ------------------------------------------------------------------ 10.2
def same_output_values() -> np.ndarray:
    """The five value vectors of exercise 10.2, shape (5, 2)."""
    return np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0],
                     [0.5, 0.5]])


def _weights(w, name):
    answered(w, "five weights", name)
    try:
        if isinstance(w, (str, Opaque)):
            raise TypeError
        w = np.asarray(w, dtype=float)
    except (TypeError, ValueError):
        raise Wrong(f"{name} should be five numbers, got "
                    f"{type_name(w)}") from None
    if w.shape != (5,):
        raise Wrong(f"{name} should hold one weight per value, shape (5,), "
                    f"got shape {w.shape}")
    if (w < -1e-12).any():
        raise Wrong(f"{name} has a negative weight; a softmax never gives one")
    if not np.isclose(w.sum(), 1):
        raise Wrong(f"the weights of {name} sum to {w.sum():.3g}; attention "
                    f"weights sum to one")
    return w


def _same_output_judge(pair):
    a, b = pair
    a, b = _weights(a, "a"), _weights(b, "b")
    V = same_output_values()
    ya, yb = a @ V, b @ V
    if not np.allclose(ya, yb):
        raise Wrong(f"a @ V = {np.round(ya, 3).tolist()} but b @ V = "
                    f"{np.round(yb, 3).tolist()}; the outputs must be equal")
    shared = np.flatnonzero((a > 1e-12) & (b > 1e-12))
    if len(shared):
        raise Wrong(f"a and b both give weight to key(s) "
                    f"{shared.tolist()}; find two rows with no key in common")
    return None


check_same_output = Exercise(
    "ex-misconceptions-same-output", kind="Prove", points=1,
    answers=("a", "b"), judge=_same_output_judge,
    success="two attention rows with no key in common give the same "
            "output.",
    doc="Exercise 11.2: two disjoint attention rows with the same output.")
