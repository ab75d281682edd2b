"""Boolean attention masks: ``mask[i, j]`` is True when query ``i`` may use
key ``j``; grid tokens are numbered row-major (:ref:`ch-masks`)."""

import numpy as np

from ._validate import (boundary, divides, grid_shape, integer, ints, one_of,
                        positive_int, require)

__all__ = ["causal_mask", "padding_mask", "local_mask", "grid_positions",
           "window_ids", "window_mask", "neighborhood_mask", "MASK_KINDS",
           "mask_of_kind"]


@boundary(n=positive_int())
def causal_mask(n):
    """Query ``i`` may use keys ``j ≤ i``: a lower-triangular (n, n) mask."""
    return np.tril(np.ones((n, n), dtype=bool))


def _lengths_fit(lengths, n) -> None:
    require(((lengths >= 1) & (lengths <= n)).all(), f"lengths must each lie "
            f"in 1..{n} (a token needs a real key), got {lengths.tolist()}")


@boundary(lengths=ints(ndim=1), n=positive_int(), checks=(_lengths_fit,))
def padding_mask(lengths, n):
    """Hide padding tokens: a (B, n, n) mask from each item's real length."""
    keep = np.arange(n)[None, :] < lengths[:, None]          # (B, n)
    return np.repeat(keep[:, None, :], n, axis=1)            # (B, n, n)


@boundary(n=positive_int(), radius=integer(0))
def local_mask(n, radius):
    """Query ``i`` may use keys with ``|i - j| ≤ radius``: a band (1-D)."""
    i = np.arange(n)
    return np.abs(i[:, None] - i[None, :]) <= radius         # (n, n)


@boundary(grid=grid_shape())
def grid_positions(grid):
    """Row and column of each token of a row-major (H, W) grid: (H·W, 2)."""
    H, W = grid
    return np.stack(np.divmod(np.arange(H * W), W), axis=1)  # (n, 2)


@boundary(grid=grid_shape(), radius=integer(0))
def neighborhood_mask(grid, radius):
    """Each token may use the patches up to ``radius`` rows and columns away."""
    rc = grid_positions(grid)                                # (n, 2)
    offset = np.abs(rc[:, None, :] - rc[None, :, :])         # (n, n, 2)
    return (offset <= radius).all(axis=-1)                   # (n, n)


def tiles(grid, M) -> None:
    """Windows of ``M × M`` patches tile the grid exactly."""
    divides("M", M, grid, "both sides of the grid")


@boundary(grid=grid_shape(), M=positive_int(), checks=(tiles,))
def window_ids(grid, M):
    """Window of each token of a row-major grid, windows numbered row-major."""
    r, c = grid_positions(grid).T                            # (n,) each
    return (r // M) * (grid[1] // M) + c // M                # (n,)


@boundary(grid=grid_shape(), M=positive_int(), checks=(tiles,))
def window_mask(grid, M):
    """Each token may use only the tokens of its own ``M × M`` window."""
    ids = window_ids(grid, M)                                # (n,)
    return ids[:, None] == ids[None, :]                      # (n, n)


#: The kinds :func:`mask_of_kind` accepts, each named after its function.
MASK_KINDS = ("none", "causal", "neighborhood", "window")


@boundary(kind=one_of(*MASK_KINDS), grid=grid_shape(), M=positive_int(),
          radius=integer(0),
          checks=(lambda kind, grid, M: kind != "window" or tiles(grid, M),))
def mask_of_kind(kind, grid, M=4, radius=1):
    """One of the masks of a patch grid, chosen by name: windows of ``M × M``
    patches, or neighbourhoods of ``radius`` patches; the other is unused."""
    n = grid[0] * grid[1]
    if kind == "causal":
        return causal_mask(n)
    if kind == "neighborhood":
        return neighborhood_mask(grid, radius)
    if kind == "window":
        return window_mask(grid, M)
    return np.ones((n, n), dtype=bool)
