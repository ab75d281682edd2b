"""Exercises of chapter 9, Non-local blocks."""

from __future__ import annotations

import numpy as np

from ..attention import softmax
from ..nonlocal_block import scope_mask
from .core import (Exercise, Opaque, Wrong, answered, call, expect_shape,
                   returned_arrays, type_name)

__all__ = ["check_dot_product", "check_time_mask", "check_gate"]


# ------------------------------------------------------------------ 8.1
def _dot_cases(rng):
    N, C, d_k, d_v = 6, 5, 3, 2            # all different: no transpose hides
    x = rng.standard_normal((N, C))
    W_theta, W_phi = rng.standard_normal((2, C, d_k))
    W_g = rng.standard_normal((C, d_v))
    return [{"x": x, "W_theta": W_theta, "W_phi": W_phi, "W_g": W_g}]


def _dot_run(my_dot_product, x, W_theta, W_phi, W_g):
    return call(my_dot_product, x, W_theta, W_phi, W_g,
                what="my_dot_product")


def _dot_judge(out, x, W_theta, W_phi, W_g):
    Y, F = returned_arrays(out, 2, "my_dot_product should return a pair "
                           "(Y, F): responses and pairwise weights")
    N, d_k, d_v = x.shape[0], W_theta.shape[1], W_g.shape[1]
    expect_shape(F, "F", (N, N), "(N, N)", "one weight per pair of positions")
    expect_shape(Y, "Y", (N, d_v), "(N, d_v)")
    S = (x @ W_theta) @ (x @ W_phi).T
    if np.allclose(F, softmax(S)) or np.allclose(F, softmax(S / np.sqrt(d_k))):
        raise Wrong("F is a softmax of the scores: that is the embedded "
                    "Gaussian form. The dot-product form uses f = θ·φ itself")
    if np.allclose(F, S):
        raise Wrong("F is the raw scores θ·φ: divide them by C(x) = N, the "
                    "number of positions")
    if np.allclose(F, S / np.sqrt(d_k)) or np.allclose(F, S / d_k):
        raise Wrong("you divided by d_k or √d_k; the dot-product form "
                    "divides by N, the number of positions")
    if np.allclose(F, S / S.sum(axis=1, keepdims=True)):
        raise Wrong("you divided each row by its sum of scores; the "
                    "dot-product form divides by N, so rows need not sum to 1")
    if np.allclose(F, S.T / N):
        raise Wrong("F is transposed: row i holds θ_i · φ_j for every j")
    if not np.allclose(F, S / N):
        raise Wrong("F differs from (x W_θ)(x W_φ)ᵀ / N")
    if not np.allclose(Y, F @ (x @ W_g)):
        raise Wrong("F is right but Y is not: Y = F @ (x W_g)")
    return None


check_dot_product = Exercise(
    "ex-nonlocal-dotproduct", kind="Implement", points=1,
    answers=("my_dot_product",), cases=_dot_cases, run=_dot_run,
    judge=_dot_judge,
    references=("selfattention.nonlocal_block.nonlocal_op",), seed=81,
    success="scores θ·φ divided by the number of positions N, then "
            "applied to g: the non-local operation without a softmax.",
    doc="Exercise 9.1: the dot-product form, returning ``(Y, F)``.")


# ------------------------------------------------------------------ 8.2
def _time_cases(rng):
    drawn = tuple(int(v) for v in rng.integers(2, 5, size=3))
    return [{"T": T, "H": H, "W": W} for T, H, W in [(3, 2, 4), drawn]]


def _time_run(my_time_mask, T, H, W):
    return call(my_time_mask, T, H, W, what="my_time_mask")


def _time_judge(M, T, H, W):
    if isinstance(M, (str, Opaque)) or M is None:
        raise Wrong(f"my_time_mask should return an array, got "
                    f"{type_name(M)}")
    M = np.asarray(M)
    N = T * H * W
    if M.shape != (N, N):
        raise Wrong(f"the mask has shape {M.shape}, expected (N, N) with "
                    f"N = T·H·W = {N}")
    if M.dtype != bool:
        raise Wrong(f"the mask has dtype {M.dtype}; make it boolean "
                    f"(True = may attend), e.g. with ==")
    ref = scope_mask(T, H, W, "time")
    if np.array_equal(M, scope_mask(T, H, W, "space")):
        raise Wrong("this is the space-only mask (same frame); time-only "
                    "links the same (h, w) across frames")
    if np.array_equal(M, np.eye(N, dtype=bool)):
        raise Wrong("each position sees only itself; it should also see its "
                    "place in the other frames")
    if np.array_equal(M, ~ref):
        raise Wrong("True and False are swapped: True = may attend")
    if not np.array_equal(M, ref):
        counts = sorted(set(M.sum(axis=1).tolist()))
        if counts == [T]:
            raise Wrong("every row has T Trues, but in the wrong places: "
                        "position i is frame i // (H·W), place i % (H·W)")
        raise Wrong(f"rows hold {counts} Trues; a time-only query sees "
                    f"exactly T = {T} keys, its own place in every frame")
    return None


check_time_mask = Exercise(
    "ex-nonlocal-time", kind="Implement", points=1,
    answers=("my_time_mask",), cases=_time_cases, run=_time_run,
    judge=_time_judge,
    references=("selfattention.nonlocal_block.scope_mask",), seed=82,
    success="each position sees the same place in every frame: T keys "
            "per query.",
    doc="Exercise 9.2: the time-only mask of a (T, H, W) feature map.")


# ------------------------------------------------------------------ 8.3
def _gate_run(answer):
    """A set of names crosses to the grader as a sorted list of strings."""
    if isinstance(answer, (set, frozenset)):
        return sorted(str(a) for a in answer)
    return answer


def _gate_judge(answer):
    answered(answer, "a set of parameter names")
    if isinstance(answer, str):
        answer = [answer]
    if not isinstance(answer, (list, tuple)) or not all(
            isinstance(a, str) for a in answer):
        raise Wrong(f"answer should be a set of names such as "
                    f"{{'phi.weight'}}, got {type_name(answer)}")
    names = set(answer)
    others = {"theta.weight", "phi.weight", "g.weight", "out.weight"}
    if names == {"gamma"}:
        return None
    if not names:
        raise Wrong("the empty set: but the loss does depend on gamma, so its "
                    "gradient is not zero")
    if names >= others:
        raise Wrong("you listed the embeddings too; print p.grad for each: "
                    "they are multiplied by gamma = 0, so they are exactly 0")
    if "gamma" not in names:
        raise Wrong("gamma is missing: it is the one parameter the output "
                    "depends on at initialisation")
    raise Wrong(f"{sorted(names - {'gamma'})} get a zero gradient at "
                f"initialisation; compare p.grad with 0 for every parameter")


check_gate = Exercise(
    "ex-nonlocal-gate", kind="Predict", points=1,
    answers=("answer",), run=_gate_run, judge=_gate_judge,
    success="only gamma: every other gradient is multiplied by gamma = 0.",
    doc="Exercise 9.3: the parameters with a non-zero gradient at step 0.")
