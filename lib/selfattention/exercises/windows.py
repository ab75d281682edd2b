"""Exercises of chapter 8, Windows and shifted windows."""

from __future__ import annotations

import numpy as np

from ..position import relative_position_index
from ..windows import window_partition
from .core import Exercise, Opaque, Wrong, call, int_pair, type_name

__all__ = ["check_window_partition", "check_window_counts",
           "check_score_ratio", "check_relative_index"]


def _as_array(out, what: str) -> np.ndarray:
    if isinstance(out, (str, Opaque)) or out is None:
        raise Wrong(f"{what} should return an array, got {type_name(out)}")
    try:
        arr = np.asarray(out)
    except ValueError:
        raise Wrong(f"{what} should return an array of numbers, got a "
                    f"ragged {type_name(out)}") from None
    if arr.dtype.kind not in "biuf":
        raise Wrong(f"{what} should return an array of numbers, got "
                    f"{type_name(out)}")
    return arr


# ------------------------------------------------------------------ 7.1
def _partition_cases(rng):
    H, W, C, M = 8, 12, 3, 4                 # 2 x 3 windows: not square
    M2 = int(rng.integers(2, 4))
    a = int(rng.integers(2, 4))
    return [{"x": rng.standard_normal((H, W, C)), "M": M},
            {"x": rng.standard_normal((M2 * (a + 1), M2 * a, 2)), "M": M2}]


def _partition_run(my_partition, x, M):
    return call(my_partition, x, M, what="my_partition")


