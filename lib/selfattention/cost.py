"""What attention costs: tokens, score entries, bytes and FLOPs (chapter 6).

Every function here is exact integer arithmetic on sizes, so it runs in no
time and prints the same digits on every machine. Chapter 6 uses them to
show how the patch size sets the number of tokens ``n`` and why the ``n × n``
score matrix dominates; chapter 7 uses the two FLOP formulas of the Swin
Transformer to compare global attention with window attention.

Notation: an image of ``H × W`` pixels cut into ``P × P`` patches gives an
``h × w`` patch grid (``h = H / P``, ``w = W / P``) and ``n = h·w`` tokens of
width ``C``; windows hold ``M × M`` patches.
"""

from __future__ import annotations


import numpy as np

from ._legacy import positive_int

__all__ = ["tokens", "score_entries", "attention_bytes", "attention_flops",
           "global_attention_flops", "window_attention_flops",
           "window_score_entries", "human_bytes"]


def _pair(value, name: str) -> tuple[int, int]:
    """An int ``s`` means ``(s, s)``; a pair is checked element by element."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(
                f"{name} must be an int or a pair (height, width), got "
                f"{len(value)} values: {value!r}")
        return (positive_int(value[0], f"{name}[0]"),
                positive_int(value[1], f"{name}[1]"))
    s = positive_int(value, name)
    return s, s


def tokens(image_size, patch_size) -> int:
    """Number of tokens when an image is cut into non-overlapping patches.

    ``n = (H / P_h) · (W / P_w)``: the sequence length falls with the square
    of the patch size (chapter 6, Eq. ``eq-cost-tokens``).

    Parameters
    ----------
    image_size : int or (int, int)
        Image height and width ``(H, W)`` in pixels; an int means a square.
    patch_size : int or (int, int)
        Patch height and width ``(P_h, P_w)``; 1 means one token per pixel.

    Returns
    -------
    n : int
        ``H·W / (P_h·P_w)``; for 224 × 224 and 16 × 16 patches, 196.

    Raises
    ------
    TypeError
        If a size is not an integer.
    ValueError
        If a size is not positive, or a patch side does not divide the image
        side (the patches would not tile the image).
    """
    H, W = _pair(image_size, "image_size")
    P_h, P_w = _pair(patch_size, "patch_size")
    if H % P_h or W % P_w:
        raise ValueError(
            f"patch_size {(P_h, P_w)} must divide image_size {(H, W)} so that "
            f"the patches tile the image")
    return (H // P_h) * (W // P_w)


def score_entries(n, heads: int = 1, n_k=None) -> int:
    """Entries of the score matrices ``Q Kᵀ`` of one attention layer.

    Parameters
    ----------
    n : int
        Number of queries (tokens).
    heads : int
        Number of heads; each holds its own matrix.
    n_k : int, optional
        Number of keys, for cross-attention; defaults to ``n``.

    Returns
    -------
    entries : int
        ``heads · n · n_k``; ``n²`` per head for self-attention (38,416 for
        the 196 tokens of a ViT-B/16 input).
    """
    n = positive_int(n, "n")
    n_k = n if n_k is None else positive_int(n_k, "n_k")
    return positive_int(heads, "heads") * n * n_k


def attention_bytes(n, heads: int = 1, dtype="float32", n_k=None) -> int:
    """Bytes needed to hold the score (or weight) matrices of one layer.

    Parameters
    ----------
    n : int
        Number of queries (tokens).
    heads : int
        Number of heads.
    dtype : str or numpy dtype
        Element type; float32 takes 4 bytes, float64 8.
    n_k : int, optional
        Number of keys; defaults to ``n``.

    Returns
    -------
    nbytes : int
        ``score_entries(n, heads, n_k) · itemsize``; about 10 GB for one
        float32 matrix over the 50,176 pixels of a 224 × 224 image.

    Raises
    ------
    TypeError
        If ``dtype`` is not a numeric NumPy dtype.
    """
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"dtype must be a NumPy dtype such as 'float32', got "
                        f"{dtype!r}") from err
    if not np.issubdtype(dt, np.number):
        raise TypeError(f"dtype must be numeric, got {dt}")
    return score_entries(n, heads, n_k) * dt.itemsize


def attention_flops(n, d_k, d_v=None, heads: int = 1) -> int:
    """Multiply-adds of ``Q Kᵀ`` and ``A V`` (no projections), per layer.

    Forming the scores takes ``n² d_k`` multiply-adds per head and the
    weighted sum ``n² d_v``: the ``O(n²·d)`` term of chapter 6.

    Parameters
    ----------
    n : int
        Number of tokens.
    d_k : int
        Query and key width per head.
    d_v : int, optional
        Value width per head; defaults to ``d_k``.
    heads : int
        Number of heads.

    Returns
    -------
    macs : int
        ``heads · n² · (d_k + d_v)``.
    """
    n = positive_int(n, "n")
    d_k = positive_int(d_k, "d_k")
    d_v = d_k if d_v is None else positive_int(d_v, "d_v")
    return positive_int(heads, "heads") * n * n * (d_k + d_v)


def _grid(h, w, C):
    return positive_int(h, "h"), positive_int(w, "w"), positive_int(C, "C")


def _window_side(M, h: int, w: int) -> int:
    """``M`` as a positive int whose windows tile the ``h × w`` grid."""
    M = positive_int(M, "M")
    if h % M or w % M:
        raise ValueError(f"windows of M={M} patches must tile the {h} × {w} "
                         f"patch grid: M must divide h and w")
    return M


def global_attention_flops(h, w, C) -> int:
    """Swin's cost of global multi-head self-attention, ``4hwC² + 2(hw)²C``.

    The first term counts the four ``C × C`` projections (queries, keys,
    values, output) of ``hw`` tokens; the second forms ``Q Kᵀ`` and ``A V``
    over all ``(hw)²`` pairs (Liu et al., 2021, Eq. 1; chapter 7).

    Parameters
    ----------
    h, w : int
        Height and width of the patch grid.
    C : int
        Token width (channels).

    Returns
    -------
    flops : int
        ``4·h·w·C² + 2·(h·w)²·C``, quadratic in the number of patches.
    """
    h, w, C = _grid(h, w, C)
    return 4 * h * w * C * C + 2 * (h * w) ** 2 * C


def window_attention_flops(h, w, C, M) -> int:
    """Swin's cost of window self-attention, ``4hwC² + 2M²hwC``.

    Each token attends only within its ``M × M`` window, so the pair term
    becomes ``2·M²·h·w·C``: linear in the number of patches for a fixed
    ``M`` (Liu et al., 2021, Eq. 2; chapter 7).

    Parameters
    ----------
    h, w : int
        Height and width of the patch grid.
    C : int
        Token width (channels).
    M : int
        Window side in patches (7 in Swin).

    Returns
    -------
    flops : int
        ``4·h·w·C² + 2·M²·h·w·C``.

    Raises
    ------
    ValueError
        If ``M`` does not divide ``h`` and ``w`` (windows must tile the grid).
    """
    h, w, C = _grid(h, w, C)
    M = _window_side(M, h, w)
    return 4 * h * w * C * C + 2 * M * M * h * w * C


def window_score_entries(h, w, M, heads: int = 1) -> int:
    """Score entries of window attention: ``h·w`` queries times ``M²`` keys.

    Compared with :func:`score_entries` of the whole grid (``(hw)²``), the
    saving is ``hw / M²``, the number of windows (64 for Swin's 56 × 56
    grid and M = 7; chapter 7).

    Raises
    ------
    ValueError
        If ``M`` does not divide ``h`` and ``w``.
    """
    h, w = positive_int(h, "h"), positive_int(w, "w")
    M = _window_side(M, h, w)
    return positive_int(heads, "heads") * h * w * M * M


def human_bytes(nbytes) -> str:
    """Bytes in decimal units with two decimals: ``10.07 GB``, ``153.66 kB``.

    :func:`selfattention.interactive.cost_calculator` formats its numbers
    the same way in JavaScript.
    """
    nbytes = int(nbytes)
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6),
                       ("kB", 10**3)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"
