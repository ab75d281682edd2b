"""Window attention and shifted windows on a patch grid (chapter 7).

Swin restricts self-attention to disjoint ``M × M`` tiles of the patch grid
and, in alternate blocks, moves the tiling by ``⌊M/2⌋`` patches so that
neighbouring tiles exchange information. This module
holds every piece of that recipe, in NumPy, on grids of shape
``(..., H, W, C)`` (any leading batch dimensions, ``H × W`` patches of width
``C``):

* :func:`window_partition` and :func:`window_reverse` cut the grid into
  windows of ``M²`` tokens and put them back;
* :func:`cyclic_shift` and :func:`reverse_cyclic_shift` roll the grid so the
  shifted windows become regular ones again;
* :func:`shift_region_labels` and :func:`shifted_window_mask` build the mask
  that stops tokens brought together by the roll from attending to each
  other; :func:`padded_window_ids` and :func:`shifted_grid_mask` give the
  same rule on the unrolled grid (the "pad and mask" view);
* :func:`relative_position_index` and :func:`relative_position_bias` turn a
  learned table of shape ``((2M-1)², h)`` into the bias ``B`` of shape
  ``(h, M², M²)``;
* :func:`window_attention` is multi-head attention inside each window, with
  ``B`` and an optional shift, computed either by the cyclic shift or by
  padding the grid.

Masks follow the library's convention: **True = this query may use this
key**. Windows are numbered row-major, and so are the tokens inside a window.
"""

from __future__ import annotations

import numpy as np

from ._legacy import as_float_array, integer, positive_int
from .attention import multi_head_attention

__all__ = ["window_partition", "window_reverse", "cyclic_shift",
           "reverse_cyclic_shift", "shift_region_labels",
           "shifted_window_mask", "padded_window_ids", "shifted_grid_mask",
           "relative_position_index", "relative_position_bias",
           "grid_relative_bias", "window_attention"]


# ------------------------------------------------------------------ checks
def _window_side(M) -> int:
    return positive_int(M, "M")


def _check_tiles(H: int, W: int, M: int) -> None:
    if H % M or W % M:
        raise ValueError(
            f"windows of M={M} patches must tile the {H}x{W} grid exactly: "
            f"M must divide both sides (pad the grid or choose another M)"
        )


def _grid_array(x, name: str = "x") -> np.ndarray:
    x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(
            f"{name} must be a grid of shape (..., H, W, C), got shape "
            f"{x.shape}"
        )
    return x


def _integer_shift(shift) -> int:
    return integer(shift, "shift", "an integer number of patches")


def _shift_amount(shift, M: int) -> int:
    shift = _integer_shift(shift)
    if not 0 <= shift < M:
        raise ValueError(
            f"shift must lie in 0..M-1 = 0..{M - 1} patches (Swin uses "
            f"M // 2 = {M // 2}), got {shift}"
        )
    return shift


def _bias_table(table, M: int) -> np.ndarray:
    table = as_float_array(table, "table", min_ndim=2)
    rows = (2 * M - 1) ** 2
    if table.ndim != 2 or table.shape[0] != rows:
        raise ValueError(
            f"table must have shape ((2M-1)², h) = ({rows}, h) for M={M}, "
            f"got shape {table.shape}"
        )
    return table


def _non_negative_shift(shift) -> int:
    shift = _integer_shift(shift)
    if shift < 0:
        raise ValueError(f"shift must be non-negative, got {shift}")
    return shift


def _grid_pair(grid) -> tuple[int, int]:
    try:
        H, W = grid
    except (TypeError, ValueError):
        raise TypeError(
            f"grid must be a pair (H, W) of patch counts, got {grid!r}"
        ) from None
    return positive_int(H, "grid rows"), positive_int(W, "grid cols")


def _grid_window_shift(grid, M, shift) -> tuple[int, int, int, int]:
    """Checked ``(H, W, M, shift)``: windows tile the grid, 0 ≤ shift < M."""
    H, W = _grid_pair(grid)
    M = _window_side(M)
    _check_tiles(H, W, M)
    return H, W, M, _shift_amount(shift, M)


