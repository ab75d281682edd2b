"""Exercises of chapter 2, Scaling by √d_k."""

from __future__ import annotations

import math

import numpy as np

from ..attention import softmax
from ..scaling import jacobian_norm, softmax_jacobian
from .core import Exercise, Opaque, Wrong, call, returned_array, type_name

__all__ = ["check_scale_factor", "check_softmax_jacobian",
           "check_jacobian_norm"]


def _as_number(value, what: str) -> float:
    try:
        if isinstance(value, (str, Opaque)) or value is None:
            raise TypeError
        out = float(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise Wrong(f"{what} should return one number, got "
                    f"{type_name(value)}") from None
    if not math.isfinite(out):
        raise Wrong(f"{what} returned {out}; expected a finite number")
    return out


# ------------------------------------------------------------------ 2.1
def _scale_cases(rng):
    fixed = [(16, 1.0), (64, 2.0), (9, 0.5), (256, 3.0)]
    drawn = [(int(rng.integers(2, 1025)), float(rng.uniform(0.2, 4.0)))
             for _ in range(2)]
    return [{"d_k": d_k, "sigma": sigma} for d_k, sigma in fixed + drawn]


def _scale_run(my_scale, d_k, sigma):
    return call(my_scale, d_k, sigma, what="my_scale")


def _scale_judge(got, d_k, sigma):
    got = _as_number(got, "my_scale")
    want = 1 / (sigma ** 2 * math.sqrt(d_k))
    if math.isclose(got, want, rel_tol=1e-9):
        return None
    guesses = {
        1 / math.sqrt(d_k): "your factor ignores σ. Each product q_i k_i "
                            "has variance σ²·σ² = σ⁴, so the sum has "
                            "variance d_k σ⁴",
        1 / (sigma * math.sqrt(d_k)): "divide by σ², not σ: q_i k_i has "
                                      "variance σ⁴, so its standard "
                                      "deviation is σ²",
        1 / d_k: "you divided by the variance d_k; to get unit variance "
                 "divide by the standard deviation, √d_k (times σ²)",
        1 / (sigma ** 4 * d_k): "you divided by the variance d_k σ⁴; "
                                "divide by its square root, σ² √d_k",
        math.sqrt(d_k) * sigma ** 2: "this is the standard deviation "
                                     "itself; the factor is its inverse",
    }
    for value, message in guesses.items():
        if math.isclose(got, value, rel_tol=1e-9):
            raise Wrong(f"for d_k = {d_k}, σ = {sigma:.4g}: {message}")
    raise Wrong(f"for d_k = {d_k}, σ = {sigma:.4g} you return {got:.4g}; the "
                f"scores then have standard deviation "
                f"{got * sigma ** 2 * math.sqrt(d_k):.3g}, not 1")


check_scale_factor = Exercise(
    "ex-scaling-factor", kind="Derive", points=1,
    answers=("my_scale",), cases=_scale_cases, run=_scale_run,
    judge=_scale_judge, seed=21,
    success="c = 1 / (σ² √d_k) gives the scores unit variance for every "
            "d_k and σ.",
    doc="Exercise 2.1: the factor that gives q·k unit variance when the "
        "components of q and k have standard deviation σ.")


# ------------------------------------------------------------------ 2.2
def _jacobian_cases(rng):
    fixed = np.array([0.3, -1.2, 2.0, 0.5, -0.1])
    drawn = 2 * rng.standard_normal(int(rng.integers(3, 9)))
    return [{"p": softmax(fixed)}, {"p": softmax(drawn)}]


def _jacobian_run(my_softmax_jacobian, p):
    return call(my_softmax_jacobian, p, what="my_softmax_jacobian")


def _jacobian_judge(J, p):
    J = returned_array(J, "my_softmax_jacobian")
    n = p.size
    if J.shape != (n, n):
        raise Wrong(f"for p of shape {p.shape} you return shape {J.shape}; "
                    f"the Jacobian has one row per weight and one column per "
                    f"score: ({n}, {n})")
    ref = softmax_jacobian(p)
    if np.allclose(J, ref):
        return None
    if np.allclose(J, -ref):
        raise Wrong("the sign is flipped: the diagonal ∂p_i/∂s_i = "
                    "p_i(1 − p_i) is positive, so it is diag(p) − p pᵀ")
    if np.allclose(J, np.diag(p)):
        raise Wrong("only diag(p): raising s_j also lowers every other "
                    "weight, by p_i p_j; subtract the outer product p pᵀ")
    if np.allclose(J, np.diag(p * (1 - p))):
        raise Wrong("the diagonal is right but the off-diagonal entries "
                    "∂p_i/∂s_j = −p_i p_j are missing")
    if np.allclose(J, np.diag(p) - p ** 2) or np.allclose(
            J, np.diag(p) - np.diag(p ** 2)):
        raise Wrong("p * p is elementwise; the Jacobian needs the outer "
                    "product p pᵀ, np.outer(p, p)")
    if not np.allclose(J.sum(axis=1), 0) and np.allclose(J, J.T):
        raise Wrong("the rows should sum to zero: the weights always sum to "
                    "one, so their changes sum to zero")
    raise Wrong("the entries differ from ∂p_i/∂s_j; compare with "
                "(softmax(s + ε e_j) − softmax(s − ε e_j)) / 2ε")


check_softmax_jacobian = Exercise(
    "ex-scaling-jacobian", kind="Derive", points=1,
    answers=("my_softmax_jacobian",), cases=_jacobian_cases,
    run=_jacobian_run, judge=_jacobian_judge,
    references=("selfattention.scaling.softmax_jacobian",), seed=22,
    success="diag(p) − p pᵀ: symmetric, rows summing to zero, equal to "
            "the finite differences of the softmax.",
    doc="Exercise 2.2: the Jacobian of the softmax at weights p.")


# ------------------------------------------------------------------ 2.3
def _norm_cases(rng):
    return [{"P": softmax(3 * rng.standard_normal((4, 3, 6)))}]


def _norm_run(my_jacobian_norm, P):
    return call(my_jacobian_norm, P, what="my_jacobian_norm")


def _norm_judge(got, P):
    got = returned_array(got, "my_jacobian_norm")
    ref = jacobian_norm(P)
    if got.shape == () and P.ndim > 1:
        raise Wrong(f"you return one number for weights of shape {P.shape}; "
                    f"return one norm per row, shape {ref.shape} (average "
                    f"afterwards if you need to)")
    if got.shape != ref.shape:
        raise Wrong(f"for weights of shape {P.shape} you return shape "
                    f"{got.shape}; expected one norm per row, {ref.shape}")
    if np.allclose(got, ref):
        return None
    if np.allclose(got, ref ** 2):
        raise Wrong("these are the squared norms; take the square root")
    diag_only = np.sqrt((P ** 2 * (1 - P) ** 2).sum(-1))
    if np.allclose(got, diag_only):
        raise Wrong("only the diagonal entries p_i(1 − p_i) are counted; the "
                    "off-diagonal −p_i p_j add Σ_i≠j p_i² p_j²")
    raise Wrong("the norms differ from ‖diag(p) − p pᵀ‖_F; expand "
                "Σ_ij (p_i δ_ij − p_i p_j)² into sums of powers of p")


check_jacobian_norm = Exercise(
    "ex-scaling-norm", kind="Derive", points=1,
    answers=("my_jacobian_norm",), cases=_norm_cases, run=_norm_run,
    judge=_norm_judge,
    references=("selfattention.scaling.jacobian_norm",
                "selfattention.scaling.softmax_jacobian"), seed=23,
    success="the norm matches ‖diag(p) − p pᵀ‖_F for every row, without "
            "building the n × n matrices.",
    doc="Exercise 2.3: the Frobenius norm of each row's softmax Jacobian.")
