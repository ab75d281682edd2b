"""Boolean attention masks: True = this query may use this key (chapter 4).

Every function returns an array of shape (n, n) (or (B, n, n) for a batch)
whose entry ``[i, j]`` says whether query ``i`` may attend to key ``j``. Feed
it to :func:`selfattention.attention.attention`; to hand it to PyTorch, see
:mod:`selfattention.torch_bridge` for its two opposite conventions.
"""

from __future__ import annotations

import numpy as np

from ._legacy import positive_int

__all__ = ["causal_mask", "padding_mask", "local_mask", "grid_positions",
           "window_ids", "window_mask", "neighborhood_mask"]


def causal_mask(n: int) -> np.ndarray:
    """Query ``i`` may use keys ``j ≤ i``: a lower-triangular (n, n) mask."""
    n = positive_int(n, "n")
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask(lengths, n: int) -> np.ndarray:
    """Hide padding tokens: a (B, n, n) mask from each item's real length.

    Item ``b`` holds ``lengths[b]`` real tokens followed by padding up to
    ``n``. Every query may use exactly the real keys of its own item.

    Parameters
    ----------
    lengths : sequence of int, shape (B,)
        Real tokens per item, each in ``1 … n``.
    n : int
        Padded length.

    Returns
    -------
    mask : ndarray of bool, shape (B, n, n)
    """
    n = positive_int(n, "n")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(
            f"lengths must be a 1-D sequence of integers, got {lengths!r}"
        )
    if ((lengths < 1) | (lengths > n)).any():
        raise ValueError(
            f"every length must lie in 1..{n} (a token needs at least one "
            f"real key), got {lengths.tolist()}"
        )
    keep = np.arange(n)[None, :] < lengths[:, None]          # (B, n)
    return np.repeat(keep[:, None, :], n, axis=1)            # (B, n, n)


def local_mask(n: int, radius: int) -> np.ndarray:
    """Query ``i`` may use keys with ``|i - j| ≤ radius`` (a band)."""
    n = positive_int(n, "n")
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) \
            or radius < 0:
        raise ValueError(f"radius must be a non-negative integer, got {radius!r}")
    i = np.arange(n)
    return np.abs(i[:, None] - i[None, :]) <= radius


def grid_positions(rows: int, cols: int) -> np.ndarray:
    """Row and column of each token of a row-major patch grid: (rows·cols, 2)."""
    rows, cols = positive_int(rows, "rows"), positive_int(cols, "cols")
    r, c = np.divmod(np.arange(rows * cols), cols)
    return np.stack([r, c], axis=1)


def window_ids(grid: tuple[int, int], window: tuple[int, int]) -> np.ndarray:
    """Window index of each token of a row-major grid, numbered row-major.

    Raises ``ValueError`` if the windows do not tile the grid exactly.
    """
    (rows, cols), (wr, wc) = _grid_and_window(grid, window)
    rc = grid_positions(rows, cols)
    return (rc[:, 0] // wr) * (cols // wc) + rc[:, 1] // wc


def window_mask(grid: tuple[int, int], window: tuple[int, int]) -> np.ndarray:
    """Each token may attend only inside its own non-overlapping window.

    Parameters
    ----------
    grid : (int, int)
        Patch grid (rows, cols); tokens are numbered row-major.
    window : (int, int)
        Window size in patches; must divide the grid (Swin's M × M).

    Returns
    -------
    mask : ndarray of bool, shape (rows·cols, rows·cols)
    """
    ids = window_ids(grid, window)
    return ids[:, None] == ids[None, :]


def _grid_and_window(grid, window):
    try:
        rows, cols = grid
        wr, wc = window
    except (TypeError, ValueError):
        raise TypeError(
            f"grid and window must be pairs (rows, cols), got grid={grid!r} "
            f"and window={window!r}"
        ) from None
    rows, cols = positive_int(rows, "grid rows"), positive_int(cols, "grid cols")
    wr, wc = positive_int(wr, "window rows"), positive_int(wc, "window cols")
    if rows % wr or cols % wc:
        raise ValueError(
            f"windows of {wr}x{wc} patches must tile the {rows}x{cols} grid "
            f"exactly; pad the grid or choose a window that divides it"
        )
    return (rows, cols), (wr, wc)


def neighborhood_mask(grid: tuple[int, int], radius: int) -> np.ndarray:
    """Each token may attend to the patches around it on the grid.

    Query ``(r, c)`` may use key ``(r', c')`` when ``|r - r'| ≤ radius`` and
    ``|c - c'| ≤ radius``: a ``(2·radius + 1)²`` square centred on the query,
    cut off at the borders of the grid. Unlike :func:`window_mask`, the
    neighbourhood moves with the query, so neighbours on both sides of any
    border see each other (chapter 4). :func:`local_mask` is the same idea
    for a 1-D sequence.

    Parameters
    ----------
    grid : (int, int)
        Patch grid (rows, cols); tokens are numbered row-major.
    radius : int
        Reach in patches, ``0`` (each token sees only itself) or more.

    Returns
    -------
    mask : ndarray of bool, shape (rows·cols, rows·cols)
        Symmetric, with a True diagonal.

    Raises
    ------
    TypeError
        If ``grid`` is not a pair of integers.
    ValueError
        If ``radius`` is not a non-negative integer.
    """
    try:
        rows, cols = grid
    except (TypeError, ValueError):
        raise TypeError(
            f"grid must be a pair (rows, cols), got {grid!r}"
        ) from None
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) \
            or radius < 0:
        raise ValueError(
            f"radius must be a non-negative integer, got {radius!r}"
        )
    rc = grid_positions(rows, cols)                          # (n, 2)
    offset = np.abs(rc[:, None, :] - rc[None, :, :])         # (n, n, 2)
    return (offset <= radius).all(axis=-1)                   # (n, n)


#: The kinds :func:`mask_of_kind` accepts, in the order a widget offers them.
MASK_KINDS = ("none", "causal", "local", "window")


def mask_of_kind(kind: str, grid: tuple[int, int], size: int) -> np.ndarray:
    """One of chapter 4's masks on a patch grid, chosen by name.

    Parameters
    ----------
    kind : {"none", "causal", "local", "window"}
        ``"none"``: every query may use every key; ``"causal"``:
        :func:`causal_mask` in row-major order; ``"local"``:
        :func:`neighborhood_mask` of radius ``size // 2``; ``"window"``:
        :func:`window_mask` with ``size × size`` windows.
    grid : (int, int)
        Patch grid (rows, cols); tokens are numbered row-major.
    size : int
        Side of the window, or twice the radius of the neighbourhood;
        ignored by ``"none"`` and ``"causal"``.

    Returns
    -------
    mask : ndarray of bool, shape (rows·cols, rows·cols)

    Raises
    ------
    ValueError
        If ``kind`` is not one of ``MASK_KINDS``, or ``size`` does not
        suit it (see the functions above).
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {MASK_KINDS}, got {kind!r}")
    try:
        rows, cols = grid
    except (TypeError, ValueError):
        raise TypeError(f"grid must be a pair (rows, cols), got {grid!r}"
                        ) from None
    n = positive_int(rows, "grid rows") * positive_int(cols, "grid cols")
    if kind == "causal":
        return causal_mask(n)
    if kind == "local":
        return neighborhood_mask(grid, positive_int(size, "size") // 2)
    if kind == "window":
        return window_mask(grid, (size, size))
    return np.ones((n, n), dtype=bool)


__all__ += ["MASK_KINDS", "mask_of_kind"]
