"""Exercises of :ref:`ch-position`, Position and equivariance."""

from __future__ import annotations

import numpy as np

from ..attention import attention
from .core import Exercise, call

__all__ = ["check_sinusoidal", "check_unshuffle", "check_bias",
           "check_positions", "unshuffle_case"]


# ------------------------------------------------------------------ 5.1
def _sinusoidal_run(my_sinusoidal, n, d):
    return call(my_sinusoidal, n, d, what="my_sinusoidal")


check_sinusoidal = Exercise(
    "ex-position-sinusoidal", kind="Implement", points=1,
    answers=("my_sinusoidal",),
    run=_sinusoidal_run,
    references=("selfattention.position.sinusoidal_1d",
                "selfattention.position.sinusoidal_2d"), seed=51,
    success="sin in the even columns, cos in the odd ones, wavelengths "
            "growing as 10000^(2i/d).",
    doc="Exercise 5.1: the sinusoidal encoding of positions 0 … n-1.")


# ------------------------------------------------------------------ 5.2
def _unshuffle_arrays(rng, n: int = 12, d: int = 6):
    X = rng.standard_normal((n, d))
    W_q, W_k, W_v = (rng.standard_normal((d, d)) / np.sqrt(d)
                     for _ in range(3))
    perm = rng.permutation(n)

    def f(X):
        return attention(X @ W_q, X @ W_k, X @ W_v)   # outputs, weights

    return X, perm, f


def unshuffle_case():
    """The arrays of :ref:`ex-position-unshuffle`: ``(X, perm, f)``.

    ``X`` holds 12 random tokens of width 6, ``perm`` a permutation of them
    and ``f`` a self-attention layer with fixed random weights, returning
    its outputs (n, d) and its weights (n, n).
    """
    return _unshuffle_arrays(np.random.default_rng(52))


def _unshuffle_run(unshuffle, Y_shuffled, A_shuffled, perm):
    return call(unshuffle, Y_shuffled, A_shuffled, perm, what="unshuffle")


check_unshuffle = Exercise(
    "ex-position-unshuffle", kind="Prove", points=2,
    answers=("unshuffle",), run=_unshuffle_run,
    seed=52,
    written="prove f(PX) = P f(X) and A(PX) = P A(X) Pᵀ for one head",
    written_points=2,
    success="the outputs and the weights of the shuffled tokens, put back "
            "in place, are exactly those of f(X).",
    doc="Exercise 5.2: recover f(X) and its weights from f(X[perm]).")


# ------------------------------------------------------------------ 5.3
def _bias_run(my_bias, table, rows, cols):
    return call(my_bias, table, rows, cols, what="my_bias")


check_bias = Exercise(
    "ex-position-bias", kind="Implement", points=2,
    answers=("my_bias",), run=_bias_run,
    references=("selfattention.position.relative_offsets",
                "selfattention.position.relative_position_bias",
                "selfattention.position.relative_position_index"), seed=53,
    success="every pair of patches reads the table entry of its own "
            "offset.",
    doc="Exercise 5.3: expand a table of per-offset biases into B.")


# ------------------------------------------------------------------ 5.4
def _positions_run(position_experiment, kind, seed):
    return call(position_experiment, kind, seed, what="position_experiment")


check_positions = Exercise(
    # A model trained at home for every possible case (30) answers a
    # replay, and one per drawn seed costs a training run per student: the
    # points go to the written part, which the instructor reads.
    "ex-position-experiment", kind="Experiment", points=0,
    answers=("position_experiment",),
    run=_positions_run, seed=150,
    written="how do learned and sinusoidal positions compare, and what "
            "does that say about ViT's Table 8?",
    written_points=5,
    success="the tiny ViT trained with learned, sinusoidal or no positions,"
            " measured on intact and shuffled digits.",
    doc="Exercise 5.4: learned against sinusoidal 2-D positions.")
