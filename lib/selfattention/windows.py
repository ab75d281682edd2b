"""Window attention, shifted windows and patch merging as in Swin
(:ref:`ch-windows`): grids ``(..., H, W, C)``, tokens and windows row-major.
"""

from __future__ import annotations

import numpy as np

from ._validate import (Constraint, boundary, divides, floats, grid_shape,
                        integer, optional, positive_int, require)
from .attention import heads_fit, multi_head_attention
from .masks import tiles
from .position import relative_position_bias

__all__ = ["window_partition", "window_reverse", "cyclic_shift",
           "reverse_cyclic_shift", "region_labels", "rolled_window_masks",
           "padded_window_ids", "shifted_window_mask", "shifted_window_bias",
           "window_attention", "layer_norm", "patch_merging"]


# ------------------------------------------------------------------ checks
def _tokens(value, name):
    """An array of numbers or booleans (dtype kept), at least 3 axes."""
    arr = np.asarray(value)
    if not (arr.dtype == bool or np.issubdtype(arr.dtype, np.number)):
        raise TypeError(f"{name} must be an array of numbers, got dtype "
                        f"{arr.dtype}")
    if arr.ndim < 3:
        raise ValueError(f"{name} must have at least 3 axes, got shape "
                         f"{arr.shape}")
    return arr


_GRID_ARRAY = Constraint(
    _tokens, "an array of numbers with at least 3 axes",
    valid=lambda: np.ones((2, 2, 2)),
    invalid=lambda: [(np.full((2, 2, 2), "text"), TypeError),
                     (np.ones((2, 2)), ValueError)])
_SHIFTED = dict(grid=grid_shape(), M=positive_int(), shift=integer(0))


def _tiles_x(x, M) -> None:
    divides("M", M, x.shape[-3:-1], "both sides of the grid of x")


def _shift_fits(M, shift) -> None:
    require(shift < M, f"shift must lie in 0..M-1 = 0..{M - 1} patches (Swin "
                       f"uses M // 2), got {shift}")


def _table_fits(M, table=None, h=None, name="table") -> None:
    """A relative position table (h, 2M-1, 2M-1), if given."""
    if table is not None:
        want = (h or table.shape[0], 2 * M - 1, 2 * M - 1)
        require(table.shape == want, f"{name} must have shape (h, 2M-1, "
                f"2M-1) = {want}, got shape {table.shape}")


_SHIFT_FITS = (tiles, _shift_fits)


