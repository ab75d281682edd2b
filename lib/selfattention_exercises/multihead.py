"""Exercises of :ref:`ch-multihead`, Multi-head attention."""

from __future__ import annotations

import numpy as np

from .core import Exercise, call

__all__ = ["check_grouped", "check_equivalent", "check_heads",
           "retrieval_task"]


# ------------------------------------------------------------------ 3.1
def _grouped_run(grouped_counts, d, h, g, n, m):
    return call(grouped_counts, d, h, g, n, m, what="grouped_counts")


check_grouped = Exercise(
    # Three counts, each checked (3); two written reasons (2).
    "ex-multihead-grouped", kind="Derive", points=3,
    answers=("grouped_counts",), run=_grouped_run,
    references=("selfattention.flops.count_flops",
                "torch.utils.flop_counter.FlopCounterMode",
                # profile(with_flops=True) counts the FLOPs as well
                "torch.profiler", "torch.autograd.profiler",
                "torch.nn.MultiheadAttention",
                "torch.nn.functional.scaled_dot_product_attention"),
    seed=31,
    written="which part of the cost does sharing leave unchanged, and why "
            "does h now appear in the counts?",
    written_points=2,
    success="the weights, the multiply-adds and the cached keys and values "
            "of a layer whose h query heads share g key and value heads.",
    doc="Exercise 3.1: weights, multiply-adds and cached numbers of a layer "
        "whose h query heads share g key and value heads.")


# ------------------------------------------------------------------ 3.2
def _equivalent_run(equivalent_weights, X, W_q, W_k, W_v, W_o, h, order, G):
    return call(equivalent_weights, W_q, W_k, W_v, W_o, h, order, G,
                what="equivalent_weights")


check_equivalent = Exercise(
    "ex-multihead-equivalent", kind="Prove", points=3,
    answers=("equivalent_weights",),
    run=_equivalent_run, seed=32,
    references=("selfattention.attention.multi_head_attention",
                "torch.nn.MultiheadAttention"),
    # The construction and its two compensations are checked (3); the
    # proof and its consequence are read (2).
    written="prove that the new layer has the same outputs, and say what "
            "this means for the count of 4d² parameters",
    written_points=2,
    success="the outputs are unchanged and the maps come out in the new "
            "order.",
    doc="Exercise 3.2: reorder the heads and change each head's basis "
        "without changing the layer.")


# ------------------------------------------------------------------ 3.3
def retrieval_task(rng, size: int, n: int = 8, k: int = 4):
    """Sequences for the two-key retrieval task of :ref:`ex-multihead-heads`.

    Each of ``size`` sequences has ``n`` tokens of width ``4 + k``: a
    one-hot colour (token 0 has colour 0; one token has colour 1, one has
    colour 2, at random places; the others colour 3) followed by a random
    payload of ``k`` standard normals. The target is the payload of the
    colour-1 token followed by that of the colour-2 token.

    Returns
    -------
    X : ndarray, shape (size, n, 4 + k)
    target : ndarray, shape (size, 2k)
    """
    places = np.argsort(rng.random((size, n - 1)), axis=1)[:, :2] + 1
    colours = np.full((size, n), 3)
    colours[:, 0] = 0
    rows = np.arange(size)
    colours[rows, places[:, 0]], colours[rows, places[:, 1]] = 1, 2
    payload = rng.standard_normal((size, n, k))
    X = np.concatenate([np.eye(4)[colours], payload], axis=-1)
    target = np.concatenate([payload[rows, places[:, 0]],
                             payload[rows, places[:, 1]]], axis=-1)
    return X, target


def _heads_run(retrieval_error, h, seed):
    return call(retrieval_error, h, seed, what="retrieval_error")


check_heads = Exercise(
    # Numbers a student could make up within the accepted ranges: the
    # points go to the written part, which the instructor reads.
    "ex-multihead-heads", kind="Experiment", points=0,
    answers=("retrieval_error",), run=_heads_run,
    seed=33,
    written="what did you measure for h = 1, 2, 4, 8, and why does one head "
            "fail where two succeed at the same width?", written_points=4,
    success="one head stays far from the target, several heads of the same "
            "total width reach it.",
    doc="Exercise 3.3: one attention layer of width 8 with h heads, trained "
        "to retrieve two payloads at once; the test error for each h.")
