"""Exercises of chapter 7, Cost."""

from __future__ import annotations

import math

import numpy as np

from ..attention import softmax
from ..blockwise import blockwise_attention
from ..timing import peak_bytes, random_qkv
from .core import (Exercise, Opaque, Wrong, call, expect_shape,
                   returned_array, returned_arrays, type_name)

__all__ = ["check_merge", "check_conv_depth", "check_block_memory"]


# ------------------------------------------------------------------ 7.1
def _merge_cases(rng):
    n_q, n_k = 4, 12
    S = 3 * rng.standard_normal((n_q, n_k))
    V = rng.standard_normal((n_k, 3))
    allowed = rng.random((n_q, n_k)) < 0.8
    allowed[0, :7] = False            # query 0: parts 0 and 1 are empty
    allowed[0, 7:] = True
    allowed[:, 11] = True             # every query keeps a key
    parts = ((0, 3), (3, 7), (7, 12))
    cut = int(rng.integers(2, 10))
    return [
        # a random cut in two; the second part's scores near 1000
        {"S": S + 1000.0 * (np.arange(n_k) >= cut), "V": V,
         "allowed": np.ones_like(allowed),
         "parts": ((0, cut), (cut, n_k)), "order": ((1, 0),)},
        # part 2 with part 1, then part 0 in front
        {"S": S, "V": V, "allowed": np.ones_like(allowed), "parts": parts,
         "order": ((1, 2), (0, 3))},
        # parts 0 and 1 first, then part 2: two empty states meet
        {"S": S, "V": V, "allowed": allowed, "parts": parts,
         "order": ((0, 1), (3, 2))},
    ]


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


def _merge_judge(out, S, V, allowed, parts, order):
    m, l, acc = returned_arrays(out, 3, "my_merge should return three "
                                "arrays (m, l, acc)")
    s = np.where(allowed, S, -np.inf)
    want = softmax(s) @ V
    Y = acc / l[:, None]
    empty_first = any(not allowed[:, a:b].any(axis=1).all()
                      for a, b in parts)
    if not np.all(np.isfinite(Y)):
        if empty_first:
            raise Wrong("merging two states of a query that has no allowed "
                        "key yet (m = -inf in both) gave NaN: "
                        "exp(-inf - (-inf)) is NaN, so when both maxima are "
                        "-inf shift by 0 instead")
        raise Wrong("a part whose scores are near 1000 gives NaN or inf: "
                    "rescale both states to the larger maximum, "
                    "exp(m_a - m) with m = max(m_a, m_b), never above 1")
    if not np.allclose(m, s.max(axis=1)):
        raise Wrong("the merged maximum is wrong: m = max(m_a, m_b)")
    if not np.allclose(Y, want):
        states = [_state(S[:, a:b], V[a:b], allowed[:, a:b])
                  for a, b in parts]
        l_sum = sum(state[1] for state in states)
        if np.allclose(Y, sum(state[2] for state in states) / l_sum[:, None]):
            raise Wrong("you added l and acc without rescaling: each state "
                        "is relative to its own maximum, so multiply by "
                        "exp(m_a - m) and exp(m_b - m) before adding")
        raise Wrong("acc / l after merging is not the softmax average over "
                    "all keys")
    return None


check_merge = Exercise(
    "ex-cost-merge", kind="Derive", points=2,
    answers=("my_merge",), cases=_merge_cases, run=_merge_run,
    judge=_merge_judge,
    references=("selfattention.blockwise.online_softmax_update",),
    written="why may the keys be split among workers and the states merged "
            "in any order?", written_points=1, seed=71,
    success="two partial softmaxes merge into the softmax over all their "
            "keys, in any order, with empty parts and scores near 1000.",
    doc="Exercise 7.1: merge two online-softmax states (m, l, acc).")


# ------------------------------------------------------------------ 7.2
def _depth_cases(rng):
    drawn = [(int(rng.integers(2, 80)), int(rng.integers(2, 80)),
              int(rng.choice([3, 5, 7, 9]))) for _ in range(3)]
    return [{"grid": (H, W), "k": k} for H, W, k in
            [(56, 56, 3), (8, 20, 5)] + drawn]


def _depth_run(my_conv_depth, grid, k):
    return call(my_conv_depth, grid, k, what="my_conv_depth")


