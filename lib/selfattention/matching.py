"""Matching two images: cross-attention and correlation volumes (chapter 9).

Two frames of one scene, the second moved by a known displacement (made by
:mod:`selfattention.data`), are the test bed of the chapter:

* patches of frame 1 ask, patches of frame 2 answer: cross-attention, whose
  strongest key per query (:func:`displacements`) recovers the motion;
* a :func:`correlation_volume` holds the dot product of every pixel feature
  of frame 1 with every pixel feature of frame 2, as in RAFT (Teed and Deng,
  2020); its argmax per pixel (:func:`argmax_flow`) is the flow, and
  :func:`lookup` reads it around a flow estimate, as RAFT does;
* :func:`selfattention.data.repeated_pattern_pair` and :func:`offset_encoding`
  support the chapter's small demonstration of why SuperGlue and LoFTR
  alternate self-attention with cross-attention.

Motion is cyclic (``np.roll``): what leaves one side of the frame comes back
on the other, so every pixel and patch of frame 1 has a true match in frame 2.
Displacements are (row, col), down and right positive.
"""

from __future__ import annotations


import numpy as np

from ._legacy import as_float_array, positive_int

__all__ = ["normalize", "displacements",
           "pixel_features", "correlation_volume", "argmax_flow", "lookup",
           "offset_encoding"]


def normalize(X) -> np.ndarray:
    """Scale every token (last axis) to unit length; zero rows stay zero."""
    X = as_float_array(X, "X")
    norm = np.linalg.norm(X, axis=-1, keepdims=True)
    return X / np.where(norm > 0, norm, 1.0)


