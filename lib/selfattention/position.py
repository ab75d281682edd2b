"""Position: sinusoidal encodings for the tokens, and the relative position
bias for the scores, its table ``(h, 2H - 1, 2W - 1)`` (:ref:`ch-position` and
:ref:`ch-windows`)."""

import numpy as np

from ._validate import (boundary, floats, grid_shape, number, positive_int,
                        require)
from .masks import grid_positions

__all__ = ["sinusoidal_1d", "sinusoidal_2d", "relative_offsets",
           "relative_position_index", "relative_position_bias"]


@boundary(n=positive_int(), d=positive_int(), base=number(1, strict=True),
          checks=(lambda d: require(d % 2 == 0, f"d must be even (sin and cos "
                                                f"come in pairs), got {d}"),))
def sinusoidal_1d(n, d, base=10000.0):
    """The transformer's sinusoidal encoding of positions ``0 … n-1``: columns
    ``2i`` and ``2i+1`` hold sin and cos of ``pos / base**(2i/d)``
    (:ref:`ch-position`)."""
    pos = np.arange(n)[:, None]                          # (n, 1)
    freq = float(base) ** (-np.arange(0, d, 2) / d)      # (d/2,)
    E = np.empty((n, d))
    E[:, 0::2] = np.sin(pos * freq)                      # (n, d/2)
    E[:, 1::2] = np.cos(pos * freq)
    return E


@boundary(grid=grid_shape(), d=positive_int(), base=number(1, strict=True),
          checks=(lambda d: require(d % 4 == 0, f"d must be divisible by 4 "
                    f"(half for rows, half for columns, each in sin/cos "
                    f"pairs), got {d}"),))
def sinusoidal_2d(grid, d, base=10000.0):
    """Two-dimensional sinusoidal encoding of a row-major patch grid: the row
    in the first ``d/2`` columns, the column in the last
    (:ref:`ch-position`)."""
    H, W = grid
    r, c = grid_positions(grid).T                        # (n,) each
    E_row = sinusoidal_1d(H, d // 2, base)[r]            # (n, d/2)
    E_col = sinusoidal_1d(W, d // 2, base)[c]            # (n, d/2)
    return np.concatenate([E_row, E_col], axis=1)        # (n, d)


@boundary(grid=grid_shape())
def relative_offsets(grid):
    """Offset from key to query for every pair of patches of a grid."""
    rc = grid_positions(grid)                            # (n, 2)
    return rc[:, None, :] - rc[None, :, :]               # (n, n, 2)


@boundary(grid=grid_shape())
def relative_position_index(grid):
    """Index of each query-key offset in a table of ``(2H-1)(2W-1)`` entries."""
    H, W = grid
    off = relative_offsets(grid)                         # (n, n, 2)
    return (off[..., 0] + H - 1) * (2 * W - 1) + off[..., 1] + W - 1


@boundary(table=floats(min_ndim=2), grid=grid_shape(),
          checks=(lambda table, grid: require(
              table.shape[-2:] == (2 * grid[0] - 1, 2 * grid[1] - 1),
              f"table must end with the axes (2H-1, 2W-1) for the grid "
              f"{grid}, got shape {table.shape}"),))
def relative_position_bias(table, grid):
    """Expand a table of per-offset biases (h, 2H-1, 2W-1), offset ``(Δr, Δc)``
    at ``[..., Δr + H - 1, Δc + W - 1]``, into a score bias ``B`` of shape
    (h, H·W, H·W) (:ref:`ch-windows`)."""
    flat = table.reshape(*table.shape[:-2], -1)          # (h, (2H-1)(2W-1))
    return flat[..., relative_position_index(grid)]      # (h, n, n)
