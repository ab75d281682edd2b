"""Exercises of :ref:`ch-scaling`, Scaling by √d_k."""

from __future__ import annotations

import numpy as np

from .core import GRADIENTS, Exercise, Wrong, call

__all__ = ["check_scales", "check_jacobian_norm",
           "check_query_gradient", "check_saturation",
           "check_predict_max_weight"]


# ------------------------------------------------------------------ 2.1
def _scales_run(my_scales, d_k, sigma, mu):
    return call(my_scales, d_k, sigma, mu, what="my_scales")


check_scales = Exercise(
    "ex-scaling-mean", kind="Derive", points=2,
    answers=("my_scales",), run=_scales_run,
    seed=21,
    written="which of the two factors should attention divide by, and why "
            "does the softmax not see the rest of the variance?",
    written_points=1,
    success="c_all = 1 / √(d_k σ² (σ² + 2μ²)) and c_row = "
            "1 / √(d_k σ² (σ² + μ²)): the scores of all queries together "
            "also spread by their row means μ Σ q_i, one query's scores "
            "do not.",
    doc="Exercise 2.1: the factors that give q·k unit variance, over all "
        "pairs and within one query's row, when the components have mean "
        "μ and standard deviation σ.")


# ------------------------------------------------------------------ 2.2
#: The keys of the wide row of 2.2: its Jacobian would take n² · 8 bytes,
#: 162 TB, more than a process can address (so building it fails at
#: once, on any machine), and even a sum over blocks of it takes 2 · 10¹³
#: products; the closed form takes a few passes over 36 MB.
WIDE_ROW = 4_500_000


def wide_row(n, seed):
    """The weights of one row of ``n`` keys, drawn from ``seed``: mostly
    small, with a few large ones (a case of 2.2, built where it is used so
    that it never travels)."""
    rng = np.random.default_rng(seed)
    w = rng.random(n)
    w[rng.integers(0, n, 3)] = n / 4.0                  # three strong keys
    return (w / w.sum())[None, :]                        # (1, n)


def _norm_run(my_jacobian_norm, P=None, n=None, seed=None):
    if P is None:
        P = wide_row(n, seed)
    try:
        return call(my_jacobian_norm, P, what="my_jacobian_norm")
    except Wrong as err:
        if err.code != "out-of-memory" or P.shape[-1] < WIDE_ROW:
            raise
        raise Wrong(f"my_jacobian_norm ran out of memory on a row of "
                    f"{P.shape[-1]:,} weights: its n × n Jacobian would "
                    f"take {8 * P.shape[-1] ** 2 / 1e12:.0f} TB. Build no "
                    f"n × n matrix: the closed form needs only sums of "
                    f"powers of the p_i", "builds-the-jacobian") from None


check_jacobian_norm = Exercise(
    "ex-scaling-norm", kind="Derive", points=2,
    answers=("my_jacobian_norm",), run=_norm_run,
    references=("selfattention.scaling.jacobian_norm",
                "selfattention.scaling.softmax_jacobian",
                *GRADIENTS), seed=22,
    success="the norm matches ‖diag(p) − p pᵀ‖_F for every row, one-hot "
            "and uniform rows included, without building n × n matrices.",
    doc="Exercise 2.2: the Frobenius norm of each row's softmax Jacobian, "
        "in closed form.")


# ------------------------------------------------------------------ 2.3
#: The sizes (n_q, n_k, d_k, d_v) of 2.3's wide case: the chain rule costs
#: a few products of these matrices, a fraction of a second; differences
#: of the loss need a pass per component of a query (2 · d_k = 8192
#: central ones, even perturbing one component of every query at once),
#: each costing as much as the answer.
WIDE_GRADIENT = (32, 2048, 4096, 4096)


def wide_gradient_case(seed, n_q, n_k, d_k, d_v):
    """``Q, K, V, G`` of 2.3's wide case, drawn from ``seed`` (built where
    it is used, so that it never travels): entries of variance 1."""
    rng = np.random.default_rng(seed)
    return tuple(np.sqrt(12.0) * (rng.random(shape) - 0.5)
                 for shape in ((n_q, d_k), (n_k, d_k), (n_k, d_v),
                               (n_q, d_v)))


def _gradient_run(my_query_gradient, Q=None, K=None, V=None, G=None,
                  seed=None, sizes=None):
    if Q is None:
        Q, K, V, G = wide_gradient_case(seed, *sizes)
    return call(my_query_gradient, Q, K, V, G, what="my_query_gradient")


check_query_gradient = Exercise(
    "ex-scaling-gradient", kind="Derive", points=2,
    answers=("my_query_gradient",),
    run=_gradient_run, seed=23,
    references=GRADIENTS,
    written="how does the gradient that reaches the queries change when "
            "the queries are multiplied by 8, and why?",
    written_points=1,
    success="the chain rule through the values, the softmax and the scaled "
            "scores gives ∂L/∂Q for soft and saturated rows alike.",
    doc="Exercise 2.3: the gradient that reaches the queries, through the "
        "softmax.")


# ------------------------------------------------------------------ 2.4
def _saturation_run(saturation, d_ks, n, seed):
    return tuple(call(saturation, list(d_ks), n, s, what="saturation")
                 for s in (seed, seed, seed + 1))


check_saturation = Exercise(
    # Numbers a student could make up: the points go to the written
    # part, which the instructor reads.
    "ex-scaling-saturation", kind="Experiment", points=0,
    answers=("saturation",), run=_saturation_run,
    references=("selfattention.scaling.scaling_experiment",), seed=24,
    written="Which data did you choose, what do the two columns show, and "
            "does the raw column approach 1 as d_k grows? Why?",
    written_points=4,
    success="raw rows sharpen as d_k grows, scaled rows stay put, and the "
            "experiment follows its seed.",
    doc="Exercise 2.4: saturation against d_k, raw and scaled, on data the "
        "student chooses.")


# ------------------------------------------------------------------ 2.5
def _predict_run(prediction, max_weight_at, d_k, seed):
    return prediction, call(max_weight_at, d_k, seed, what="max_weight_at")


check_predict_max_weight = Exercise(
    # A prediction that cannot be shown to come before the measurement
    # (the notebook's own check confirms a guess in a few tries): the
    # points go to the written part, which the instructor reads.
    "ex-scaling-predict", kind="Predict", points=0,
    answers=("prediction", "max_weight_at"),
    run=_predict_run,
    references=("selfattention.scaling.scaling_experiment",), seed=25,
    written="How close was your prediction, and why does the largest "
            "weight approach 1 so slowly on the digits?",
    written_points=3,
    success="a committed prediction, and a measurement that agrees with "
            "the digits experiment at this width.",
    doc="Exercise 2.5: predict, then measure, the largest raw weight of "
        "the digits experiment at d_k = 4096.")
