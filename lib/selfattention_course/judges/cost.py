"""The judges of :ref:`ch-cost`, Cost: hidden cases, judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
from selfattention.attention import softmax
from selfattention_exercises.core import (
    Opaque,
    Wrong,
    expect_shape,
    returned_array,
    returned_arrays,
    type_name,
)
from selfattention_exercises.cost import _state

from . import Judge


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
                        "-inf shift by 0 instead", "empty-rows-nan")
        raise Wrong("a part whose scores are near 1000 gives NaN or inf: "
                    "rescale both states to the larger maximum, "
                    "exp(m_a - m) with m = max(m_a, m_b), never above 1",
                    "overflow")
    if not np.allclose(m, s.max(axis=1)):
        raise Wrong("the merged maximum is wrong: m = max(m_a, m_b)",
                    "not-the-max")
    if not np.allclose(Y, want):
        states = [_state(S[:, a:b], V[a:b], allowed[:, a:b])
                  for a, b in parts]
        l_sum = sum(state[1] for state in states)
        if np.allclose(Y, sum(state[2] for state in states) / l_sum[:, None]):
            raise Wrong("you added l and acc without rescaling: each state "
                        "is relative to its own maximum, so multiply by "
                        "exp(m_a - m) and exp(m_b - m) before adding",
                        "not-rescaled")
        raise Wrong("acc / l after merging is not the softmax average over "
                    "all keys", "not-the-merge")
    return None


#: The sides of the last case of 7.2: a grid of 10¹⁶ pixels or more, which
#: no answer that stacks the convolutions and watches the receptive field
#: grow can hold (a boolean per pixel takes 10 PB); the depth is one line.
HUGE_SIDES = (10**8, 10**9)


def _depth_cases(rng):
    drawn = [(int(rng.integers(2, 80)), int(rng.integers(2, 80)),
              int(rng.choice([3, 5, 7, 9])), int(rng.integers(8, 1025)))
             for _ in range(3)]
    huge = (int(rng.integers(*HUGE_SIDES)), int(rng.integers(*HUGE_SIDES)),
            int(rng.choice([5, 7, 9])), int(rng.integers(8, 1025)))
    return [{"grid": (H, W), "k": k, "d": d} for H, W, k, d in
            [(56, 56, 3, 768), (8, 20, 5, 64)] + drawn + [huge]]


def global_side(k, d, reach=None, projections=True):
    """The largest side ``s`` at which one global attention layer over
    ``s × s`` tokens of width ``d``, ``4nd² + 2n²d`` multiply-adds, costs no
    more than the stack of ``k × k`` convolutions that lets every output
    see every pixel, ``depth · k² n d²`` (0 if there is none). ``reach``
    (default ``(k - 1) // 2``) and ``projections`` make the usual slips."""
    r = (k - 1) // 2 if reach is None else reach
    s = np.arange(2, k * k * d // r + 3, dtype=np.int64)   # beyond: never
    n = (s * s).astype(float)
    depth = -(-(s - 1) // r)
    attention = 2 * n * n * d + (4 * n * d * d if projections else 0)
    cheaper = attention <= depth * k * k * n * d * d
    return int(s[cheaper].max()) if cheaper.any() else 0


def _depth_value(out, grid, k):
    if isinstance(out, (str, Opaque, tuple, list)) or np.ndim(out) != 0:
        raise Wrong(f"my_conv_depth should return a number of layers, got "
                    f"{type_name(out)}", "type")
    got = float(out)
    (H, W), r = grid, (k - 1) // 2
    far = max(H, W) - 1                    # Chebyshev distance of corners
    want = math.ceil(far / r)
    if got == want:
        return None
    where = f"for a {H}x{W} grid and k={k}"
    if got != int(got):
        raise Wrong(f"{where} you returned {got:g}: a number of layers is "
                    f"a whole number, round up", "not-whole")
    if got == math.ceil(far / (k - 1)):
        raise Wrong(f"{where} a {k}x{k} kernel centred on a pixel reaches "
                    f"(k - 1)/2 pixels to each side (here {r}), not k - 1",
                    "reach-k-minus-1")
    if got == math.ceil((min(H, W) - 1) / r):
        raise Wrong(f"{where} the longer side decides: the corners are "
                    f"{far} pixels apart along it", "shorter-side")
    if got == math.ceil((H + W - 2) / r):
        raise Wrong(f"{where} one layer moves {r} pixels along both axes "
                    f"at once, so the distances do not add up",
                    "distances-added")
    if got in (far // r, math.ceil(max(H, W) / r)):
        raise Wrong(f"{where} count the layers to cover max(H, W) - 1 = "
                    f"{far} pixels, rounding up", "not-rounded-up")
    if got == math.ceil(math.log(H * W, k)):
        raise Wrong(f"{where} log_k(n) is the path of dilated "
                    f"convolutions; these kernels are contiguous",
                    "dilated-depth")
    raise Wrong(f"{where} {got:g} layers is not the smallest depth at which "
                f"every output depends on every pixel", "not-the-depth")


def _side_value(out, k, d):
    if isinstance(out, (str, Opaque, tuple, list)) or np.ndim(out) != 0:
        raise Wrong(f"my_global_side should return a side in tokens, got "
                    f"{type_name(out)}", "side-type")
    got = float(out)
    want = global_side(k, d)
    if got == want:
        return None
    where = f"for k={k} and d={d}"
    one_layer = math.isqrt((k * k - 4) * d // 2)
    if got in (one_layer, one_layer + 1) and got != want:
        raise Wrong(f"{where} you compared attention with one convolution "
                    f"layer, as the break-even n < (k² - 4)d/2 does; "
                    f"compare it with the whole stack that sees every "
                    f"pixel, my_conv_depth layers deep", "one-layer")
    if got == want * want:
        raise Wrong(f"{where} return the side s of the grid, not its "
                    f"s² tokens", "tokens-not-side")
    if got == global_side(k, d, reach=k - 1):
        raise Wrong(f"{where} the stack's depth uses a reach of (k - 1)/2 "
                    f"pixels per layer, not k - 1", "side-reach")
    if got == global_side(k, d, projections=False):
        raise Wrong(f"{where} attention also pays 4nd² for its four "
                    f"projections", "no-projections")
    raise Wrong(f"{where} {got:g} is not the largest side at which one "
                f"attention layer costs no more than the stack",
                "not-the-side")


def _depth_judge(out, grid, k, d):
    depth, side = returned_pair(out)
    _depth_value(depth, grid, k)
    _side_value(side, k, d)
    return None


def returned_pair(out):
    """The two values of ``(my_conv_depth, my_global_side)``."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Wrong("expected the two answers' values", "type")
    return out


def _memory_cases(rng):
    n = int(rng.choice([512, 768, 1024]))
    d = int(rng.choice([8, 16, 32]))
    blocks = tuple(int(b) for b in np.sort(rng.choice(
        [64, 128, 256, 512], size=3, replace=False)))
    return [{"n": 1024, "d": 16, "blocks": (64, 256, 1024), "seed": 3},
            {"n": n, "d": d, "blocks": blocks, "seed": int(rng.integers(99))}]


#: Run in a Python of its own: tracemalloc there sees the call alone (in
#: the grader's process it would also count what other threads allocate
#: meanwhile, and two judges at once would stop each other's tracing).
_MEASURE = """
import json, sys
import numpy as np
from selfattention.blockwise import blockwise_attention
from selfattention.timing import peak_bytes, random_qkv
peaks = []
for n, d, blocks, seed in json.load(sys.stdin):
    Q, K, V = random_qkv(n, d, np.random.default_rng(seed))
    peaks.append([peak_bytes(blockwise_attention, Q, K, V, block=b)
                  for b in blocks])
json.dump(peaks, sys.stdout)
"""
_PEAKS: dict[tuple, np.ndarray] = {}


def measure_peaks(cases) -> None:
    """Measure the peaks of several ``(n, d, blocks, seed)`` at once, in
    one process of their own; :func:`_measured` then reads them."""
    todo = sorted({(int(n), int(d), tuple(int(b) for b in blocks),
                    int(seed)) for n, d, blocks, seed in cases} - set(_PEAKS))
    if not todo:
        return
    done = subprocess.run([sys.executable, "-c", _MEASURE],
                          input=json.dumps(todo), capture_output=True,
                          text=True, timeout=60 + 5 * len(todo), check=True)
    for key, peaks in zip(todo, json.loads(done.stdout)):
        _PEAKS[key] = np.array(peaks, dtype=float)


def _measured(n, d, blocks, seed):
    """The peaks the exercise asks for, measured in a process of their
    own."""
    key = (int(n), int(d), tuple(int(b) for b in blocks), int(seed))
    measure_peaks([key])
    return _PEAKS[key]


def _memory_judge(out, n, d, blocks, seed):
    got = returned_array(out, "my_block_memory", "one peak (in bytes) per "
                         "block size")
    expect_shape(got, "the peaks", (len(blocks),), "(len(blocks),)")
    if not np.all(np.isfinite(got)) or got.min() <= 0:
        raise Wrong("peaks should be positive numbers of bytes",
                    "not-positive")
    want = _measured(n, d, blocks, seed)
    close = np.abs(got - want) <= 0.1 * want + 65_536
    if close.all():
        return None
    ratio = float(np.median(got / want))
    if 1.7 < ratio < 2.3:
        raise Wrong("your peaks are about twice the expected ones: use "
                    "float32 tokens (timing.random_qkv makes them)",
                    "float64-tokens")
    extra = float(np.median(got - want))
    if abs(extra - 3 * 4 * n * d) < 0.25 * 3 * 4 * n * d + 65_536:
        raise Wrong("your peaks include Q, K and V: make them before the "
                    "measurement starts and trace only the call",
                    "inputs-counted")
    if ratio < 0.5:
        raise Wrong("your peaks are far below what the call allocates: was "
                    "tracemalloc running during blockwise_attention "
                    "(timing.peak_bytes does this)?", "not-traced")
    raise Wrong(f"for n={n}, d={d} and blocks {list(blocks)} the peaks "
                f"differ from those of blockwise_attention by more than 10%",
                "off-the-expected")


JUDGES = {
    "ex-cost-merge": Judge(cases=_merge_cases, judge=_merge_judge),
    "ex-cost-conv-depth": Judge(cases=_depth_cases, judge=_depth_judge),
    "ex-cost-block-memory": Judge(
        cases=_memory_cases, judge=_memory_judge,
        prepare=lambda cases: measure_peaks(
            [(c["n"], c["d"], c["blocks"], c["seed"]) for c in cases])),
}
