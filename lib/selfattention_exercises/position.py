"""Exercises of :ref:`ch-position`, Position and equivariance."""

from __future__ import annotations

from .core import Exercise, call

__all__ = ["check_shift", "check_bias_gradient", "check_bias_equivariance",
           "check_positions"]


# ------------------------------------------------------------------ 5.1
def _shift_run(shift_matrix, d, k, base):
    return call(shift_matrix, d, k, base, what="shift_matrix")


check_shift = Exercise(
    "ex-position-shift", kind="Derive", points=2,
    answers=("shift_matrix",),
    run=_shift_run,
    references=("selfattention.position.sinusoidal_1d",
                "selfattention.position.sinusoidal_2d",
                # a least-squares fit of codes at t and t + k measures M
                "numpy.linalg", "scipy.linalg", "torch.linalg"), seed=51,
    success="M turns every column pair by k times its frequency: M E_t = "
            "E_(t+k) for every t, whatever the width, the offset and the "
            "base.",
    doc="Exercise 5.1: the matrix that moves a sinusoidal code by k "
        "positions.")


# ------------------------------------------------------------------ 5.2
def _bias_gradient_run(bias_gradient, G, rows, cols):
    return call(bias_gradient, G, rows, cols, what="bias_gradient")


check_bias_gradient = Exercise(
    # The gradient is checked (1: with relative_position_index, which
    # chapter 8 prints, it is one scatter-add); the count and the
    # consequence are read (2).
    "ex-position-bias-gradient", kind="Derive", points=1,
    answers=("bias_gradient",), run=_bias_gradient_run,
    references=("selfattention.position.relative_offsets",
                "selfattention.position.relative_position_bias",
                "selfattention.position.relative_position_index",
                # automatic differentiation measures the gradient
                "torch.autograd.grad", "torch.autograd.backward",
                "torch.Tensor.backward", "torch.func.grad",
                "torch.func.vjp"), seed=53,
    written="How many pairs of patches share each offset of an M × M "
            "window, which entries of its table does the gradient of the "
            "fewest pairs reach, and what does that mean for how each "
            "entry learns?",
    written_points=2,
    success="every table entry collects the gradient of every pair of "
            "patches at its offset, and nothing else.",
    doc="Exercise 5.2: the gradient that reaches a table of per-offset "
        "biases through B.")


# ------------------------------------------------------------------ 5.3
def _equivariance_run(still_equivariant, table, rows, cols, perm):
    return call(still_equivariant, table, rows, cols, perm,
                what="still_equivariant")


check_bias_equivariance = Exercise(
    "ex-position-bias-equivariance", kind="Prove", points=2,
    answers=("still_equivariant",), run=_equivariance_run,
    references=("selfattention.attention.attention",
                "selfattention.attention.multi_head_attention",
                "selfattention.attention.softmax",
                "scipy.special.softmax", "torch.softmax",
                "torch.nn.functional.softmax", "torch.Tensor.softmax",
                "torch.nn.functional.scaled_dot_product_attention",
                "torch.nn.MultiheadAttention"), seed=52,
    written="prove your rule, sufficient and necessary; which shuffles "
            "does a table without symmetry allow, and why not a cyclic "
            "shift?",
    written_points=2,
    success="a shuffle keeps the layer equivariant exactly when every pair"
            " of tokens lands at an offset with the same table entry: "
            "PᵀBP = B.",
    doc="Exercise 5.3: which shuffles of the patches a relative position "
        "bias lets through.")


# ------------------------------------------------------------------ 5.4
def _positions_run(position_experiment, kind, seed):
    return call(position_experiment, kind, seed, what="position_experiment")


check_positions = Exercise(
    # A model trained at home for every possible case (30) answers a
    # replay, and one per drawn seed costs a training run per student: the
    # points go to the written part, which the instructor reads (the
    # sinusoidal inputs, the reading, Table 8; two of the three pairs of
    # accuracies are printed in the chapter).
    "ex-position-experiment", kind="Experiment", points=0,
    answers=("position_experiment",),
    run=_positions_run, seed=150,
    written="how do learned and sinusoidal positions compare, and what "
            "does that say about ViT's Table 8?",
    written_points=3,
    success="the tiny ViT trained with learned, sinusoidal or no positions,"
            " measured on intact and shuffled digits.",
    doc="Exercise 5.4: learned against sinusoidal 2-D positions.")
