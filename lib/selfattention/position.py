"""Position information for a permutation-equivariant layer (chapter 5).

Self-attention treats its tokens as a set: shuffling them shuffles the
outputs and changes nothing else. Position must therefore be supplied from
outside, and this module builds the usual ways of doing so:

* absolute encodings added to the tokens: the sinusoidal encoding of the
  transformer (:func:`sinusoidal_1d`) and its two-dimensional version for a
  patch grid (:func:`sinusoidal_2d`); learned embeddings are a trainable
  table of the same shape (see :mod:`selfattention.vit`);
* a relative position bias added to the scores, one learned number per
  offset between two patches, as in Swin (:func:`relative_position_index`,
  :func:`relative_position_bias`). Its table has one layout everywhere in
  the library: ``(h, 2H - 1, 2W - 1)``, heads first.

A grid is ``(H, W)`` patches; its tokens are numbered row-major, as in
:func:`selfattention.patches.patchify`.
"""

from __future__ import annotations

import numpy as np

from ._validate import boundary, floats, grid, number, positive_int
from .masks import grid_positions

__all__ = ["sinusoidal_1d", "sinusoidal_2d", "relative_offsets",
           "relative_position_index", "relative_position_bias"]

_BASE = number(1, strict=True)


def _pairs_of(k: int, why: str):
    def check(args) -> None:
        if args["d"] % k:
            raise ValueError(f"d must be divisible by {k} ({why}), got "
                             f"{args['d']}")

    return check


@boundary(n=positive_int(), d=positive_int(), base=_BASE,
          checks=(_pairs_of(2, "sin and cos come in pairs"),))
def sinusoidal_1d(n, d, base=10000.0):
    """The transformer's sinusoidal encoding of positions ``0 … n-1``.

    Column pair ``(2i, 2i+1)`` holds ``sin`` and ``cos`` of
    ``pos / base**(2i/d)``: a wavelength that grows geometrically from
    ``2π`` to about ``2π·base`` along the columns (chapter 5, Eq.
    ``eq-pos-sinusoid``).

    Parameters
    ----------
    n : int
        Number of positions.
    d : int
        Width of the encoding; must be even.
    base : float
        Sets the longest wavelength; 10000 in the transformer.

    Returns
    -------
    E : ndarray, shape (n, d)
        Row ``pos`` encodes position ``pos``; every entry lies in [-1, 1].

    Raises
    ------
    TypeError
        If ``n`` or ``d`` is not an integer, or ``base`` not a real number.
    ValueError
        If ``n`` or ``d`` is not positive, ``d`` is odd, or ``base`` is not
        finite and greater than 1.
    """
    pos = np.arange(n)[:, None]                          # (n, 1)
    freq = float(base) ** (-np.arange(0, d, 2) / d)      # (d/2,)
    E = np.empty((n, d))
    E[:, 0::2] = np.sin(pos * freq)                      # (n, d/2)
    E[:, 1::2] = np.cos(pos * freq)
    return E


@boundary(grid=grid(), d=positive_int(), base=_BASE,
          checks=(_pairs_of(4, "half for rows, half for columns, each in "
                               "sin/cos pairs"),))
def sinusoidal_2d(grid, d, base=10000.0):
    """Two-dimensional sinusoidal encoding of a row-major patch grid.

    The first ``d/2`` columns encode the patch's row with
    :func:`sinusoidal_1d`, the last ``d/2`` its column, so two patches in
    the same row share half of their encoding (chapter 5).

    Parameters
    ----------
    grid : (int, int)
        Patch grid ``(H, W)``.
    d : int
        Width of the encoding; must be divisible by 4.
    base : float
        As in :func:`sinusoidal_1d`.

    Returns
    -------
    E : ndarray, shape (H·W, d)
        Row ``r·W + c`` encodes patch (r, c).

    Raises
    ------
    TypeError, ValueError
        As :func:`sinusoidal_1d`, and if ``d`` is not divisible by 4 or
        ``grid`` is not a pair of positive integers.
    """
    H, W = grid
    r, c = grid_positions(grid).T                        # (n,) each
    E_row = sinusoidal_1d(H, d // 2, base)[r]            # (n, d/2)
    E_col = sinusoidal_1d(W, d // 2, base)[c]            # (n, d/2)
    return np.concatenate([E_row, E_col], axis=1)        # (n, d)


@boundary(grid=grid())
def relative_offsets(grid):
    """Offset from key to query for every pair of patches of a grid.

    Returns
    -------
    offsets : ndarray of int, shape (H·W, H·W, 2)
        ``offsets[i, j] = (r_i - r_j, c_i - c_j)``, each component in
        ``-(H-1) … H-1`` and ``-(W-1) … W-1``.
    """
    rc = grid_positions(grid)                            # (n, 2)
    return rc[:, None, :] - rc[None, :, :]               # (n, n, 2)


@boundary(grid=grid())
def relative_position_index(grid):
    """Index of each query-key offset in a table of ``(2H-1)(2W-1)`` entries.

    The offset ``(Δr, Δc)`` of :func:`relative_offsets` (query minus key)
    is shifted to start at zero and numbered row-major in a
    ``(2H-1) × (2W-1)`` table: ``(Δr + H - 1)·(2W - 1) + (Δc + W - 1)``,
    so pairs of patches with the same offset share one entry. For a window
    ``grid = (M, M)`` this is the index of Swin's released code (chapters 5
    and 8).

    Returns
    -------
    index : ndarray of int, shape (H·W, H·W)
        Entries in ``0 … (2H-1)(2W-1) - 1``; the diagonal (offset zero)
        points at the table's centre.
    """
    H, W = grid
    off = relative_offsets(grid)                         # (n, n, 2)
    return (off[..., 0] + H - 1) * (2 * W - 1) + off[..., 1] + W - 1


def _table_fits(args) -> None:
    (H, W), table = args["grid"], args["table"]
    want = (2 * H - 1, 2 * W - 1)
    if table.shape[-2:] != want:
        raise ValueError(f"table must end with the axes (2H-1, 2W-1) = "
                         f"{want} for a {H}x{W} grid, got shape "
                         f"{table.shape}")


@boundary(table=floats(min_ndim=2), grid=grid(), checks=(_table_fits,))
def relative_position_bias(table, grid):
    """Expand a table of per-offset biases into a score bias ``B``.

    Parameters
    ----------
    table : array_like, shape (h, 2H-1, 2W-1)
        One bias per head and offset ``(Δr, Δc)``, at ``[..., Δr + H - 1,
        Δc + W - 1]``. Any leading axes are kept: ``(2H-1, 2W-1)`` gives one
        bias shared by every head.
    grid : (int, int)
        Patch grid ``(H, W)``.

    Returns
    -------
    B : ndarray, shape (h, H·W, H·W)
        ``B[..., i, j]`` is the table entry of the offset from key ``j`` to
        query ``i``; add it to the scaled scores (the ``bias`` argument of
        :func:`selfattention.attention.attention`).

    Raises
    ------
    TypeError
        If ``table`` is not numeric.
    ValueError
        If ``table`` is not finite or its last two axes are not
        ``(2H-1, 2W-1)``.
    """
    flat = table.reshape(*table.shape[:-2], -1)          # (h, (2H-1)(2W-1))
    return flat[..., relative_position_index(grid)]      # (h, n, n)
