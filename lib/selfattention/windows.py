"""Window attention and shifted windows on a patch grid (chapter 8).

Swin keeps self-attention inside ``M × M`` windows of the patch grid and, in
every other block, shifts the windows by ``⌊M/2⌋`` patches. Grids have shape
``(..., H, W, C)``: any leading batch axes, ``H × W`` tokens of width ``C``,
numbered row-major, as are the windows and the tokens inside a window. Masks
are boolean, **True = this query may use this key**. The shifted windows are
computed with a cyclic shift and :func:`rolled_window_masks`;
:func:`shifted_window_mask` and :func:`shifted_window_bias` state the same
attention on the whole unrolled grid, as a reference.
"""

from __future__ import annotations

import numpy as np

from ._validate import (Constraint, boundary, floats, grid, integer, one_of,
                        optional, positive_int, tiles)
from .attention import _heads_fit, multi_head_attention
from .position import relative_position_bias

__all__ = ["window_partition", "window_reverse", "cyclic_shift",
           "reverse_cyclic_shift", "region_labels", "rolled_window_masks",
           "padded_window_ids", "shifted_window_mask", "shifted_window_bias",
           "window_attention"]


# ------------------------------------------------------------------ checks
def _tokens(shape: str) -> Constraint:
    """An array of numbers or booleans (dtype kept) with the axes of shape."""
    expected = f"an array of shape {shape}"

    def convert(value, name):
        arr = np.asarray(value)
        if not (arr.dtype == bool or np.issubdtype(arr.dtype, np.number)):
            raise TypeError(f"{name} must be {expected} of numbers, got "
                            f"dtype {arr.dtype}")
        if arr.ndim < 3:
            raise ValueError(f"{name} must be {expected}, got shape "
                             f"{arr.shape}")
        return arr

    return Constraint(convert, expected)


def _x_tiles(args) -> None:
    tiles()({"grid": args["x"].shape[-3:-1], "M": args["M"]})


def _shift_below_M(args) -> None:
    if args["shift"] >= args["M"]:
        raise ValueError(f"shift must lie in 0..M-1 = 0..{args['M'] - 1} "
                         f"patches (Swin uses M // 2 = {args['M'] // 2}), "
                         f"got {args['shift']}")


