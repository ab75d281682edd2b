"""What attention costs: tokens, score entries, bytes and multiply-adds
(chapters 7 and 8).

Every function here is exact integer arithmetic on sizes, so it runs in no
time and prints the same digits on every machine. Chapter 7 uses them to
show how the patch size sets the number of tokens ``n`` and why the ``n × n``
score matrix dominates; chapter 8 uses the two cost formulas of the Swin
Transformer to compare global attention with window attention.

Notation: an image of ``H_img × W_img`` pixels cut into ``P × P`` patches
gives a patch grid ``grid = (H, W)`` and ``n = H·W`` tokens of width ``C``;
windows hold ``M × M`` patches; ``h`` is the number of heads. Costs are
counted in multiply-adds (``*_macs``); a FLOP counter such as PyTorch's
counts two FLOPs per multiply-add (:mod:`selfattention.flops`).
"""

from __future__ import annotations

import numbers

import numpy as np

from ._validate import (Constraint, boundary, grid, integer, optional, pair,
                        tiles)
from ._validate import positive_int as count

__all__ = ["tokens", "score_entries", "attention_bytes", "attention_macs",
           "msa_macs", "window_msa_macs", "window_score_entries",
           "human_bytes"]


def _sides(names: tuple[str, str]) -> Constraint:
    """A positive int ``s``, meaning ``(s, s)``, or a pair of them."""
    as_pair = pair(count(), names)

    def convert(value, name):
        if isinstance(value, numbers.Integral) and not isinstance(value,
                                                                   bool):
            value = (value, value)
        return as_pair(value, name)

    return Constraint(convert, "an int or " + as_pair.expected)


def _numeric_dtype(value, name):
    try:
        dt = np.dtype(value)
    except TypeError:
        dt = None
    if dt is None or not np.issubdtype(dt, np.number):
        raise TypeError(f"{name} must be a numeric NumPy dtype such as "
                        f"'float32', got {value!r}")
    return dt


def _patches_tile(args) -> None:
    (H, W), (P_h, P_w) = args["image_size"], args["patch_size"]
    if H % P_h or W % P_w:
        raise ValueError(f"patch_size {(P_h, P_w)} must divide image_size "
                         f"{(H, W)} so that the patches tile the image")


@boundary(image_size=_sides(("H", "W")), patch_size=_sides(("P_h", "P_w")),
          checks=(_patches_tile,))