# ------------------------------------------------------------------ windows
@boundary(x=_GRID_ARRAY, M=positive_int(), checks=(_tiles_x,))
def window_partition(x, M):
    """Cut a patch grid into non-overlapping ``M × M`` windows.

    (..., H, W, C) -> (..., (H/M)·(W/M), M², C), windows row-major.
    """
    *batch, H, W, C = x.shape
    x = x.reshape(*batch, H // M, M, W // M, M, C)  # (..., H/M, M, W/M, M, C)
    x = np.swapaxes(x, -4, -3)                       # (..., H/M, W/M, M, M, C)
    return x.reshape(*batch, -1, M * M, C)           # (..., nW, M², C)


def _windows_fit(windows, grid, M) -> None:
    want = ((grid[0] // M) * (grid[1] // M), M * M)
    require(windows.shape[-3:-1] == want, f"windows must have shape (..., "
            f"(H/M)·(W/M), M², C) for grid {grid} and M={M}, got shape "
            f"{windows.shape}")


@boundary(windows=_GRID_ARRAY, grid=grid_shape(), M=positive_int(),
          checks=(tiles, _windows_fit))
def window_reverse(windows, grid, M):
    """Put the windows back on the grid: undo the window partition."""
    H, W = grid
    *batch, _, _, C = windows.shape                  # (..., nW, M², C)
    x = windows.reshape(*batch, H // M, W // M, M, M, C)
    # (..., H/M, W/M, M, M, C)
    x = np.swapaxes(x, -4, -3)                       # (..., H/M, M, W/M, M, C)
    return x.reshape(*batch, H, W, C)                # (..., H, W, C)


# ------------------------------------------------------------------ shift
@boundary(x=_GRID_ARRAY, shift=integer(0))
def cyclic_shift(x, shift):
    """Roll a patch grid up and left by ``shift`` patches."""
    return np.roll(x, (-shift, -shift), axis=(-3, -2))  # up and left


@boundary(x=_GRID_ARRAY, shift=integer(0))
def reverse_cyclic_shift(x, shift):
    """Roll down and right by ``shift`` patches: undo the cyclic shift."""
    return np.roll(x, (shift, shift), axis=(-3, -2))    # down and right


@boundary(checks=_SHIFT_FITS, **_SHIFTED)
def region_labels(grid, M, shift):
    """Region of every token of the rolled grid: 3 strips per axis, 9 labels."""
    if shift == 0:
        return np.zeros(grid, dtype=int)           # no roll: one region

    def strips(n):
        strip = np.zeros(n, dtype=int)             # [0, n-M): whole windows
        strip[n - M:] = 1                          # the grid's former end
        strip[n - shift:] = 2                      # wrapped from the start
        return strip

    H, W = grid
    return 3 * strips(H)[:, None] + strips(W)[None, :]       # (H, W)


@boundary(checks=_SHIFT_FITS, **_SHIFTED)
def rolled_window_masks(grid, M, shift):
    """Masks of the windows of the rolled grid: same region, may attend."""
    labels = region_labels(grid, M, shift)[..., None]        # (H, W, 1)
    win = window_partition(labels, M)[..., 0]                # (nW, M²)
    return win[:, :, None] == win[:, None, :]                # (nW, M², M²)


@boundary(checks=_SHIFT_FITS, **_SHIFTED)
def padded_window_ids(grid, M, shift):
    """Shifted window of every token of the unrolled grid."""
    H, W = grid
    pad = (M - shift) % M                          # patches before the grid
    rows = (np.arange(H) + pad) // M               # (H,) window row
    cols = (np.arange(W) + pad) // M               # (W,) window column
    per_row = (W + pad + M - 1) // M               # windows along a row
    return rows[:, None] * per_row + cols[None, :]           # (H, W)


@boundary(checks=_SHIFT_FITS, **_SHIFTED)
def shifted_window_mask(grid, M, shift):
    """Tokens may use the tokens of their shifted window, on the whole grid."""
    ids = padded_window_ids(grid, M, shift).ravel()          # (n,)
    return ids[:, None] == ids[None, :]                      # (n, n)


@boundary(table=floats(ndim=3), checks=_SHIFT_FITS + (_table_fits,),
          **_SHIFTED)
def shifted_window_bias(table, grid, M, shift):
    """The relative position bias of the (shifted) windows, on the whole grid.
    """
    (H, W), h = grid, table.shape[0]
    full = np.zeros((h, 2 * H - 1, 2 * W - 1))     # every offset of the grid
    full[:, H - M:H + M - 1, W - M:W + M - 1] = table        # |Δ| < M
    bias = relative_position_bias(full, grid)                # (h, n, n)
    return np.where(shifted_window_mask(grid, M, shift), bias, 0.0)


# ------------------------------------------------------------------ attention
@boundary(x=floats(min_ndim=3), W_q=floats(ndim=2), W_k=floats(ndim=2),
          W_v=floats(ndim=2), W_o=floats(ndim=2), h=positive_int(),
          M=positive_int(), shift=integer(0),
          bias_table=optional(floats(ndim=3)),
          checks=(_tiles_x, _shift_fits,
                  lambda x, W_q, W_k, W_v, W_o, h: heads_fit(
                      x, W_q, W_k, W_v, W_o, h, tokens="x"),
                  lambda M, bias_table, h: _table_fits(M, bias_table, h,
                                                       "bias_table")))
def window_attention(x, W_q, W_k, W_v, W_o, h, M, shift=0, bias_table=None):
    """Multi-head self-attention inside ``M × M`` windows (:ref:`ch-windows`).

    x (..., H, W, C), ``bias_table`` (h, 2M-1, 2M-1) -> outputs
    (..., H, W, d_out) and weights (..., (H/M)·(W/M), h, M², M²).
    """
    bias = None if bias_table is None else relative_position_bias(
        bias_table, (M, M))                                  # (h, M², M²)
    grid = x.shape[-3:-1]
    windows = window_partition(cyclic_shift(x, shift), M)    # (..., nW, M², C)
    mask = rolled_window_masks(grid, M, shift)[:, None] if shift else None
    # mask: (nW, 1, M², M²), one per window, shared by the heads
    Y, A = multi_head_attention(windows, W_q, W_k, W_v, W_o, h, mask=mask,
                                bias=bias)                   # (..., nW, M², d)
    Y = window_reverse(Y, grid, M)                           # (..., H, W, d)
    return reverse_cyclic_shift(Y, shift), A


# ------------------------------------------------------------------ hierarchy
def layer_norm(x, eps=1e-5):
    """Normalise the last axis to mean 0, variance 1 (no learned scale)."""
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)


def _merging_fits(x, W_merge) -> None:
    (H, W, C), rows = x.shape[-3:], W_merge.shape[0]
    require(H % 2 == 0 and W % 2 == 0 and rows == 4 * C, f"patch merging "
            f"needs an even grid and 4C = {4 * C} rows in W_merge, got x of "
            f"shape {x.shape}, W_merge of shape {W_merge.shape}")


@boundary(x=floats(min_ndim=3), W_merge=floats(ndim=2),
          checks=(_merging_fits,))
def patch_merging(x, W_merge):
    """Concatenate each 2 × 2 neighbourhood, then map 4C -> 2C.

    (..., H, W, C) -> (..., H/2, W/2, C') with ``W_merge`` (4C, C').
    """
    x0 = x[..., 0::2, 0::2, :]                   # (..., H/2, W/2, C) top-left
    x1 = x[..., 1::2, 0::2, :]                   # bottom-left
    x2 = x[..., 0::2, 1::2, :]                   # top-right
    x3 = x[..., 1::2, 1::2, :]                   # bottom-right
    z = np.concatenate([x0, x1, x2, x3], axis=-1)   # (..., H/2, W/2, 4C)
    return layer_norm(z) @ W_merge                  # (..., H/2, W/2, C')
