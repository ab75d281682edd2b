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
  :func:`relative_position_bias`).

Tokens of a grid are numbered row-major, as in
:func:`selfattention.patches.patchify`.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._legacy import as_float_array, positive_int

__all__ = ["sinusoidal_1d", "sinusoidal_2d", "relative_offsets",
           "relative_position_index", "relative_position_bias"]


def sinusoidal_1d(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    """The transformer's sinusoidal encoding of positions ``0 … n-1``.

    Column pair ``(2i, 2i+1)`` holds ``sin`` and ``cos`` of
    ``pos / base**(2i/d)``: a wavelength that grows geometrically from
    ``2π`` to about ``2π·base`` along the columns (chapter 5, Eq. 3).

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
    n, d = positive_int(n, "n"), positive_int(d, "d")
    if d % 2:
        raise ValueError(f"d must be even (sin and cos come in pairs), got {d}")
    if isinstance(base, bool) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a real number, got {base!r}")
    if not np.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    pos = np.arange(n)[:, None]                          # (n, 1)
    freq = float(base) ** (-np.arange(0, d, 2) / d)      # (d/2,)
    angle = pos * freq                                   # (n, d/2)
    E = np.empty((n, d))
    E[:, 0::2] = np.sin(angle)
    E[:, 1::2] = np.cos(angle)
    return E


def sinusoidal_2d(rows: int, cols: int, d: int,
                  base: float = 10000.0) -> np.ndarray:
    """Two-dimensional sinusoidal encoding of a row-major patch grid.

    The first ``d/2`` columns encode the patch's row with
    :func:`sinusoidal_1d`, the last ``d/2`` its column, so two patches in
    the same row share half of their encoding (chapter 5).

    Parameters
    ----------
    rows, cols : int
        Patch grid.
    d : int
        Width of the encoding; must be divisible by 4.
    base : float
        As in :func:`sinusoidal_1d`.

    Returns
    -------
    E : ndarray, shape (rows·cols, d)
        Row ``r·cols + c`` encodes patch (r, c).

    Raises
    ------
    TypeError, ValueError
        As :func:`sinusoidal_1d`, and if ``d`` is not divisible by 4.
    """
    rows, cols = positive_int(rows, "rows"), positive_int(cols, "cols")
    d = positive_int(d, "d")
    if d % 4:
        raise ValueError(
            f"d must be divisible by 4 (half for rows, half for columns, "
            f"each in sin/cos pairs), got {d}"
        )
    E_row = sinusoidal_1d(rows, d // 2, base)            # (rows, d/2)
    E_col = sinusoidal_1d(cols, d // 2, base)            # (cols, d/2)
    r, c = np.divmod(np.arange(rows * cols), cols)
    return np.concatenate([E_row[r], E_col[c]], axis=1)  # (rows·cols, d)


def relative_offsets(rows: int, cols: int) -> np.ndarray:
    """Offset from key to query for every pair of patches of a grid.

    Returns
    -------
    offsets : ndarray of int, shape (rows·cols, rows·cols, 2)
        ``offsets[i, j] = (r_i - r_j, c_i - c_j)``, each component in
        ``-(rows-1) … rows-1`` and ``-(cols-1) … cols-1``.
    """
    rows, cols = positive_int(rows, "rows"), positive_int(cols, "cols")
    rc = np.stack(np.divmod(np.arange(rows * cols), cols), axis=1)  # (n, 2)
    return rc[:, None, :] - rc[None, :, :]                         # (n, n, 2)


def relative_position_index(rows: int, cols: int) -> np.ndarray:
    """Index of each query-key offset in a table of ``(2R-1)(2C-1)`` entries.

    The offset ``(Δr, Δc)`` of :func:`relative_offsets` is shifted to start
    at zero and numbered row-major in a ``(2·rows-1) × (2·cols-1)`` table,
    so pairs of patches with the same offset share one entry (the scheme of
    Swin's relative position bias, chapters 5 and 7).

    Returns
    -------
    index : ndarray of int, shape (rows·cols, rows·cols)
        Entries in ``0 … (2·rows-1)(2·cols-1) - 1``; the diagonal (offset
        zero) points at the table's centre.
    """
    off = relative_offsets(rows, cols)                   # (n, n, 2)
    dr = off[..., 0] + rows - 1                          # 0 … 2·rows-2
    dc = off[..., 1] + cols - 1                          # 0 … 2·cols-2
    return dr * (2 * cols - 1) + dc


def relative_position_bias(table, rows: int, cols: int) -> np.ndarray:
    """Expand a table of per-offset biases into a score bias ``B``.

    Parameters
    ----------
    table : array_like, shape (..., 2·rows-1, 2·cols-1)
        One bias per offset ``(Δr, Δc)``; entry ``[..., Δr + rows-1,
        Δc + cols-1]``. Leading axes (for example one per head) are kept.
    rows, cols : int
        Patch grid.

    Returns
    -------
    B : ndarray, shape (..., rows·cols, rows·cols)
        ``B[..., i, j]`` is the table entry of the offset from key ``j`` to
        query ``i``; add it to the scaled scores (the ``bias`` argument of
        :func:`selfattention.attention.attention`).

    Raises
    ------
    TypeError
        If ``table`` is not numeric.
    ValueError
        If the last two axes of ``table`` are not ``(2·rows-1, 2·cols-1)``.
    """
    rows, cols = positive_int(rows, "rows"), positive_int(cols, "cols")
    table = as_float_array(table, "table", min_ndim=2)
    want = (2 * rows - 1, 2 * cols - 1)
    if table.shape[-2:] != want:
        raise ValueError(
            f"table must end with the axes (2·rows-1, 2·cols-1) = {want} for "
            f"a {rows}x{cols} grid, got shape {table.shape}"
        )
    flat = table.reshape(*table.shape[:-2], want[0] * want[1])  # (..., T)
    return flat[..., relative_position_index(rows, cols)]        # (..., n, n)
