"""Exercises of :ref:`ch-cost`, Cost."""

from __future__ import annotations

import numpy as np

from .core import Exercise, call, expect_shape, returned_arrays

__all__ = ["check_merge", "check_conv_depth", "check_block_memory"]


# ------------------------------------------------------------------ 7.1
def _state(S, V, allowed):
    """(m, l, acc) of the softmax over one part of the keys."""
    s = np.where(allowed, S, -np.inf)
    m = s.max(axis=-1)
    shift = np.where(np.isneginf(m), 0.0, m)
    p = np.exp(s - shift[:, None])                 # 0 where masked
    return m, p.sum(axis=-1), p @ V


def _merge_run(my_merge, S, V, allowed, parts, order):
    states = [_state(S[:, a:b], V[a:b], allowed[:, a:b]) for a, b in parts]
    n_q, d_v = S.shape[0], V.shape[1]
    for i, j in order:
        out = call(my_merge, *(x.copy() for x in states[i] + states[j]),
                   what="my_merge")
        merged = returned_arrays(out, 3, "my_merge should return three "
                                 "arrays (m, l, acc)")
        for arr, name, want in zip(merged, "m l acc".split(),
                                   [(n_q,), (n_q,), (n_q, d_v)]):
            expect_shape(arr, name, want, "the shape of the states' " + name)
        states.append(merged)
    return states[-1]


check_merge = Exercise(
    "ex-cost-merge", kind="Derive", points=1,
    answers=("my_merge",), run=_merge_run,
    references=("selfattention.blockwise.online_softmax_update",),
    written="why may the keys be split among workers and the states merged "
            "in any order?", written_points=2, seed=71,
    success="two partial softmaxes merge into the softmax over all their "
            "keys, in any order, with empty parts and scores near 1000.",
    doc="Exercise 8.1: merge two online-softmax states (m, l, acc).")


# ------------------------------------------------------------------ 7.2
def _depth_run(my_conv_depth, my_global_side, grid, k, d):
    depth = call(my_conv_depth, grid, k, what="my_conv_depth")
    side = call(my_global_side, k, d, what="my_global_side")
    return depth, side


check_conv_depth = Exercise(
    "ex-cost-conv-depth", kind="Derive", points=2,
    answers=("my_conv_depth", "my_global_side"), run=_depth_run,
    written="how many 3 × 3 layers with dilation 2^l make every output of "
            "a 56 × 56 grid see every pixel, and why is no pixel skipped? "
            "What does the largest side for d = 768 say, and why does it "
            "overstate attention's advantage over real CNNs?",
    written_points=2, seed=72,
    success="the depth is ceil((max(H, W) - 1) / ((k - 1)/2)) layers, and "
            "one global attention layer costs no more than that stack up "
            "to the side you found.",
    doc="Exercise 8.2: k × k convolutions until every output sees every "
        "pixel, and the largest grid on which one attention layer costs "
        "no more than that stack.")


# ------------------------------------------------------------------ 7.3
def _memory_run(my_block_memory, n, d, blocks, seed):
    return call(my_block_memory, n, d, blocks, seed, what="my_block_memory")


check_block_memory = Exercise(
    # The peaks hardly depend on the seed and follow a formula that can be
    # fitted at home (4n(3b + 1.5d) bytes passes every case), so the points
    # are the written part's, which the instructor reads with the runs.
    "ex-cost-block-memory", kind="Experiment", points=0,
    answers=("my_block_memory",), run=_memory_run,
    written="measure the peaks over b, n and d, fit them: what does each "
            "term count, and which is the largest block size that keeps the "
            "peak within 64 MB at n = 50,176, d = 16?", written_points=4,
    seed=73,
    success="the measured peaks of blockwise_attention, one per block size.",
    doc="Exercise 8.3: peak memory of blockwise attention against the "
        "block size.")
