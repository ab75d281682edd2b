"""Checks for the exercises of chapter 9, Matching and motion."""

from __future__ import annotations

import numpy as np

from ..attention import softmax
from ..matching import correlation_volume, displacements
from .core import Wrong, answered, call, check

__all__ = ["check_displacements", "check_correlation", "check_count"]


@check("ex-matching-displacement", points=1.0,
       success="each query's strongest key, minus the query's own place, "
               "as (row, col).")
def check_displacements(my_displacements):
    """Exercise 9.1: displacement of each query's strongest key."""
    rng = np.random.default_rng(91)
    rows, cols = 3, 5                  # not square: (row, col) order matters
    n = rows * cols
    A = rng.random((n, n))
    targets = rng.permutation(n)
    A[np.arange(n), targets] += 2.0    # a clear winner per query
    A = A / A.sum(axis=1, keepdims=True)
    out = call(my_displacements, A.copy(), (rows, cols),
               what="my_displacements")
    D = np.asarray(out)
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
    if np.array_equal(D, np.stack(np.divmod(targets, cols), axis=1)):
        raise Wrong("these are the positions of the best keys; subtract the "
                    "position of each query to get a displacement")
    wrong_axis = displacements(A.T, (rows, cols), periodic=False)
    if np.array_equal(D, wrong_axis):
        raise Wrong("you took the argmax over queries (axis 0); each query "
                    "is a row, so take the argmax along axis 1")
    raise Wrong("some displacements are wrong: for row i take "
                "j = argmax(A[i]), then divmod(j, cols) - divmod(i, cols)")


@check("ex-matching-correlation", points=1.0,
       success="plain dot products of every pixel of frame 1 with every "
               "pixel of frame 2, shape (H, W, H, W).")
def check_correlation(my_correlation):
    """Exercise 9.2: RAFT's all-pairs correlation volume."""
    rng = np.random.default_rng(92)
    H, W, D = 3, 4, 5
    F1, F2 = rng.standard_normal((2, H, W, D))
    C = np.asarray(call(my_correlation, F1.copy(), F2.copy(),
                        what="my_correlation"), dtype=float)
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


@check("ex-matching-count", points=1.0,
       success="48 × 64 = 3,072 feature vectors per frame, 3,072² = "
               "9,437,184 correlations.")
def check_count(answer):
    """Exercise 9.3: entries of the volume for a 384 × 512 image at 1/8."""
    answered(answer, "a whole number")
    try:
        value = float(answer)
    except (TypeError, ValueError):
        raise Wrong(f"answer should be a number, got {answer!r}") from None
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
