"""Exercises of chapter 10, Matching and motion."""

from __future__ import annotations

import numpy as np

from ..attention import softmax
from ..matching import correlation_volume, displacements
from .core import Exercise, Opaque, Wrong, answered, call, type_name

__all__ = ["check_displacements", "check_correlation", "check_count"]


def _array(out, what: str, dtype=None) -> np.ndarray:
    if isinstance(out, (str, Opaque)) or out is None:
        raise Wrong(f"{what} should return an array, got {type_name(out)}")
    try:
        return np.asarray(out, dtype=dtype)
    except (TypeError, ValueError):
        raise Wrong(f"{what} should return an array of numbers, got "
                    f"{type_name(out)}") from None


# ------------------------------------------------------------------ 9.1
def _displacement_cases(rng):
    drawn_rows = int(rng.integers(2, 6))
    drawn = (drawn_rows, drawn_rows + int(rng.integers(1, 4)))
    cases = []
    for rows, cols in [(3, 5), drawn]:    # not square: (row, col) order matters
        n = rows * cols
        A = rng.random((n, n))
        targets = rng.permutation(n)
        A[np.arange(n), targets] += 2.0    # a clear winner per query
        cases.append({"A": A / A.sum(axis=1, keepdims=True),
                      "grid": (rows, cols)})
    return cases


def _displacement_run(my_displacements, A, grid):
    return call(my_displacements, A, grid, what="my_displacements")


def _displacement_judge(D, A, grid):
    D = _array(D, "my_displacements")
    rows, cols = grid
    n = rows * cols
    if D.shape != (n, 2):
        raise Wrong(f"got shape {D.shape}, expected (n, 2) = {(n, 2)}: one "
                    f"(d_row, d_col) per query")
    ref = displacements(A, (rows, cols), periodic=False)
    if np.array_equal(D, ref):
        return None
    if np.array_equal(D, ref[:, ::-1]):
        raise Wrong("you return (d_col, d_row); give (d_row, d_col)")
    if np.array_equal(D, -ref):
        raise Wrong("the signs are flipped: subtract the query's place from "
                    "the key's place")
    targets = np.argmax(A, axis=1)
    if np.array_equal(D, np.stack(np.divmod(targets, cols), axis=1)):
        raise Wrong("these are the positions of the best keys; subtract the "
                    "position of each query to get a displacement")
    wrong_axis = displacements(A.T, (rows, cols), periodic=False)
    if np.array_equal(D, wrong_axis):
        raise Wrong("you took the argmax over queries (axis 0); each query "
                    "is a row, so take the argmax along axis 1")
    raise Wrong("some displacements are wrong: for row i take "
                "j = argmax(A[i]), then divmod(j, cols) - divmod(i, cols)")


check_displacements = Exercise(
    "ex-matching-displacement", kind="Implement", points=1,
    answers=("my_displacements",), cases=_displacement_cases,
    run=_displacement_run, judge=_displacement_judge,
    references=("selfattention.matching.displacements",
                "selfattention.matching.argmax_flow"), seed=91,
    success="each query's strongest key, minus the query's own place, "
            "as (row, col).",
    doc="Exercise 10.1: displacement of each query's strongest key.")


# ------------------------------------------------------------------ 9.2
def _correlation_cases(rng):
    H, W, D = 3, 4, 5
    F1, F2 = rng.standard_normal((2, H, W, D))
    return [{"F1": F1, "F2": F2}]


def _correlation_run(my_correlation, F1, F2):
    return call(my_correlation, F1, F2, what="my_correlation")


def _correlation_judge(C, F1, F2):
    C = _array(C, "my_correlation", dtype=float)
    H, W, D = F1.shape
    ref = correlation_volume(F1, F2)
    if C.shape == (H * W, H * W):
        raise Wrong("the shape is (H·W, H·W); reshape to (H, W, H, W)")
    if C.shape != (H, W, H, W):
        raise Wrong(f"got shape {C.shape}, expected (H, W, H, W) = "
                    f"{(H, W, H, W)}")
    if np.allclose(C, ref):
        return None
    if np.allclose(C, ref / np.sqrt(D)):
        raise Wrong("you divided by √D; the correlation volume uses the plain "
                    "dot products")
    flat = ref.reshape(H * W, H * W)
    if np.allclose(C.reshape(H * W, H * W), softmax(flat)) or np.allclose(
            C.reshape(H * W, H * W), softmax(flat / np.sqrt(D))):
        raise Wrong("you applied a softmax; RAFT keeps the raw correlations "
                    "as matching evidence")
    if np.allclose(C, correlation_volume(F2, F1)):
        raise Wrong("the frames are swapped: C[i, j, k, l] = F1[i, j] · "
                    "F2[k, l], first two indices in frame 1")
    raise Wrong("C differs from the dot products F1[i, j] · F2[k, l]; "
                "try np.einsum('ijd,kld->ijkl', F1, F2)")


check_correlation = Exercise(
    "ex-matching-correlation", kind="Implement", points=1,
    answers=("my_correlation",), cases=_correlation_cases,
    run=_correlation_run, judge=_correlation_judge,
    references=("selfattention.matching.correlation_volume",), seed=92,
    success="plain dot products of every pixel of frame 1 with every "
            "pixel of frame 2, shape (H, W, H, W).",
    doc="Exercise 10.2: RAFT's all-pairs correlation volume.")


# ------------------------------------------------------------------ 9.3
def _count_judge(answer):
    answered(answer, "a whole number")
    try:
        if isinstance(answer, (str, Opaque, tuple, list)):
            raise TypeError
        value = float(answer)
    except (TypeError, ValueError):
        raise Wrong(f"answer should be a number, got "
                    f"{type_name(answer)}") from None
    pixels = (384 // 8) * (512 // 8)
    if value == pixels ** 2:
        return None
    if value == pixels:
        raise Wrong(f"{pixels:,} is the number of feature vectors in one "
                    f"frame; the volume pairs every one with every one")
    if value == (384 * 512) ** 2:
        raise Wrong("that is the count at full resolution; the features are "
                    "at 1/8 of the height and of the width")
    if value == (384 * 512 // 8) ** 2:
        raise Wrong("divide the height and the width by 8, so the number of "
                    "pixels by 64")
    raise Wrong(f"{value:,.0f} is not it: count the feature vectors of one "
                f"frame, then pair each with each")


check_count = Exercise(
    "ex-matching-count", kind="Derive", points=1,
    answers=("answer",), judge=_count_judge,
    success="48 × 64 = 3,072 feature vectors per frame, 3,072² = "
            "9,437,184 correlations.",
    doc="Exercise 10.3: entries of the volume for a 384 × 512 image at 1/8.")
