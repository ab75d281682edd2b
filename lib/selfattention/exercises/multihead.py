"""Exercises of :ref:`ch-multihead`, Multi-head attention."""

from __future__ import annotations

import numpy as np

from .core import Exercise, call

__all__ = ["check_counts", "check_equivalent", "check_heads", "mha_counts",
           "retrieval_task"]


# ------------------------------------------------------------------ 3.1
def mha_counts(d: int, d_c: int, h: int, n: int, m: int) -> tuple[int, int]:
    """Parameters and multiply-adds of a bias-free multi-head layer.

    ``n`` queries of width ``d`` attend, in ``h`` heads of width ``d/h``, to
    ``m`` context tokens of width ``d_c`` (``nn.MultiheadAttention(d, h,
    kdim=d_c, vdim=d_c, bias=False)``; :ref:`ch-multihead`). ``h`` does not
    appear.

    Returns
    -------
    parameters, macs : int
        ``2d² + 2d·d_c`` weights; ``2nd² + 2m·d_c·d + 2nmd`` multiply-adds
        (four projections, ``Q Kᵀ`` and ``A V``).
    """
    return (2 * d * d + 2 * d * d_c,
            2 * n * d * d + 2 * m * d_c * d + 2 * n * m * d)


def _counts_run(my_counts, d, d_c, h, n, m):
    return call(my_counts, d, d_c, h, n, m, what="my_counts")


check_counts = Exercise(
    "ex-multihead-counts", kind="Derive", points=2,
    answers=("my_counts",), run=_counts_run,
    references=("selfattention.exercises.multihead.mha_counts",
                "selfattention.flops.count_flops",
                "torch.utils.flop_counter.FlopCounterMode",
                "torch.nn.MultiheadAttention"), seed=31,
    written="why does the number of heads h appear in neither count?",
    success="2d² + 2d·d_c weights and 2nd² + 2m·d_c·d + 2nmd multiply-adds, "
            "whatever h is.",
    doc="Exercise 3.1: parameters and multiply-adds of a multi-head layer "
        "as functions of (d, d_c, h, n, m).")


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
    written="prove that the new layer has the same outputs, and say what "
            "this means for the count of 4d² parameters",
    success="the outputs are unchanged and the maps come out in the new "
            "order: heads are unordered, and only W_Q⁽ⁱ⁾W_K⁽ⁱ⁾ᵀ and "
            "W_V⁽ⁱ⁾W_O⁽ⁱ⁾ matter.",
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