def _partition_judge(out, x, M):
    out = _as_array(out, "my_partition")
    H, W, C = x.shape
    want = window_partition(x, M)
    if out.shape != want.shape:
        raise Wrong(f"for a grid of shape {x.shape} and M={M} the result "
                    f"should have shape (nW, M², C) = {want.shape}, got "
                    f"{out.shape}")
    if np.allclose(out, x.reshape(-1, M * M, C)):
        raise Wrong("each of your 'windows' is a strip of whole rows: a "
                    "plain reshape keeps row-major order. Reshape to "
                    "(H/M, M, W/M, M, C) and swap the two middle axes first")
    grid = want.reshape(H // M, W // M, M * M, C)
    if np.allclose(out, grid.transpose(1, 0, 2, 3).reshape(want.shape)):
        raise Wrong("the windows come out column by column; number them "
                    "row-major: window (a, b) has index a·(W/M) + b")
    inner = want.reshape(-1, M, M, C).transpose(0, 2, 1, 3)
    if np.allclose(out, inner.reshape(want.shape)):
        raise Wrong("the right tokens are in each window, but in "
                    "column-major order; list them row by row")
    if not np.allclose(out, want):
        if all(np.allclose(np.sort(o, axis=0), np.sort(w, axis=0))
               for o, w in zip(out, want)):
            raise Wrong("every window holds the right tokens, but not in "
                        "row-major order inside the window")
        raise Wrong("some windows hold tokens from outside their M × M "
                    "block; compare your result with x[:M, :M] for the "
                    "first window")
    return None


check_window_partition = Exercise(
    "ex-windows-partition", kind="Implement", points=1,
    answers=("my_partition",), cases=_partition_cases, run=_partition_run,
    judge=_partition_judge,
    references=("selfattention.windows.window_partition",), seed=71,
    success="windows are numbered row-major and so are their tokens, on "
            "square and non-square grids.",
    doc="Exercise 8.1: cut an (H, W, C) grid into (nW, M², C) windows.")


# ------------------------------------------------------------------ 7.2
def _counts_cases(rng):
    fixed = [(56, 56, 7), (8, 12, 4), (14, 28, 7)]
    M = int(rng.integers(2, 9))
    drawn = (M * int(rng.integers(1, 9)), M * int(rng.integers(1, 9)), M)
    return [{"H": H, "W": W, "M": M} for H, W, M in fixed + [drawn]]


def _counts_run(my_counts, H, W, M):
    return call(my_counts, H, W, M, what="my_counts")


def _counts_judge(out, H, W, M):
    cyc, pad = int_pair(out, "my_counts should return a pair (cyclic, padded) "
                        "of ints")
    a, b = H // M, W // M
    want = (a * b, (a + 1) * (b + 1))
    if (cyc, pad) == want:
        return None
    where = f"for a {H}x{W} grid and M={M}"
    if (pad, cyc) == want:
        raise Wrong(f"{where} the pair is swapped: return (cyclic, "
                    f"padded), cyclic first")
    if cyc != want[0]:
        if cyc == H * W // M:
            raise Wrong(f"{where} you divided H·W by M; a window holds "
                        f"M² patches")
        raise Wrong(f"{where} the cyclic shift keeps the {want[0]} "
                    f"windows of the regular partition, got {cyc}")
    if pad == (a + 2) * (b + 2):
        raise Wrong(f"{where} you padded a whole window on each side; "
                    f"the shift is less than M, so each axis gains one "
                    f"window, not two")
    if pad in ((a + 1) ** 2, (b + 1) ** 2) and a != b:
        raise Wrong(f"{where} the grid is not square: count the windows "
                    f"along rows and along columns separately")
    if pad == a * b + 1 or pad == want[0] + a + b:
        raise Wrong(f"{where} each axis gains one window, so the count "
                    f"is (H/M + 1)·(W/M + 1), got {pad}")
    raise Wrong(f"{where} padding gives {want[1]} windows, got {pad}")


check_window_counts = Exercise(
    "ex-windows-count", kind="Derive", points=1,
    answers=("my_counts",), cases=_counts_cases, run=_counts_run,
    judge=_counts_judge, seed=72,
    success="the cyclic shift keeps (H/M)·(W/M) windows; padding needs "
            "(H/M + 1)·(W/M + 1).",
    doc="Exercise 8.2: windows after a shift, cyclic shift vs padding.")


# ------------------------------------------------------------------ 7.3
def _ratio_cases(rng):
    fixed = [(56, 56, 7), (28, 28, 7), (16, 8, 4)]
    M = int(rng.integers(2, 9))
    drawn = (M * int(rng.integers(1, 9)), M * int(rng.integers(1, 9)), M)
    return [{"h": h, "w": w, "M": M} for h, w, M in fixed + [drawn]]


def _ratio_run(my_ratio, h, w, M):
    return call(my_ratio, h, w, M, what="my_ratio")


def _ratio_judge(out, h, w, M):
    try:
        if isinstance(out, (str, Opaque, tuple, list)) or out is None:
            raise TypeError
        got = float(np.asarray(out, dtype=float))
    except (TypeError, ValueError):
        raise Wrong(f"my_ratio should return a number, got "
                    f"{type_name(out)}") from None
    n = h * w
    want = n / M ** 2
    if np.isclose(got, want):
        return None
    where = f"for a {h}x{w} grid and M={M}"
    if np.isclose(got, 1 / want):
        raise Wrong(f"{where} the ratio is upside down: global entries "
                    f"divided by window entries is larger than one")
    if np.isclose(got, n / M):
        raise Wrong(f"{where} each query sees M² keys in its window, "
                    f"not M: divide by M²")
    if np.isclose(got, n ** 2 / M ** 2):
        raise Wrong(f"{where} global attention has (hw)² entries and "
                    f"window attention hw·M²; you divided (hw)² by M²")
    raise Wrong(f"{where} expected {want:g}, got {got:g}: global "
                f"attention has (hw)² score entries per head, window "
                f"attention hw·M²")


check_score_ratio = Exercise(
    "ex-windows-ratio", kind="Derive", points=1,
    answers=("my_ratio",), cases=_ratio_cases, run=_ratio_run,
    judge=_ratio_judge,
    references=("selfattention.cost.window_score_entries",
                "selfattention.cost.score_entries"), seed=73,
    success="the ratio of score entries is h·w / M², the number of "
            "windows: 64 for Swin's 56 × 56 grid.",
    doc="Exercise 8.3: how many times fewer score entries windows need.")


# ------------------------------------------------------------------ 7.4
def _index_cases(rng):
    return [{"M": M} for M in (2, 3, 7, int(rng.integers(4, 10)))]


def _index_run(my_index, M):
    return call(my_index, M, what="my_index")


def _index_judge(out, M):
    out = _as_array(out, "my_index")
    want = relative_position_index((M, M))
    if out.shape != want.shape:
        raise Wrong(f"for M={M} the index should have shape (M², M²) = "
                    f"{want.shape}, got {out.shape}")
    if np.array_equal(out, want):
        return None
    if out.min() < 0:
        raise Wrong(f"for M={M} some indices are negative: shift both "
                    f"offsets by M - 1 so they start at 0")
    if np.array_equal(out, want.T):
        raise Wrong(f"for M={M} you used the offset of key minus query; "
                    f"the convention here is query minus key, "
                    f"r_i - r_j")
    r, c = np.divmod(np.arange(M * M), M)
    dr = r[:, None] - r[None, :] + M - 1
    dc = c[:, None] - c[None, :] + M - 1
    if np.array_equal(out, dr * M + dc):
        raise Wrong(f"for M={M} the row offset must be multiplied by "
                    f"2M - 1 = {2 * M - 1} (the number of column "
                    f"offsets), not by M: otherwise different offsets "
                    f"share an index")
    if np.array_equal(out, dc * (2 * M - 1) + dr):
        raise Wrong(f"for M={M} rows and columns are swapped: the row "
                    f"offset is the slow one, Δr·(2M-1) + Δc")
    raise Wrong(f"for M={M} the index differs from "
                f"(Δr + M - 1)·(2M - 1) + (Δc + M - 1)")


check_relative_index = Exercise(
    "ex-windows-index", kind="Implement", points=1,
    answers=("my_index",), cases=_index_cases, run=_index_run,
    judge=_index_judge,
    references=("selfattention.position.relative_position_index",),
    seed=74,
    success="every pair reads the row of its offset, and the index runs "
            "over 0 … (2M-1)² - 1.",
    doc="Exercise 8.4: the relative position index of an M × M window.")