def tokens(image_size, patch_size):
    """Number of tokens when an image is cut into non-overlapping patches.

    ``n = (H / P_h) · (W / P_w)``: the sequence length falls with the square
    of the patch size (chapter 7, Eq. ``eq-cost-tokens``).

    Parameters
    ----------
    image_size : int or (int, int)
        Image height and width in pixels; an int means a square.
    patch_size : int or (int, int)
        Patch height and width ``(P_h, P_w)``; 1 means one token per pixel.

    Returns
    -------
    n : int
        ``H·W / (P_h·P_w)``; for 224 × 224 and 16 × 16 patches, 196.

    Raises
    ------
    TypeError
        If a size is not an integer or a pair of integers.
    ValueError
        If a size is not positive, or a patch side does not divide the image
        side (the patches would not tile the image).
    """
    (H, W), (P_h, P_w) = image_size, patch_size
    return (H // P_h) * (W // P_w)


@boundary(n=count(), h=count(), n_k=optional(count()))
def score_entries(n, h=1, n_k=None):
    """Entries of the score matrices ``Q Kᵀ`` of one attention layer.

    Parameters
    ----------
    n : int
        Number of queries (tokens).
    h : int
        Number of heads; each holds its own matrix.
    n_k : int, optional
        Number of keys, for cross-attention; defaults to ``n``.

    Returns
    -------
    entries : int
        ``h · n · n_k``; ``n²`` per head for self-attention (38,416 for
        the 196 tokens of a ViT-B/16 input).
    """
    return h * n * (n if n_k is None else n_k)


@boundary(n=count(), h=count(),
          dtype=Constraint(_numeric_dtype, "a numeric NumPy dtype"),
          n_k=optional(count()))
def attention_bytes(n, h=1, dtype="float32", n_k=None):
    """Bytes needed to hold the score (or weight) matrices of one layer.

    Parameters
    ----------
    n : int
        Number of queries (tokens).
    h : int
        Number of heads.
    dtype : str or numpy dtype
        Element type; float32 takes 4 bytes, float64 8.
    n_k : int, optional
        Number of keys; defaults to ``n``.

    Returns
    -------
    nbytes : int
        ``score_entries(n, h, n_k) · itemsize``; about 10 GB for one
        float32 matrix over the 50,176 pixels of a 224 × 224 image.

    Raises
    ------
    TypeError
        If ``dtype`` is not a numeric NumPy dtype.
    """
    return score_entries(n, h, n_k) * dtype.itemsize


@boundary(n=count(), d_k=count(), d_v=optional(count()), h=count())
def attention_macs(n, d_k, d_v=None, h=1):
    """Multiply-adds of ``Q Kᵀ`` and ``A V`` (no projections), per layer.

    Forming the scores takes ``n² d_k`` multiply-adds per head and the
    weighted sum ``n² d_v``: the ``O(n²·d)`` term of chapter 7.

    Parameters
    ----------
    n : int
        Number of tokens.
    d_k : int
        Query and key width per head.
    d_v : int, optional
        Value width per head; defaults to ``d_k``.
    h : int
        Number of heads.

    Returns
    -------
    macs : int
        ``h · n² · (d_k + d_v)``.
    """
    return h * n * n * (d_k + (d_k if d_v is None else d_v))


@boundary(grid=grid(), C=count())
def msa_macs(grid, C):
    """Swin's cost of global multi-head self-attention, ``4nC² + 2n²C``.

    With ``n = H·W`` patches, the first term counts the four ``C × C``
    projections (queries, keys, values, output) and the second forms
    ``Q Kᵀ`` and ``A V`` over all ``n²`` pairs (Liu et al., 2021, Eq. 1,
    written there ``4hwC² + 2(hw)²C``; chapter 8).

    Parameters
    ----------
    grid : (int, int)
        Patch grid ``(H, W)``.
    C : int
        Token width (channels).

    Returns
    -------
    macs : int
        ``4·n·C² + 2·n²·C`` multiply-adds, quadratic in the number of
        patches.
    """
    n = grid[0] * grid[1]
    return 4 * n * C * C + 2 * n * n * C


@boundary(grid=grid(), C=count(), M=count(), checks=(tiles(),))
def window_msa_macs(grid, C, M):
    """Swin's cost of window self-attention, ``4nC² + 2M²nC``.

    Each of the ``n = H·W`` tokens attends only within its ``M × M`` window,
    so the pair term becomes ``2·M²·n·C``: linear in the number of patches
    for a fixed ``M`` (Liu et al., 2021, Eq. 2; chapter 8).

    Parameters
    ----------
    grid : (int, int)
        Patch grid ``(H, W)``.
    C : int
        Token width (channels).
    M : int
        Window side in patches (7 in Swin).

    Returns
    -------
    macs : int
        ``4·n·C² + 2·M²·n·C`` multiply-adds.

    Raises
    ------
    ValueError
        If ``M`` does not divide ``H`` and ``W`` (windows must tile the grid).
    """
    n = grid[0] * grid[1]
    return 4 * n * C * C + 2 * M * M * n * C


@boundary(grid=grid(), M=count(), h=count(), checks=(tiles(),))
def window_score_entries(grid, M, h=1):
    """Score entries of window attention: ``H·W`` queries times ``M²`` keys.

    Compared with :func:`score_entries` of the whole grid (``(HW)²``), the
    saving is ``HW / M²``, the number of windows (64 for Swin's 56 × 56
    grid and M = 7; chapter 8).

    Raises
    ------
    ValueError
        If ``M`` does not divide ``H`` and ``W``.
    """
    return h * grid[0] * grid[1] * M * M


@boundary(nbytes=integer(0))
def human_bytes(nbytes):
    """Bytes in decimal units with two decimals: ``10.07 GB``, ``153.66 kB``.

    :func:`selfattention.interactive.cost_calculator` formats its numbers
    the same way in JavaScript.
    """
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6),
                       ("kB", 10**3)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"
