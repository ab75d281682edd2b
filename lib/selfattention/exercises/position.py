"""Checks for the exercises of chapter 5, Position and equivariance."""

from __future__ import annotations

import numpy as np

from ..position import relative_position_bias, sinusoidal_1d
from .core import Wrong, call, check, returned_array

__all__ = ["check_sinusoidal", "check_unshuffle", "check_bias",
           "unshuffle_case"]


@check("ex-position-sinusoidal", points=1.0,
       success="sin in the even columns, cos in the odd ones, wavelengths "
               "growing as 10000^(2i/d).")
def check_sinusoidal(my_sinusoidal):
    """Exercise 5.1: the sinusoidal encoding of positions 0 … n-1."""
    n, d = 7, 10
    E = returned_array(call(my_sinusoidal, n, d, what="my_sinusoidal"),
                       "my_sinusoidal")
    ref = sinusoidal_1d(n, d)
    if E.shape == (d, n):
        raise Wrong(f"the encoding has shape {E.shape}; expected (n, d) = "
                    f"{(n, d)}, one row per position")
    if E.shape != (n, d):
        raise Wrong(f"the encoding has shape {E.shape}; expected (n, d) = "
                    f"{(n, d)}")
    if np.allclose(E, ref):
        return None
    halves = np.concatenate([ref[:, 0::2], ref[:, 1::2]], axis=1)
    if np.allclose(E, halves):
        raise Wrong("you put all sines first and all cosines after; the "
                    "transformer interleaves them: sin in columns 0, 2, 4 "
                    "..., cos in columns 1, 3, 5 ...")
    if np.allclose(E[:, 0::2], ref[:, 1::2]) and \
            np.allclose(E[:, 1::2], ref[:, 0::2]):
        raise Wrong("sin and cos are swapped: even columns hold sin, odd "
                    "columns cos")
    if np.allclose(E, sinusoidal_1d(n + 1, d)[1:]):
        raise Wrong("positions start at 0, not 1: row 0 is sin(0) = 0 and "
                    "cos(0) = 1")
    i = np.arange(d // 2)
    wrong_exp = np.arange(n)[:, None] / 10000.0 ** (i / d)
    alt = np.empty((n, d))
    alt[:, 0::2], alt[:, 1::2] = np.sin(wrong_exp), np.cos(wrong_exp)
    if np.allclose(E, alt):
        raise Wrong("the exponent should be 2i/d for column pair i (i = 0 "
                    "… d/2-1), not i/d: the longest wavelength is then about "
                    "2π·10000")
    if np.allclose(E[0], ref[0]) and np.allclose(E[:, :2], ref[:, :2]):
        raise Wrong("the first column pair is right but later ones are not: "
                    "the angle of pair i is pos / 10000**(2i/d)")
    raise Wrong("the values differ from sin/cos(pos / 10000**(2i/d)); row 0 "
                "should alternate 0 and 1")


def unshuffle_case():
    """The arrays of exercise 5.2: ``(X, perm, f)``.

    ``X`` holds 12 random tokens of width 6, ``perm`` a permutation of them
    and ``f`` a self-attention layer with fixed random weights.
    """
    from ..attention import attention

    rng = np.random.default_rng(52)
    X = rng.standard_normal((12, 6))
    W_q, W_k, W_v = (rng.standard_normal((6, 6)) / np.sqrt(6)
                     for _ in range(3))
    perm = rng.permutation(12)

    def f(X):
        return attention(X @ W_q, X @ W_k, X @ W_v)[0]

    return X, perm, f


@check("ex-position-unshuffle", points=1.0,
       success="the outputs of the shuffled tokens, put back in place, are "
               "exactly f(X).")
def check_unshuffle(unshuffle):
    """Exercise 5.2: recover f(X) from f(X[perm]) and perm."""
    X, perm, f = unshuffle_case()
    Y, Y_shuffled = f(X), f(X[perm])
    out = returned_array(call(unshuffle, Y_shuffled.copy(), perm.copy(),
                              what="unshuffle"), "unshuffle")
    if out.shape != Y.shape:
        raise Wrong(f"unshuffle returned shape {out.shape}; expected the "
                    f"shape of the outputs, {Y.shape}")
    if np.allclose(out, Y):
        return None
    if np.allclose(out, Y_shuffled):
        raise Wrong("the rows are still in shuffled order: row k of "
                    "f(X[perm]) belongs to token perm[k]")
    if np.allclose(out, Y_shuffled[perm]):
        raise Wrong("you applied perm a second time; undo it instead: "
                    "place row k at position perm[k] (or index with "
                    "np.argsort(perm))")
    raise Wrong("the rows are not those of f(X); each output row should "
                "only move, never change")


@check("ex-position-bias", points=1.0,
       success="every pair of patches reads the table entry of its own "
               "offset.")
def check_bias(my_bias):
    """Exercise 5.3: expand a table of per-offset biases into B."""
    rows, cols = 3, 4                      # not square: catches swapped axes
    rng = np.random.default_rng(53)
    table = rng.standard_normal((2 * rows - 1, 2 * cols - 1))
    B = returned_array(call(my_bias, table.copy(), rows, cols, what="my_bias"),
                       "my_bias")
    n = rows * cols
    if B.shape != (n, n):
        raise Wrong(f"B has shape {B.shape}; expected (rows·cols, rows·cols)"
                    f" = {(n, n)}, one entry per query and key")
    ref = relative_position_bias(table, (rows, cols))
    if np.allclose(B, ref):
        return None
    if np.allclose(B, ref.T):
        raise Wrong("B is transposed: the offset is query minus key, "
                    "(r_i - r_j, c_i - c_j), so B[i, j] reads table[r_i - r_j"
                    " + rows - 1, c_i - c_j + cols - 1]")
    if np.allclose(np.diag(B), table[rows - 1, cols - 1]):
        raise Wrong("the diagonal is right but other pairs are not: check "
                    "that tokens are numbered row-major, r = i // cols and "
                    "c = i % cols")
    raise Wrong("B[i, i] should be the table's centre, table[rows-1, cols-1]"
                ": shift each offset by rows-1 and cols-1 to index the table")
