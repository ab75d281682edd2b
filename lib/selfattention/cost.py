"""What attention costs, in exact integers: tokens, score entries, bytes and
multiply-adds for a grid ``(H, W)`` of width ``C``, windows of ``M × M``
patches and ``h`` heads (:ref:`ch-cost`, :ref:`ch-windows`).
"""

import numbers

import numpy as np

from ._validate import (Constraint, boundary, grid_shape, integer, optional,
                        pair, positive_int, require)
from .masks import tiles

__all__ = ["tokens", "score_entries", "attention_bytes", "msa_macs",
           "window_msa_macs", "window_score_entries", "human_bytes",
           "standard_attention_traffic", "tiled_attention_traffic"]


def _sides(names: tuple[str, str]) -> Constraint:
    """A positive int ``s``, meaning ``(s, s)``, or a pair of them."""
    as_pair = pair(positive_int(), names)

    def convert(value, name):
        square = isinstance(value, numbers.Integral)  # True fails below
        return as_pair((value, value) if square else value, name)
    return Constraint(convert, "an int or " + as_pair.expected,
                      valid=lambda: 2,
                      invalid=lambda: [("2", TypeError), (True, TypeError),
                                       (0, ValueError),
                                       ((2, 2, 2), TypeError)])


def _numeric_dtype(value, name):
    try:
        if np.dtype(value).kind in "iufc":
            return np.dtype(value)
    except TypeError:
        pass
    raise TypeError(f"{name} must be a numeric NumPy dtype such as 'float32', "
                    f"got {value!r}")


@boundary(image_size=_sides(("H", "W")), patch_size=_sides(("P_h", "P_w")),
          checks=(lambda image_size, patch_size: require(
              image_size[0] % patch_size[0] == image_size[1] % patch_size[1]
              == 0, f"patch_size {patch_size} must divide image_size "
              f"{image_size} so that the patches tile the image"),))
def tokens(image_size, patch_size):
    """Number of tokens when an image is cut into non-overlapping patches;
    sizes are ints (squares) or pairs (:ref:`ch-cost`)."""
    (H, W), (P_h, P_w) = image_size, patch_size
    return (H // P_h) * (W // P_w)


@boundary(n=positive_int(), h=positive_int(), n_k=optional(positive_int()))
def score_entries(n, h=1, n_k=None):
    """Entries of the score matrices ``Q Kᵀ`` of one attention layer:
    ``h · n · n_k`` (``n_k`` keys, by default ``n``)."""
    return h * n * (n if n_k is None else n_k)


@boundary(n=positive_int(), h=positive_int(),
          dtype=Constraint(_numeric_dtype, "a numeric NumPy dtype",
                           valid=lambda: "float32",
                           invalid=lambda: [("text", TypeError),
                                            (3.5, TypeError)]),
          n_k=optional(positive_int()))
def attention_bytes(n, h=1, dtype="float32", n_k=None):
    """Bytes needed to hold the score (or weight) matrices of one layer."""
    return score_entries(n, h, n_k) * dtype.itemsize


@boundary(grid=grid_shape(), C=positive_int())
def msa_macs(grid, C):
    """Swin's cost of global self-attention, ``4nC² + 2n²C``
    (:ref:`ch-windows`)."""
    n = grid[0] * grid[1]
    return 4 * n * C * C + 2 * n * n * C


@boundary(grid=grid_shape(), C=positive_int(), M=positive_int(),
          checks=(tiles,))
def window_msa_macs(grid, C, M):
    """Swin's cost of window self-attention, ``4nC² + 2M²nC``
    (:ref:`ch-windows`)."""
    n = grid[0] * grid[1]
    return 4 * n * C * C + 2 * M * M * n * C


@boundary(grid=grid_shape(), M=positive_int(), h=positive_int(),
          checks=(tiles,))
def window_score_entries(grid, M, h=1):
    """Score entries of window attention: ``H·W`` queries times ``M²`` keys."""
    return h * grid[0] * grid[1] * M * M


@boundary(n=positive_int(), d=positive_int())
def standard_attention_traffic(n, d):
    """Numbers a standard kernel moves through slow memory, one head."""
    forward = (2 * n * d + n * n          # Q, K in; S = Q Kᵀ out
               + n * n + n * n            # S in; A = softmax(S) out
               + n * n + n * d + n * d)   # A, V in; Y = A V out
    backward = (n * n + 2 * n * d         # A, dY in; dV = Aᵀ dY out
                + 2 * n * d + n * n       # dY, V in; dA = dY Vᵀ out
                + 3 * n * n               # A, dA in; dS out
                + n * n + 2 * n * d       # dS, K in; dQ = dS K out
                + n * n + 2 * n * d)      # dS, Q in; dK = dSᵀ Q out
    return forward, backward


@boundary(n=positive_int(), d=positive_int(), fast_memory=positive_int())
def tiled_attention_traffic(n, d, fast_memory):
    """Numbers FlashAttention moves through slow memory, one head."""
    passes = -(-n // -(-fast_memory // (4 * d)))   # T_c = ⌈n / ⌈M / 4d⌉⌉
    forward = (n * d + 2 * n                      # Y, l, m set to 0, -inf
               + 2 * n * d                        # each K, V tile in once
               + passes * (3 * n * d + 4 * n))    # Q, Y, l, m in; Y, l, m out
    backward = (3 * n * d                         # dQ, dK, dV set to 0
                + 2 * n * d + 2 * n * d           # K, V in; dK, dV out once
                + passes * (5 * n * d + 2 * n))   # Q, Y, dY, dQ, l, m in; dQ
    return forward, backward


@boundary(nbytes=integer(0))
def human_bytes(nbytes):
    """Bytes in decimal units with two decimals: ``10.07 GB``, ``153.66 kB``."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6),
                       ("kB", 10**3)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"
