"""Matching two images: cross-attention and correlation volumes (chapter 10).

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

from ._validate import (boundary, floats, grid, instance, integer, ints,
                        positive_int)

__all__ = ["normalize", "displacements",
           "pixel_features", "correlation_volume", "argmax_flow", "lookup",
           "offset_encoding"]


# ------------------------------------------------------------------ checks
def _scores_on_grid(args) -> None:
    n = args["grid"][0] * args["grid"][1]
    if args["S"].shape != (n, n):
        raise ValueError(f"S must have shape ({n}, {n}) for the grid "
                         f"{args['grid']}, got {args['S'].shape}")


def _odd_window(args) -> None:
    k, shape = args["k"], args["img"].shape
    if k % 2 == 0 or k > min(shape):
        raise ValueError(f"k must be odd and no larger than the image "
                         f"{shape}, got k={k}")


def _same_maps(args) -> None:
    if args["F1"].shape != args["F2"].shape:
        raise ValueError(f"F1 and F2 must have the same shape (H, W, D), "
                         f"got {args['F1'].shape} and {args['F2'].shape}")


def _square_volume(args) -> None:
    C = args["C"]
    if C.shape[:2] != C.shape[2:]:
        raise ValueError(f"C must have shape (H, W, H, W), got {C.shape}")


def _flow_fits(args) -> None:
    want = args["C"].shape[:2] + (2,)
    if args["flow"].shape != want:
        raise ValueError(f"flow must have shape {want}, one (d_row, d_col) "
                         f"per pixel of C, got {args['flow'].shape}")


def _pairs_of_coordinates(args) -> None:
    if args["offsets"].shape[-1] != 2:
        raise ValueError(f"offsets must have shape (..., 2), got "
                         f"{args['offsets'].shape}")


# ------------------------------------------------------------------ maths
@boundary(X=floats(min_ndim=1))
def normalize(X):
    """Scale every token (last axis) to unit length; zero rows stay zero."""
    norm = np.linalg.norm(X, axis=-1, keepdims=True)
    return X / np.where(norm > 0, norm, 1.0)


@boundary(S=floats(ndim=2), grid=grid(),
          periodic=instance(bool), checks=(_scores_on_grid,))
def displacements(S, grid, periodic=True):
    """Where each query's strongest key lies, relative to the query.

    ``S`` (H·W, H·W) holds scores or weights between the positions of two
    frames on the same row-major ``grid = (H, W)``, queries from frame 1,
    keys from frame 2. Returns the ``(d_row, d_col)`` of each row's argmax,
    an int array of shape (H·W, 2), wrapped into ``[-H/2, H/2) × [-W/2,
    W/2)`` if ``periodic`` (cyclic motion). ``TypeError`` or ``ValueError``
    if ``S`` is not a finite matrix of that shape.
    """
    H, W = grid
    best = np.argmax(S, axis=1)                           # (n,) key index
    D = np.stack(np.divmod(best, W), axis=1) \
        - np.stack(np.divmod(np.arange(H * W), W), axis=1)  # (n, 2)
    if periodic:
        size = np.array([H, W])
        D = (D + size // 2) % size - size // 2
    return D


@boundary(img=floats(ndim=2), k=positive_int(), checks=(_odd_window,))
def pixel_features(img, k=5):
    """A fixed stand-in for RAFT's feature encoder: one vector per pixel.

    The feature of a pixel is its ``k × k`` neighbourhood (wrapping around
    the border), with its mean subtracted and scaled to unit length. The same
    function encodes both frames, like RAFT's shared encoder, whose weights
    are learned instead.

    ``img`` (H, W) -> ``F`` (H, W, k²), for an odd ``k`` no larger than the
    image (``ValueError`` otherwise).
    """
    padded = np.pad(img, k // 2, mode="wrap")
    win = np.lib.stride_tricks.sliding_window_view(padded, (k, k))  # (H,W,k,k)
    F = win.reshape(*img.shape, k * k)                              # (H,W,k²)
    return normalize(F - F.mean(axis=-1, keepdims=True))


@boundary(F1=floats(ndim=3), F2=floats(ndim=3), checks=(_same_maps,))
def correlation_volume(F1, F2):
    """All-pairs correlations ``C[i, j, k, l] = F1[i, j] · F2[k, l]``.

    RAFT's 4-D volume: the dot product of every feature of frame 1 with
    every feature of frame 2, no scaling, no softmax. Reshaped to
    (H·W, H·W) it is a score matrix ``Q Kᵀ`` with ``Q = F1`` and ``K = F2``
    (chapter 10).

    Parameters
    ----------
    F1, F2 : array_like, shape (H, W, D)

    Returns
    -------
    C : ndarray, shape (H, W, H, W)
        ``(H·W)²`` entries.

    Raises
    ------
    TypeError, ValueError
        If a map is not a finite real array of shape (H, W, D), or the two
        shapes differ.
    """
    H, W, D = F1.shape
    C = F1.reshape(H * W, D) @ F2.reshape(H * W, D).T     # (H·W, H·W): Q Kᵀ
    return C.reshape(H, W, H, W)                          # (H, W, H, W)


@boundary(C=floats(ndim=4), periodic=instance(bool),
          checks=(_square_volume,))
def argmax_flow(C, periodic=True):
    """The flow that picks, for each pixel, its best-correlated pixel.

    ``C`` (H, W, H, W), a :func:`correlation_volume` -> ``(d_row, d_col)``
    per pixel, an int array of shape (H, W, 2); ``periodic`` as in
    :func:`displacements`.
    """
    H, W = C.shape[:2]
    D = displacements(C.reshape(H * W, H * W), (H, W), periodic)
    return D.reshape(H, W, 2)


@boundary(C=floats(ndim=4), flow=ints(ndim=3), radius=integer(0),
          checks=(_square_volume, _flow_fits))
def lookup(C, flow, radius):
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
        At least 0.

    Returns
    -------
    L : ndarray, shape (H, W, (2·radius + 1)²)
        Offsets ordered row-major, from ``(-radius, -radius)``; the centre,
        index ``(2·radius + 1)² // 2``, is offset (0, 0).

    Raises
    ------
    TypeError
        If ``flow`` is not an integer array or ``radius`` not an integer.
    ValueError
        If the shapes do not fit or ``radius`` is negative.
    """
    H, W = C.shape[:2]
    ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")  # (H, W)
    d = np.arange(-radius, radius + 1)                    # (2r+1,)
    dy, dx = np.meshgrid(d, d, indexing="ij")             # (2r+1, 2r+1)
    dy, dx = dy.ravel(), dx.ravel()                       # ((2r+1)²,)
    ty = (ys[..., None] + flow[..., :1] + dy) % H         # (H, W, (2r+1)²)
    tx = (xs[..., None] + flow[..., 1:] + dx) % W         # (H, W, (2r+1)²)
    return C[ys[..., None], xs[..., None], ty, tx]        # (H, W, (2r+1)²)


@boundary(offsets=floats(min_ndim=1), omegas=floats(ndim=1),
          checks=(_pairs_of_coordinates,))
def offset_encoding(offsets, omegas=(np.pi / 8, np.pi / 4, np.pi / 2)):
    """Encode 2-D offsets so that a dot product measures their closeness.

    Each coordinate ``o`` becomes ``(cos ωo, sin ωo)`` for every frequency
    ``ω``, so ``e(o) · e(o') = Σ_ω [cos ω(o_r − o'_r) + cos ω(o_c − o'_c)]``,
    which is largest, ``2·len(omegas)``, when the offsets agree (and, with
    the default frequencies, only then for differences below 16).

    ``offsets`` (..., 2) -> ``E`` (..., 4·len(omegas)).
    """
    angles = offsets[..., :, None] * omegas               # (..., 2, F)
    E = np.concatenate([np.cos(angles), np.sin(angles)], axis=-1)
    return E.reshape(*offsets.shape[:-1], -1)             # (..., 4F)