def _windows_fit(args) -> None:
    (H, W), M, shape = args["grid"], args["M"], args["windows"].shape
    want = ((H // M) * (W // M), M * M)
    if shape[-3:-1] != want:
        raise ValueError(f"windows must have shape (..., nW, M², C) = "
                         f"(..., {want[0]}, {want[1]}, C) for a {H}x{W} grid "
                         f"and M={M}, got shape {shape}")


def _table_fits(name: str):
    def check(args) -> None:
        table, M = args[name], args["M"]
        want = None if table is None else (
            args.get("h", table.shape[0]), 2 * M - 1, 2 * M - 1)
        if table is not None and table.shape != want:
            raise ValueError(f"{name} must have shape (h, 2M-1, 2M-1) = "
                             f"{want}, got shape {table.shape}")

    return check


def _weights_fit(args) -> None:          # as multi_head_attention checks them
    _heads_fit({**args, "X": args["x"], "context": None})


_GRID = _tokens("(..., H, W, C)")
_SHIFTED = dict(grid=grid(), M=positive_int(), shift=integer(0))
_SHIFT_FITS = (tiles(), _shift_below_M)


# ------------------------------------------------------------------ windows
@boundary(x=_GRID, M=positive_int(), checks=(_x_tiles,))
def window_partition(x, M):
    """Cut a patch grid into non-overlapping ``M × M`` windows.

    A reshape and a transpose (chapter 8, Eq. ``eq-win-partition``).

    Parameters
    ----------
    x : array_like, shape (..., H, W, C)
        Patch grid, of numbers or booleans (the dtype is kept).
    M : int
        Window side in patches; must divide ``H`` and ``W``.

    Returns
    -------
    windows : ndarray, shape (..., (H/M)·(W/M), M², C)

    Raises
    ------
    TypeError, ValueError
        If ``x`` is not an array of numbers with at least 3 axes, or ``M``
        not a positive integer that divides the grid.
    """
    *batch, H, W, C = x.shape
    x = x.reshape(*batch, H // M, M, W // M, M, C)  # (..., H/M, M, W/M, M, C)
    x = np.swapaxes(x, -4, -3)                       # (..., H/M, W/M, M, M, C)
    return x.reshape(*batch, -1, M * M, C)           # (..., nW, M², C)


@boundary(windows=_tokens("(..., nW, M², C)"), grid=grid(),
          M=positive_int(), checks=(tiles(), _windows_fit))
def window_reverse(windows, grid, M):
    """Put the windows back on the grid: undo the window partition.

    The inverse of :func:`window_partition`: ``windows`` of shape (...,
    (H/M)·(W/M), M², C) become a grid of shape (..., H, W, C) for ``grid =
    (H, W)``. ``TypeError`` or ``ValueError`` if ``M`` does not tile the grid
    or ``windows`` does not hold its windows.
    """
    H, W = grid
    *batch, _, _, C = windows.shape                  # (..., nW, M², C)
    x = windows.reshape(*batch, H // M, W // M, M, M, C)
    # (..., H/M, W/M, M, M, C)
    x = np.swapaxes(x, -4, -3)                       # (..., H/M, M, W/M, M, C)
    return x.reshape(*batch, H, W, C)                # (..., H, W, C)


# ------------------------------------------------------------------ shift
@boundary(x=_GRID, shift=integer(0))
def cyclic_shift(x, shift):
    """Roll a patch grid up and left by ``shift`` patches.

    The token at ``(r, c)`` of ``x`` (..., H, W, C) moves to ``((r - shift)
    mod H, (c - shift) mod W)``. Regular windows of the rolled grid are
    Swin's shifted windows of the original one, plus the strips that wrapped
    around, which :func:`rolled_window_masks` keeps apart (chapter 8, Eq.
    ``eq-win-roll``). ``shift`` is usually ``M // 2``, at least 0.
    """
    return np.roll(x, (-shift, -shift), axis=(-3, -2))  # up and left


@boundary(x=_GRID, shift=integer(0))
def reverse_cyclic_shift(x, shift):
    """Roll down and right by ``shift`` patches: undo the cyclic shift."""
    return np.roll(x, (shift, shift), axis=(-3, -2))    # down and right


@boundary(checks=_SHIFT_FITS, **_SHIFTED)
def region_labels(grid, M, shift):
    """Region of every token of the rolled grid: 3 strips per axis, 9 labels.

    After :func:`cyclic_shift`, each axis of the rolled grid falls into three
    strips: ``[0, H-M)`` (whole windows), ``[H-M, H-shift)`` (the end of
    the original grid) and ``[H-shift, H)`` (rows that wrapped around from
    the top). Two tokens were neighbours before the roll exactly when they
    share both strips, so the label is ``3·row_strip + col_strip`` (chapter
    8, Eq. ``eq-win-shift-mask``).

    Parameters
    ----------
    grid : (int, int)
        Grid ``(H, W)`` in patches.
    M : int
        Window side; must divide ``H`` and ``W``.
    shift : int
        Roll in patches, ``0 ≤ shift < M``. With 0 every label is 0.

    Returns
    -------
    labels : ndarray of int, shape (H, W)
        Values in 0 … 8.

    Raises
    ------
    TypeError, ValueError
        If ``grid``, ``M`` or ``shift`` is not an integer (pair) in range,
        or ``M`` does not tile the grid. The same holds for the other
        functions of ``(grid, M, shift)`` below.
    """
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
    """Masks of the windows of the rolled grid: same region, may attend.

    Returns a boolean array of shape ((H/M)·(W/M), M², M²): ``[w, i, j]``
    is True when tokens ``i`` and ``j`` of window ``w`` of the rolled grid
    carry the same :func:`region_labels` (all True when ``shift`` is 0). The
    diagonal is True, so no query is left without a key.
    """
    labels = region_labels(grid, M, shift)[..., None]        # (H, W, 1)
    win = window_partition(labels, M)[..., 0]                # (nW, M²)
    return win[:, :, None] == win[:, None, :]                # (nW, M², M²)


@boundary(checks=_SHIFT_FITS, **_SHIFTED)
def padded_window_ids(grid, M, shift):
    """Shifted window of every token of the unrolled grid.

    The shifted windows start ``M - shift`` patches before the grid (at it
    if ``shift`` is 0): pad ``M - shift`` patches before and ``shift`` after
    each axis and cut regular windows, Swin's "simple alternative" to the
    cyclic shift. Returns an (H, W) array of indices among the
    ``(H/M + 1)·(W/M + 1)`` windows of the padded grid, numbered row-major
    (``(H/M)·(W/M)`` when ``shift`` is 0).
    """
    H, W = grid
    pad = (M - shift) % M                          # patches before the grid
    rows = (np.arange(H) + pad) // M               # (H,) window row
    cols = (np.arange(W) + pad) // M               # (W,) window column
    per_row = (W + pad + M - 1) // M               # windows along a row
    return rows[:, None] * per_row + cols[None, :]           # (H, W)


@boundary(checks=_SHIFT_FITS, **_SHIFTED)
def shifted_window_mask(grid, M, shift):
    """Tokens may use the tokens of their shifted window, on the whole grid.

    The shifted form of :func:`selfattention.masks.window_mask` (equal to it
    when ``shift`` is 0), shape (H·W, H·W): True when tokens ``i`` and ``j``
    lie in the same window of :func:`padded_window_ids`. With
    :func:`shifted_window_bias`, multi-head attention over all ``n = H·W``
    tokens gives the outputs of :func:`window_attention` at ``n²`` cost: a
    reference, not a method.
    """
    ids = padded_window_ids(grid, M, shift).ravel()          # (n,)
    return ids[:, None] == ids[None, :]                      # (n, n)


@boundary(table=floats(ndim=3), checks=_SHIFT_FITS + (_table_fits("table"),),
          **_SHIFTED)
def shifted_window_bias(table, grid, M, shift):
    """The relative position bias of the (shifted) windows, on the whole grid.

    For ``table`` of shape (h, 2M-1, 2M-1), as in :func:`window_attention`,
    returns ``B`` of shape (h, H·W, H·W): two tokens of the same window of
    :func:`shifted_window_mask` get the entry of their offset on the grid
    (the cyclic shift never separates them), every other pair 0, which that
    mask removes anyway.
    """
    (H, W), h = grid, table.shape[0]
    full = np.zeros((h, 2 * H - 1, 2 * W - 1))     # every offset of the grid
    full[:, H - M:H + M - 1, W - M:W + M - 1] = table        # |Δ| < M
    B = relative_position_bias(full, grid)                   # (h, n, n)
    return np.where(shifted_window_mask(grid, M, shift), B, 0.0)


# ------------------------------------------------------------------ attention
@boundary(x=floats(min_ndim=3), W_q=floats(ndim=2), W_k=floats(ndim=2),
          W_v=floats(ndim=2), W_o=floats(ndim=2), h=positive_int(),
          M=positive_int(), shift=integer(0),
          bias_table=optional(floats(ndim=3)), method=one_of("cyclic", "pad"),
          checks=(_x_tiles, _shift_below_M, _weights_fit,
                  _table_fits("bias_table")))
def window_attention(x, W_q, W_k, W_v, W_o, h, M, shift=0, bias_table=None,
                     method="cyclic"):
    """Multi-head self-attention inside ``M × M`` windows (chapter 8).

    Each token attends only to the tokens of its window; with ``shift > 0``
    the windows are Swin's shifted windows. Inside every window the scores
    of head ``k`` are ``Q Kᵀ / √d_k + B[k]``, with ``B`` read from
    ``bias_table`` by :func:`selfattention.position.relative_position_bias`
    on the window's grid ``(M, M)``.

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
        Window side in patches (Swin's is 7); must divide ``H`` and ``W``.
    shift : int
        Window shift in patches, ``0 ≤ shift < M``; Swin uses ``M // 2`` in
        every other block.
    bias_table : array_like, shape (h, 2M-1, 2M-1), optional
        Relative position bias table, one per head; no bias if omitted.
    method : {"cyclic", "pad"}
        How shifted windows are computed. ``"cyclic"`` rolls the grid, uses
        ``(H/M)·(W/M)`` windows and :func:`rolled_window_masks`; ``"pad"``
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
    B = None if bias_table is None else relative_position_bias(
        bias_table, (M, M))                                  # (h, M², M²)
    if shift and method == "pad":
        return _padded_window_attention(x, (W_q, W_k, W_v, W_o), h, M, shift,
                                        B)
    grid = x.shape[-3:-1]
    windows = window_partition(cyclic_shift(x, shift), M)    # (..., nW, M², C)
    mask = rolled_window_masks(grid, M, shift)[:, None] if shift else None
    # mask: (nW, 1, M², M²), one per window, shared by the heads
    Y, A = multi_head_attention(windows, W_q, W_k, W_v, W_o, h, mask=mask,
                                bias=B)                      # (..., nW, M², d)
    Y = window_reverse(Y, grid, M)                           # (..., H, W, d)
    return reverse_cyclic_shift(Y, shift), A


def _padded_window_attention(x, weights, h, M, shift, B):
    """Shifted windows by padding: ``M - shift`` patches before, ``shift``
    after, and the padded keys masked."""
    *batch, H, W, _ = x.shape
    pad = [(M - shift, shift)] * 2 + [(0, 0)]
    padded = np.pad(x, [(0, 0)] * len(batch) + pad)     # (..., H+M, W+M, C)
    real = np.pad(np.ones((H, W, 1), dtype=bool), pad)  # (H+M, W+M, 1)
    keys = window_partition(real, M)[..., 0]            # (nW', M²)
    # every padded window holds a real token, so no query is left without
    # a key: (nW', 1, 1, M²) broadcast over the heads and the queries
    Y, A = multi_head_attention(window_partition(padded, M), *weights, h,
                                mask=keys[:, None, None, :], bias=B)
    Y = window_reverse(Y, (H + M, W + M), M)            # (..., H+M, W+M, d)
    return Y[..., M - shift:M - shift + H, M - shift:M - shift + W, :], A
