"""Matching two images by cross-attention and correlation volumes
(:ref:`ch-matching`); displacements are (row, col), down and right positive.
"""

from __future__ import annotations

import numpy as np

from ._validate import (boundary, floats, grid_shape, instance, integer,
                        ints, positive_int, require, same_shape)

__all__ = ["normalize", "displacements", "pixel_features",
           "correlation_volume", "argmax_flow", "lookup"]


@boundary(X=floats(min_ndim=1))
def normalize(X):
    """Scale every token (last axis) to unit length; zero rows stay zero."""
    norm = np.linalg.norm(X, axis=-1, keepdims=True)
    return X / np.where(norm > 0, norm, 1.0)


@boundary(S=floats(ndim=2), grid=grid_shape(),
          periodic=instance(bool),
          checks=(lambda S, grid: require(
              S.shape == (grid[0] * grid[1],) * 2, f"S must have shape (n, n) "
              f"with n = H·W for the grid {grid}, got {S.shape}"),))
def displacements(S, grid, periodic=True):
    """Where each query's strongest key lies, relative to the query."""
    H, W = grid
    best = np.argmax(S, axis=1)                           # (n,) key index
    D = np.stack(np.divmod(best, W), axis=1) \
        - np.stack(np.divmod(np.arange(H * W), W), axis=1)  # (n, 2)
    if periodic:
        size = np.array([H, W])
        D = (D + size // 2) % size - size // 2
    return D


@boundary(img=floats(ndim=2), k=positive_int(), checks=(lambda img, k: require(
              k % 2 == 1 and k <= min(img.shape), f"k must be odd and no "
              f"larger than the image {img.shape}, got k={k}"),))
def pixel_features(img, k=5):
    """A fixed stand-in for RAFT's shared feature encoder."""
    padded = np.pad(img, k // 2, mode="wrap")
    win = np.lib.stride_tricks.sliding_window_view(padded, (k, k))  # (H,W,k,k)
    F = win.reshape(*img.shape, k * k)                              # (H,W,k²)
    return normalize(F - F.mean(axis=-1, keepdims=True))


@boundary(F1=floats(ndim=3), F2=floats(ndim=3),
          checks=(lambda F1, F2: same_shape(F1=F1, F2=F2),))
def correlation_volume(F1, F2):
    """All-pairs correlations ``C[i, j, k, l] = F1[i, j] · F2[k, l]``."""
    H, W, D = F1.shape
    C = F1.reshape(H * W, D) @ F2.reshape(H * W, D).T     # (H·W, H·W): Q Kᵀ
    return C.reshape(H, W, H, W)                          # (H, W, H, W)


def _volume_fits(C, flow=None) -> None:
    """A correlation volume (H, W, H, W) and a flow (H, W, 2), if given."""
    require(C.shape[:2] == C.shape[2:], f"C must have shape (H, W, H, W), "
                                        f"got {C.shape}")
    require(flow is None or flow.shape == C.shape[:2] + (2,), f"flow must "
            f"have shape {C.shape[:2] + (2,)}, one (d_row, d_col) per pixel, "
            f"got {getattr(flow, 'shape', None)}")


@boundary(C=floats(ndim=4), periodic=instance(bool),
          checks=(_volume_fits,))
def argmax_flow(C, periodic=True):
    """Each pixel's displacement to its best-correlated pixel."""
    H, W = C.shape[:2]
    D = displacements(C.reshape(H * W, H * W), (H, W), periodic)
    return D.reshape(H, W, 2)


@boundary(C=floats(ndim=4), flow=ints(ndim=3), radius=integer(0),
          checks=(_volume_fits,))
def lookup(C, flow, radius):
    """Read the correlations around where the flow says each pixel went."""
    H, W = C.shape[:2]
    ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")  # (H, W)
    d = np.arange(-radius, radius + 1)                    # (2r+1,)
    dy, dx = np.meshgrid(d, d, indexing="ij")             # (2r+1, 2r+1)
    dy, dx = dy.ravel(), dx.ravel()                       # ((2r+1)²,)
    ty = (ys[..., None] + flow[..., :1] + dy) % H         # (H, W, (2r+1)²)
    tx = (xs[..., None] + flow[..., 1:] + dx) % W         # (H, W, (2r+1)²)
    return C[ys[..., None], xs[..., None], ty, tx]        # (H, W, (2r+1)²)
