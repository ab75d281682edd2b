"""Exercises of :ref:`ch-scaling`, Scaling by √d_k."""

from __future__ import annotations



from .core import GRADIENTS, Exercise, call

__all__ = ["check_scale_factor", "check_jacobian_norm",
           "check_query_gradient", "check_saturation",
           "check_predict_max_weight"]


# ------------------------------------------------------------------ 2.1
def _scale_run(my_scale, d_k, sigma):
    return call(my_scale, d_k, sigma, what="my_scale")


check_scale_factor = Exercise(
    "ex-scaling-factor", kind="Derive", points=1,
    answers=("my_scale",), run=_scale_run,
    seed=21,
    success="c = 1 / (σ² √d_k) gives the scores unit variance for every "
            "d_k and σ.",
    doc="Exercise 2.1: the factor that gives q·k unit variance when the "
        "components of q and k have standard deviation σ.")


# ------------------------------------------------------------------ 2.2
def _norm_run(my_jacobian_norm, P):
    return call(my_jacobian_norm, P, what="my_jacobian_norm")


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
def _gradient_run(my_query_gradient, Q, K, V, G):
    return call(my_query_gradient, Q, K, V, G, what="my_query_gradient")


check_query_gradient = Exercise(
    "ex-scaling-gradient", kind="Derive", points=3,
    answers=("my_query_gradient",),
    run=_gradient_run, seed=23,
    references=GRADIENTS,
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