def displacements(S, grid: tuple[int, int], periodic: bool = True
                  ) -> np.ndarray:
    """Where each query's strongest key lies, relative to the query.

    Parameters
    ----------
    S : array_like, shape (rows·cols, rows·cols)
        Scores or attention weights between the positions of two frames on
        the same row-major grid: queries from frame 1, keys from frame 2.
    grid : (rows, cols)
    periodic : bool
        Wrap displacements into ``[-rows/2, rows/2)`` and
        ``[-cols/2, cols/2)``, as cyclic motion requires.

    Returns
    -------
    D : ndarray of int, shape (rows·cols, 2)
        ``(d_row, d_col)`` of the argmax of each row, in grid units.
    """
    S = as_float_array(S, "S", min_ndim=2)
    rows, cols = (positive_int(v, name) for v, name in
                  zip(grid, ("grid rows", "grid cols")))
    n = rows * cols
    if S.shape != (n, n):
        raise ValueError(
            f"S must have shape ({n}, {n}) for a {rows}x{cols} grid, got "
            f"{S.shape}"
        )
    best = np.argmax(S, axis=1)                           # (n,) key index
    D = np.stack(np.divmod(best, cols), axis=1) \
        - np.stack(np.divmod(np.arange(n), cols), axis=1)  # (n, 2)
    if periodic:
        size = np.array([rows, cols])
        D = (D + size // 2) % size - size // 2
    return D


def pixel_features(img, k: int = 5) -> np.ndarray:
    """A fixed stand-in for RAFT's feature encoder: one vector per pixel.

    The feature of a pixel is its ``k × k`` neighbourhood (wrapping around
    the border), with its mean subtracted and scaled to unit length. The same
    function encodes both frames, like RAFT's shared encoder, whose weights
    are learned instead.

    Returns
    -------
    F : ndarray, shape (H, W, k²)
    """
    img = as_float_array(img, "img", min_ndim=2)
    k = positive_int(k, "k")
    if img.ndim != 2 or k % 2 == 0 or k > min(img.shape):
        raise ValueError(
            f"need a 2-D image and an odd k no larger than it, got image "
            f"{img.shape} and k={k}"
        )
    r = k // 2
    padded = np.pad(img, r, mode="wrap")
    win = np.lib.stride_tricks.sliding_window_view(padded, (k, k))  # (H,W,k,k)
    F = win.reshape(*img.shape, k * k)                              # (H,W,k²)
    return normalize(F - F.mean(axis=-1, keepdims=True))


def correlation_volume(F1, F2) -> np.ndarray:
    """All-pairs correlations ``C[i, j, k, l] = F1[i, j] · F2[k, l]``.

    RAFT's 4-D volume: the dot product of every feature of frame 1 with
    every feature of frame 2, no scaling, no softmax. Reshaped to
    (H·W, H·W) it is a score matrix ``Q Kᵀ`` with ``Q = F1`` and ``K = F2``.

    Parameters
    ----------
    F1, F2 : array_like, shape (H, W, D)

    Returns
    -------
    C : ndarray, shape (H, W, H, W)
        ``(H·W)²`` entries.
    """
    F1 = as_float_array(F1, "F1", min_ndim=3)
    F2 = as_float_array(F2, "F2", min_ndim=3)
    if F1.ndim != 3 or F1.shape != F2.shape:
        raise ValueError(
            f"F1 and F2 must both have shape (H, W, D), got {F1.shape} and "
            f"{F2.shape}"
        )
    H, W, D = F1.shape
    C = F1.reshape(H * W, D) @ F2.reshape(H * W, D).T     # (H·W, H·W)
    return C.reshape(H, W, H, W)


def argmax_flow(C, periodic: bool = True) -> np.ndarray:
    """The flow that picks, for each pixel, its best-correlated pixel.

    Parameters
    ----------
    C : array_like, shape (H, W, H, W)
        A correlation volume (:func:`correlation_volume`).
    periodic : bool
        As in :func:`displacements`.

    Returns
    -------
    flow : ndarray of int, shape (H, W, 2)
        ``(d_row, d_col)`` per pixel.
    """
    C = as_float_array(C, "C", min_ndim=4)
    if C.ndim != 4 or C.shape[:2] != C.shape[2:]:
        raise ValueError(f"C must have shape (H, W, H, W), got {C.shape}")
    H, W = C.shape[:2]
    D = displacements(C.reshape(H * W, H * W), (H, W), periodic)
    return D.reshape(H, W, 2)


def lookup(C, flow, radius: int) -> np.ndarray:
    """Read the correlations around where the flow says each pixel went.

    RAFT's lookup: for pixel ``x`` and its current flow ``f``, collect
    ``C[x, x + f + d]`` for every offset ``d`` with both coordinates in
    ``[-radius, radius]`` (indices wrap around). The result is a feature
    vector of matching evidence per pixel, which RAFT feeds to its update
    operator; no weighted sum of values is formed.

    Parameters
    ----------
    C : array_like, shape (H, W, H, W)
    flow : array_like of int, shape (H, W, 2)
    radius : int

    Returns
    -------
    L : ndarray, shape (H, W, (2·radius + 1)²)
        Offsets ordered row-major, from ``(-radius, -radius)``; the centre,
        index ``(2·radius + 1)² // 2``, is offset (0, 0).
    """
    C = as_float_array(C, "C", min_ndim=4)
    flow = np.asarray(flow)
    if C.ndim != 4 or C.shape[:2] != C.shape[2:]:
        raise ValueError(f"C must have shape (H, W, H, W), got {C.shape}")
    H, W = C.shape[:2]
    if flow.shape != (H, W, 2) or not np.issubdtype(flow.dtype, np.integer):
        raise ValueError(
            f"flow must be an integer array of shape ({H}, {W}, 2), got "
            f"{flow.dtype} {flow.shape}"
        )
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) \
            or radius < 0:
        raise ValueError(f"radius must be a non-negative integer, got {radius!r}")
    ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    d = np.arange(-radius, radius + 1)
    dy, dx = (a.ravel() for a in np.meshgrid(d, d, indexing="ij"))
    ty = (ys[..., None] + flow[..., :1] + dy) % H          # (H, W, (2r+1)²)
    tx = (xs[..., None] + flow[..., 1:] + dx) % W
    return C[ys[..., None], xs[..., None], ty, tx]


def offset_encoding(offsets, omegas=(np.pi / 8, np.pi / 4, np.pi / 2)
                    ) -> np.ndarray:
    """Encode 2-D offsets so that a dot product measures their closeness.

    Each coordinate ``o`` becomes ``(cos ωo, sin ωo)`` for every frequency
    ``ω``, so ``e(o) · e(o') = Σ_ω [cos ω(o_r − o'_r) + cos ω(o_c − o'_c)]``,
    which is largest, ``2·len(omegas)``, when the offsets agree (and, with
    the default frequencies, only then for differences below 16).

    Parameters
    ----------
    offsets : array_like, shape (..., 2)
    omegas : sequence of float

    Returns
    -------
    E : ndarray, shape (..., 4·len(omegas))
    """
    o = as_float_array(offsets, "offsets")
    if o.shape[-1] != 2:
        raise ValueError(f"offsets must have shape (..., 2), got {o.shape}")
    w = np.asarray(omegas, dtype=float)
    angles = o[..., :, None] * w                          # (..., 2, F)
    E = np.concatenate([np.cos(angles), np.sin(angles)], axis=-1)
    return E.reshape(*o.shape[:-1], -1)                   # (..., 4F)