def _depth_judge(out, grid, k):
    if isinstance(out, (str, Opaque, tuple, list)) or np.ndim(out) != 0:
        raise Wrong(f"my_conv_depth should return a number of layers, got "
                    f"{type_name(out)}")
    got = float(out)
    (H, W), r = grid, (k - 1) // 2
    far = max(H, W) - 1                    # Chebyshev distance of corners
    want = math.ceil(far / r)
    if got == want:
        return None
    where = f"for a {H}x{W} grid and k={k}"
    if got != int(got):
        raise Wrong(f"{where} you returned {got:g}: a number of layers is "
                    f"a whole number, round up")
    if got == math.ceil(far / (k - 1)):
        raise Wrong(f"{where} a {k}x{k} kernel centred on a pixel reaches "
                    f"(k - 1)/2 pixels to each side (here {r}), not k - 1")
    if got == math.ceil((min(H, W) - 1) / r):
        raise Wrong(f"{where} the longer side decides: the corners are "
                    f"{far} pixels apart along it")
    if got == math.ceil((H + W - 2) / r):
        raise Wrong(f"{where} one layer moves {r} pixels along both axes "
                    f"at once, so the distances do not add up")
    if got in (far // r, math.ceil(max(H, W) / r)):
        raise Wrong(f"{where} count the layers to cover max(H, W) - 1 = "
                    f"{far} pixels, rounding up")
    if got == math.ceil(math.log(H * W, k)):
        raise Wrong(f"{where} log_k(n) is the path of dilated "
                    f"convolutions; these kernels are contiguous")
    raise Wrong(f"{where} {got:g} layers is not the smallest depth at which "
                f"every output depends on every pixel")


check_conv_depth = Exercise(
    "ex-cost-conv-depth", kind="Derive", points=2,
    answers=("my_conv_depth",), cases=_depth_cases, run=_depth_run,
    judge=_depth_judge,
    written="which convolutions reach Table 1's O(log_k n), and how do a "
            "3 × 3 stack, ViT and Swin compare on a 56 × 56 grid?",
    written_points=1, seed=72,
    success="ceil((max(H, W) - 1) / ((k - 1)/2)) layers: the receptive "
            "field grows by (k - 1)/2 pixels per side per layer.",
    doc="Exercise 7.2: k × k convolutions until every output sees every "
        "pixel.")


# ------------------------------------------------------------------ 7.3
def _memory_cases(rng):
    n = int(rng.choice([512, 768, 1024]))
    d = int(rng.choice([8, 16, 32]))
    blocks = tuple(int(b) for b in np.sort(rng.choice(
        [64, 128, 256, 512], size=3, replace=False)))
    return [{"n": 1024, "d": 16, "blocks": (64, 256, 1024), "seed": 3},
            {"n": n, "d": d, "blocks": blocks, "seed": int(rng.integers(99))}]


def _memory_run(my_block_memory, n, d, blocks, seed):
    return call(my_block_memory, n, d, blocks, seed, what="my_block_memory")


def _measured(n, d, blocks, seed):
    """The peaks the exercise asks for, measured here."""
    Q, K, V = random_qkv(n, d, np.random.default_rng(seed))
    return np.array([peak_bytes(blockwise_attention, Q, K, V, block=b)
                     for b in blocks], dtype=float)


def _memory_judge(out, n, d, blocks, seed):
    got = returned_array(out, "my_block_memory", "one peak (in bytes) per "
                         "block size")
    expect_shape(got, "the peaks", (len(blocks),), "(len(blocks),)")
    if not np.all(np.isfinite(got)) or got.min() <= 0:
        raise Wrong("peaks should be positive numbers of bytes")
    want = _measured(n, d, blocks, seed)
    close = np.abs(got - want) <= 0.1 * want + 65_536
    if close.all():
        return None
    ratio = float(np.median(got / want))
    if 1.7 < ratio < 2.3:
        raise Wrong("your peaks are about twice the expected ones: use "
                    "float32 tokens (timing.random_qkv makes them)")
    extra = float(np.median(got - want))
    if abs(extra - 3 * 4 * n * d) < 0.25 * 3 * 4 * n * d + 65_536:
        raise Wrong("your peaks include Q, K and V: make them before the "
                    "measurement starts and trace only the call")
    if ratio < 0.5:
        raise Wrong("your peaks are far below what the call allocates: was "
                    "tracemalloc running during blockwise_attention "
                    "(timing.peak_bytes does this)?")
    raise Wrong(f"for n={n}, d={d} and blocks {list(blocks)} the peaks "
                f"differ from those of blockwise_attention by more than 10%")


check_block_memory = Exercise(
    "ex-cost-block-memory", kind="Experiment", points=3,
    answers=("my_block_memory",), cases=_memory_cases, run=_memory_run,
    judge=_memory_judge,
    written="fit the peaks: what does each term count, and at which block "
            "size would they reach dense attention's?", written_points=2,
    seed=73,
    success="the measured peaks of blockwise_attention, one per block size.",
    doc="Exercise 7.3: peak memory of blockwise attention against the "
        "block size.")
