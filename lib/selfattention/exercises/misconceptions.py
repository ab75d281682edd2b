"""Checks for the exercises of chapter 10, Misconceptions."""

from __future__ import annotations

import numpy as np

from ..attention import softmax
from .core import Wrong, answered, call, check, returned_array

__all__ = ["check_masked_softmax", "same_output_values", "check_same_output"]


@check("ex-misconceptions-mask", points=1.0,
       success="masked keys get exactly zero weight and every row still sums "
               "to one.")
def check_masked_softmax(masked_softmax):
    """Exercise 10.1: attention weights that respect a boolean mask."""
    rng = np.random.default_rng(101)
    S = 2.0 * rng.standard_normal((5, 7))
    mask = rng.random((5, 7)) < 0.5
    mask[np.arange(5), rng.integers(0, 7, 5)] = True     # no empty row
    out = call(masked_softmax, S.copy(), mask.copy(), what="masked_softmax")
    A = returned_array(out, "masked_softmax", "an array of weights")
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


def same_output_values() -> np.ndarray:
    """The five value vectors of exercise 10.2, shape (5, 2)."""
    return np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0],
                     [0.5, 0.5]])


def _weights(w, name):
    answered(w, "five weights", name)
    try:
        w = np.asarray(w, dtype=float)
    except (TypeError, ValueError):
        raise Wrong(f"{name} should be five numbers, got {w!r}") from None
    if w.shape != (5,):
        raise Wrong(f"{name} should hold one weight per value, shape (5,), "
                    f"got shape {w.shape}")
    if (w < -1e-12).any():
        raise Wrong(f"{name} has a negative weight; a softmax never gives one")
    if not np.isclose(w.sum(), 1):
        raise Wrong(f"the weights of {name} sum to {w.sum():.3g}; attention "
                    f"weights sum to one")
    return w


@check("ex-misconceptions-same-output", points=1.0,
       success="two attention rows with no key in common give the same "
               "output.")
def check_same_output(a, b):
    """Exercise 10.2: two disjoint attention rows with the same output."""
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