# ------------------------------------------------------------------ windows
def window_partition(x, M: int) -> np.ndarray:
    """Cut a patch grid into non-overlapping ``M × M`` windows (chapter 7).

    Parameters
    ----------
    x : array_like, shape (..., H, W, C)
        Patch grid: ``H × W`` tokens of width ``C``.
    M : int
        Window side in patches; must divide ``H`` and ``W``.

    Returns
    -------
    windows : ndarray, shape (..., (H/M)·(W/M), M², C)
        Windows numbered row-major over the grid; the ``M²`` tokens of a
        window are numbered row-major inside it.

    Raises
    ------
    TypeError
        If ``M`` is not an integer.
    ValueError
        If ``x`` has fewer than 3 dimensions or ``M`` does not divide the
        grid.
    """
    x = _grid_array(x)
    M = _window_side(M)
    *batch, H, W, C = x.shape
    _check_tiles(H, W, M)
    x = x.reshape(*batch, H // M, M, W // M, M, C)  # (..., H/M, M, W/M, M, C)
    x = np.moveaxis(x, -4, -3)                       # (..., H/M, W/M, M, M, C)
    nW = (H // M) * (W // M)
    return x.reshape(*batch, nW, M * M, C)           # (..., nW, M², C)


def window_reverse(windows, grid) -> np.ndarray:
    """Inverse of :func:`window_partition`: put the windows back on the grid.

    Parameters
    ----------
    windows : array_like, shape (..., nW, M², C)
        Windows as returned by :func:`window_partition`.
    grid : (int, int)
        Grid size ``(H, W)`` in patches.

    Returns
    -------
    x : ndarray, shape (..., H, W, C)

    Raises
    ------
    ValueError
        If the number of windows or their size does not fit ``grid``.
    """
    windows = np.asarray(windows)
    H, W = _grid_pair(grid)
    if windows.ndim < 3:
        raise ValueError(
            f"windows must have shape (..., nW, M², C), got shape "
            f"{windows.shape}"
        )
    *batch, nW, m2, C = windows.shape
    M = int(round(m2 ** 0.5))
    if M * M != m2:
        raise ValueError(
            f"each window must hold M² tokens for a whole M, got {m2} tokens"
        )
    _check_tiles(H, W, M)
    if nW != (H // M) * (W // M):
        raise ValueError(
            f"a {H}x{W} grid holds {(H // M) * (W // M)} windows of {M}x{M} "
            f"patches, got {nW} windows"
        )
    x = windows.reshape(*batch, H // M, W // M, M, M, C)
    # (..., H/M, W/M, M, M, C)
    x = np.moveaxis(x, -3, -4)                       # (..., H/M, M, W/M, M, C)
    return x.reshape(*batch, H, W, C)                # (..., H, W, C)


# ------------------------------------------------------------------ shift
def cyclic_shift(x, shift: int) -> np.ndarray:
    """Roll a patch grid up and left by ``shift`` patches (chapter 7).

    The token at ``(r, c)`` moves to ``((r - shift) mod H, (c - shift) mod
    W)``; the top ``shift`` rows and left ``shift`` columns wrap around to
    the bottom and right. Regular windows of the rolled grid are Swin's
    shifted windows of the original one (plus the wrapped strips, which
    :func:`shifted_window_mask` keeps apart).

    Parameters
    ----------
    x : array_like, shape (..., H, W, C)
    shift : int
        Patches to roll by, usually ``M // 2``; may be 0.

    Returns
    -------
    rolled : ndarray, shape (..., H, W, C)
    """
    x = _grid_array(x)
    shift = _non_negative_shift(shift)
    return np.roll(x, (-shift, -shift), axis=(-3, -2))


def reverse_cyclic_shift(x, shift: int) -> np.ndarray:
    """Inverse of :func:`cyclic_shift`: roll down and right by ``shift``."""
    x = _grid_array(x)
    shift = _non_negative_shift(shift)
    return np.roll(x, (shift, shift), axis=(-3, -2))


def shift_region_labels(grid, M: int, shift: int) -> np.ndarray:
    """Region label of every token of the *rolled* grid (chapter 7).

    After :func:`cyclic_shift`, each axis of the rolled grid falls into three
    strips: ``[0, H-M)`` (whole windows), ``[H-M, H-shift)`` (the end of
    the original grid) and ``[H-shift, H)`` (rows that wrapped around from
    the top). Two tokens were neighbours before the roll exactly when they
    share both strips, so the label is ``3·row_strip + col_strip`` (0 … 8).

    Parameters
    ----------
    grid : (int, int)
        Grid size ``(H, W)`` in patches.
    M : int
        Window side; must divide ``H`` and ``W``.
    shift : int
        Roll in patches, ``0 ≤ shift < M``. With 0 every label is 0.

    Returns
    -------
    labels : ndarray of int, shape (H, W)
    """
    H, W, M, shift = _grid_window_shift(grid, M, shift)
    if shift == 0:
        return np.zeros((H, W), dtype=int)

    def strips(n):
        s = np.zeros(n, dtype=int)
        s[n - M:] = 1
        s[n - shift:] = 2
        return s

    return 3 * strips(H)[:, None] + strips(W)[None, :]


def shifted_window_mask(grid, M: int, shift: int) -> np.ndarray:
    """Per-window mask of the rolled grid, built from region labels.

    Parameters
    ----------
    grid : (int, int)
        Grid size ``(H, W)`` in patches.
    M : int
        Window side; must divide ``H`` and ``W``.
    shift : int
        Roll in patches, ``0 ≤ shift < M`` (all True when 0).

    Returns
    -------
    mask : ndarray of bool, shape ((H/M)·(W/M), M², M²)
        ``mask[w, i, j]`` is True when token ``i`` of window ``w`` may attend
        to token ``j`` of the same window: both carry the same region label
        of :func:`shift_region_labels`. Every diagonal entry is True, so no
        query is left without a key.
    """
    labels = shift_region_labels(grid, M, shift)
    win = window_partition(labels[..., None], M)[..., 0]   # (nW, M²)
    return win[:, :, None] == win[:, None, :]              # (nW, M², M²)


def padded_window_ids(grid, M: int, shift: int) -> np.ndarray:
    """Shifted-window index of every token, on the original (unrolled) grid.

    The shifted windows start ``M - shift`` patches before the grid (or 0
    if ``shift`` is 0): pad the grid by ``M - shift`` patches at the top and
    left and by ``shift`` at the bottom and right, and cut regular windows.
    Along each axis that gives ``H/M + 1`` windows when ``shift > 0``, some
    of them partly padding: the "simple alternative" to the cyclic shift
    (Liu et al., 2021).

    Returns
    -------
    ids : ndarray of int, shape (H, W)
        Row-major window index among the ``(H/M + 1)·(W/M + 1)`` windows of
        the padded grid (among ``(H/M)·(W/M)`` when ``shift`` is 0).
    """
    H, W, M, shift = _grid_window_shift(grid, M, shift)
    offset = (M - shift) % M
    rows = (np.arange(H) + offset) // M
    cols = (np.arange(W) + offset) // M
    per_row = (W + offset + M - 1) // M        # windows along a row
    return rows[:, None] * per_row + cols[None, :]


def shifted_grid_mask(grid, M: int, shift: int) -> np.ndarray:
    """Shifted-window attention as one (n, n) mask on the original grid.

    Token ``i`` may attend to token ``j`` when both lie in the same shifted
    window of :func:`padded_window_ids`. With ``shift = 0`` this equals
    :func:`selfattention.masks.window_mask`. Feed it to
    :func:`selfattention.attention.multi_head_attention` over all
    ``n = H·W`` tokens to get the same result as :func:`window_attention`
    (at ``n²`` cost: a reference, not a method).

    Returns
    -------
    mask : ndarray of bool, shape (H·W, H·W)
        Tokens numbered row-major.
    """
    ids = padded_window_ids(grid, M, shift).ravel()
    return ids[:, None] == ids[None, :]


# ------------------------------------------------------------------ bias
def relative_position_index(M: int) -> np.ndarray:
    """Index into the relative position bias table for every pair (chapter 7).

    Tokens ``i = (r_i, c_i)`` and ``j = (r_j, c_j)`` of an ``M × M`` window
    differ by ``Δr = r_i - r_j`` and ``Δc = c_i - c_j``, each in
    ``-(M-1) … M-1``; the pair reads row
    ``(Δr + M - 1)·(2M - 1) + (Δc + M - 1)`` of the table.

    Returns
    -------
    index : ndarray of int, shape (M², M²)
        Values in ``0 … (2M-1)² - 1``; equal entries mean equal offsets.
    """
    M = _window_side(M)
    r, c = np.divmod(np.arange(M * M), M)
    dr = r[:, None] - r[None, :] + M - 1                   # (M², M²)
    dc = c[:, None] - c[None, :] + M - 1                   # (M², M²)
    return dr * (2 * M - 1) + dc


def relative_position_bias(table, M: int) -> np.ndarray:
    """Gather Swin's relative position bias ``B`` from its learned table.

    Parameters
    ----------
    table : array_like, shape ((2M-1)², h)
        One learned scalar per relative offset and head.
    M : int
        Window side.

    Returns
    -------
    B : ndarray, shape (h, M², M²)
        ``B[k, i, j] = table[index[i, j], k]``, added to head ``k``'s scaled
        scores inside every window.

    Raises
    ------
    ValueError
        If ``table`` does not have ``(2M-1)²`` rows and a head axis.
    """
    M = _window_side(M)
    table = _bias_table(table, M)                          # ((2M-1)², h)
    B = table[relative_position_index(M)]                  # (M², M², h)
    return np.moveaxis(B, -1, 0)                           # (h, M², M²)


def grid_relative_bias(table, grid, M: int, shift: int = 0) -> np.ndarray:
    """The relative position bias of shifted windows, on the whole grid.

    The full-grid counterpart of :func:`relative_position_bias`, for
    checking :func:`window_attention` against
    :func:`selfattention.attention.multi_head_attention` with
    :func:`shifted_grid_mask`. Two tokens of the same shifted window get
    the table entry of their offset on the original grid (the cyclic shift
    never separates them); every other pair gets 0, since the mask removes
    it anyway.

    Parameters
    ----------
    table : array_like, shape ((2M-1)², h)
    grid : (int, int)
        Grid size ``(H, W)`` in patches.
    M : int
        Window side; must divide ``H`` and ``W``.
    shift : int
        Window shift, ``0 ≤ shift < M``.

    Returns
    -------
    B : ndarray, shape (h, H·W, H·W)
    """
    H, W = _grid_pair(grid)
    M = _window_side(M)
    table = _bias_table(table, M)                          # ((2M-1)², h)
    same = shifted_grid_mask((H, W), M, shift)             # (n, n)
    r, c = np.divmod(np.arange(H * W), W)
    dr = r[:, None] - r[None, :] + M - 1                   # (n, n)
    dc = c[:, None] - c[None, :] + M - 1                   # (n, n)
    index = np.where(same, dr * (2 * M - 1) + dc, 0)       # (n, n)
    B = np.where(same[..., None], table[index], 0.0)       # (n, n, h)
    return np.moveaxis(B, -1, 0)                           # (h, n, n)


# ------------------------------------------------------------------ attention
def window_attention(x, W_q, W_k, W_v, W_o, h: int, M: int = 7,
                     shift: int = 0, bias_table=None, method: str = "cyclic"):
    """Multi-head self-attention inside ``M × M`` windows (chapter 7).

    Each token attends only to the tokens of its window; with ``shift > 0``
    the windows are Swin's shifted windows. Inside every window the scores
    are ``Q Kᵀ / √d_k + B`` with ``B`` from ``bias_table``.

    Parameters
    ----------
    x : array_like, shape (..., H, W, C)
        Patch grid.
    W_q, W_k, W_v, W_o : array_like
        Projections as in
        :func:`selfattention.attention.multi_head_attention`.
    h : int
        Number of heads.
    M : int
        Window side in patches (Swin's default is 7); must divide ``H``
        and ``W``.
    shift : int
        Window shift in patches, ``0 ≤ shift < M``; Swin uses ``M // 2`` in
        every other block.
    bias_table : array_like, shape ((2M-1)², h), optional
        Relative position bias table; no bias if omitted.
    method : {"cyclic", "pad"}
        How shifted windows are computed. ``"cyclic"`` rolls the grid, uses
        ``(H/M)·(W/M)`` windows and :func:`shifted_window_mask`; ``"pad"``
        pads the grid and uses ``(H/M + 1)·(W/M + 1)`` windows whose padded
        keys are masked. Both give the same outputs.

    Returns
    -------
    Y : ndarray, shape (..., H, W, d_out)
        Outputs, back on the original grid.
    A : ndarray, shape (..., nW, h, M², M²)
        Attention weights of every window (of the rolled or padded grid).

    Raises
    ------
    TypeError, ValueError
        As :func:`selfattention.attention.multi_head_attention`, and if
        ``M`` does not tile the grid, ``shift`` is out of range, the table
        has the wrong shape or ``method`` is unknown.
    """
    x = as_float_array(x, "x", min_ndim=3)
    M = _window_side(M)
    h = positive_int(h, "h")
    *batch, H, W, C = x.shape
    _check_tiles(H, W, M)
    shift = _shift_amount(shift, M)
    if method not in ("cyclic", "pad"):
        raise ValueError(
            f"method must be 'cyclic' or 'pad', got {method!r}"
        )
    B = None
    if bias_table is not None:
        B = relative_position_bias(bias_table, M)          # (h, M², M²)
        if B.shape[0] != h:
            raise ValueError(
                f"bias_table must have one column per head (h={h}), got "
                f"shape {np.shape(bias_table)}"
            )
    if shift == 0 or method == "cyclic":
        rolled = cyclic_shift(x, shift)                    # (..., H, W, C)
        windows = window_partition(rolled, M)              # (..., nW, M², C)
        mask = None
        if shift:
            mask = shifted_window_mask((H, W), M, shift)[:, None]
            # (nW, 1, M², M²): one mask per window, shared by the heads
        Yw, A = multi_head_attention(windows, W_q, W_k, W_v, W_o, h,
                                     mask=mask, bias=B)
        # Yw: (..., nW, M², d_out)
        Y = window_reverse(Yw, (H, W))                     # (..., H, W, d_out)
        return reverse_cyclic_shift(Y, shift), A
    # pad: M - shift patches before the grid, shift after it
    before, after = M - shift, shift
    pad = [(0, 0)] * len(batch) + [(before, after), (before, after), (0, 0)]
    padded = np.pad(x, pad)                                # (..., H+M, W+M, C)
    real = np.pad(np.ones((H, W, 1), dtype=bool),
                  [(before, after), (before, after), (0, 0)])
    keep = window_partition(real, M)[..., 0]               # (nW', M²)
    # every query may use the real keys of its window; each padded window
    # holds at least one real token, so no row is empty
    mask = np.broadcast_to(keep[:, None, None, :],
                           (len(keep), 1, M * M, M * M))   # (nW', 1, M², M²)
    windows = window_partition(padded, M)                  # (..., nW', M², C)
    Yw, A = multi_head_attention(windows, W_q, W_k, W_v, W_o, h,
                                 mask=mask, bias=B)
    # Yw: (..., nW', M², d_out)
    Y = window_reverse(Yw, (H + M, W + M))         # (..., H+M, W+M, d_out)
    return Y[..., before:before + H, before:before + W, :], A
