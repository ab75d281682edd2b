"""The judges of :ref:`ch-position`, Position and equivariance: hidden cases,
judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import numpy as np
from selfattention.exercises.core import (
    Wrong,
    expect_shape,
    returned_array,
    returned_arrays,
)
from selfattention.exercises.position import _unshuffle_arrays
from selfattention.position import relative_position_bias, sinusoidal_1d

from . import Judge


def _sinusoidal_cases(rng):
    drawn = (int(rng.integers(3, 13)), 2 * int(rng.integers(2, 9)))
    return [{"n": n, "d": d} for n, d in [(7, 10), drawn]]


def _sinusoidal_judge(E, n, d):
    E = returned_array(E, "my_sinusoidal")
    ref = sinusoidal_1d(n, d)
    if E.shape == (d, n) and d != n:
        raise Wrong(f"the encoding has shape {E.shape}; expected (n, d) = "
                    f"{(n, d)}, one row per position", "shape-transposed")
    if E.shape != (n, d):
        raise Wrong(f"the encoding has shape {E.shape}; expected (n, d) = "
                    f"{(n, d)}", "shape")
    if np.allclose(E, ref):
        return None
    halves = np.concatenate([ref[:, 0::2], ref[:, 1::2]], axis=1)
    if np.allclose(E, halves):
        raise Wrong("you put all sines first and all cosines after; the "
                    "transformer interleaves them: sin in columns 0, 2, 4 "
                    "..., cos in columns 1, 3, 5 ...", "sines-then-cosines")
    if np.allclose(E[:, 0::2], ref[:, 1::2]) and \
            np.allclose(E[:, 1::2], ref[:, 0::2]):
        raise Wrong("sin and cos are swapped: even columns hold sin, odd "
                    "columns cos", "sin-cos-swapped")
    if np.allclose(E, sinusoidal_1d(n + 1, d)[1:]):
        raise Wrong("positions start at 0, not 1: row 0 is sin(0) = 0 and "
                    "cos(0) = 1", "positions-from-one")
    i = np.arange(d // 2)
    wrong_exp = np.arange(n)[:, None] / 10000.0 ** (i / d)
    alt = np.empty((n, d))
    alt[:, 0::2], alt[:, 1::2] = np.sin(wrong_exp), np.cos(wrong_exp)
    if np.allclose(E, alt):
        raise Wrong("the exponent should be 2i/d for column pair i (i = 0 "
                    "… d/2-1), not i/d: the longest wavelength is then about "
                    "2π·10000", "exponent-i-over-d")
    if np.allclose(E[0], ref[0]) and np.allclose(E[:, :2], ref[:, :2]):
        raise Wrong("the first column pair is right but later ones are not: "
                    "the angle of pair i is pos / 10000**(2i/d)",
                    "later-pairs-wrong")
    raise Wrong("the values differ from sin/cos(pos / 10000**(2i/d)); row 0 "
                "should alternate 0 and 1", "not-the-encoding")


def _unshuffle_cases(rng):
    cases = []
    for n in (12, int(rng.integers(5, 20))):
        X, perm, f = _unshuffle_arrays(rng, n=n)
        Y_shuffled, A_shuffled = f(X[perm])
        cases.append({"Y_shuffled": Y_shuffled, "A_shuffled": A_shuffled,
                      "perm": perm})
    return cases


def _unshuffle_judge(out, Y_shuffled, A_shuffled, perm):
    Y_out, A_out = returned_arrays(out, 2, "unshuffle should return the "
                                           "pair (Y, A)")
    inv = np.argsort(perm)                 # row k of f(X[perm]) is token
    Y, A = Y_shuffled[inv], A_shuffled[inv][:, inv]      # perm[k] of f(X)
    expect_shape(Y_out, "Y", Y.shape, "(n, d)")
    expect_shape(A_out, "A", A.shape, "(n, n)")
    if not np.allclose(Y_out, Y):
        if np.allclose(Y_out, Y_shuffled):
            raise Wrong("Y is still in shuffled order: row k of "
                        "f(X[perm]) belongs to token perm[k]",
                        "still-shuffled")
        if np.allclose(Y_out, Y_shuffled[perm]):
            raise Wrong("you applied perm a second time to Y; undo it "
                        "instead: place row k at position perm[k] (or index "
                        "with np.argsort(perm))", "permuted-twice")
        raise Wrong("the rows of Y are not those of f(X); each output row "
                    "should only move, never change", "rows-changed")
    if np.allclose(A_out, A):
        return None
    if np.allclose(A_out, A_shuffled[inv]):
        raise Wrong("the rows of A are back in place but its columns are "
                    "not: the keys were shuffled too, A' = P A Pᵀ",
                    "columns-not-restored")
    if np.allclose(A_out, A_shuffled[:, inv]):
        raise Wrong("the columns of A are back in place but its rows are "
                    "not: the queries were shuffled too, A' = P A Pᵀ",
                    "rows-not-restored")
    if np.allclose(A_out, A_shuffled[perm][:, perm]):
        raise Wrong("you applied perm a second time to A; undo it with "
                    "np.argsort(perm) on both axes", "permuted-twice")
    raise Wrong("A is not f(X)'s weights: each weight only moves, to the "
                "row of its query and the column of its key",
                "weights-changed")


def _bias_cases(rng):
    rows, cols = 3, 4                      # not square: catches swapped axes
    drawn_rows = int(rng.integers(2, 6))
    drawn_cols = drawn_rows + int(rng.integers(1, 3))
    return [{"table": rng.standard_normal((2 * r - 1, 2 * c - 1)),
             "rows": r, "cols": c}
            for r, c in [(rows, cols), (drawn_cols, drawn_rows)]]


def _bias_judge(B, table, rows, cols):
    B = returned_array(B, "my_bias")
    n = rows * cols
    if B.shape != (n, n):
        raise Wrong(f"B has shape {B.shape}; expected (rows·cols, rows·cols)"
                    f" = {(n, n)}, one entry per query and key", "shape")
    ref = relative_position_bias(table, (rows, cols))
    if np.allclose(B, ref):
        return None
    if np.allclose(B, ref.T):
        raise Wrong("B is transposed: the offset is query minus key, "
                    "(r_i - r_j, c_i - c_j), so B[i, j] reads table[r_i - r_j"
                    " + rows - 1, c_i - c_j + cols - 1]", "bias-transposed")
    if np.allclose(np.diag(B), table[rows - 1, cols - 1]):
        raise Wrong("the diagonal is right but other pairs are not: check "
                    "that tokens are numbered row-major, r = i // cols and "
                    "c = i % cols", "not-row-major")
    raise Wrong("B[i, i] should be the table's centre, table[rows-1, cols-1]"
                ": shift each offset by rows-1 and cols-1 to index the table",
                "offset-not-shifted")


KINDS = ("learned", "sinusoidal", "none")
#: What the tiny ViT trained for 10 epochs gives over training seeds: the
#: least accuracy on intact digits with positions, the most on shuffled
#: ones, and the range without positions.
WITH_POSITIONS, SHUFFLED, WITHOUT = 0.75, 0.35, (0.35, 0.75)


def _positions_cases(rng):
    # The public draw (seed 150) gives ("sinusoidal", 0), the run the
    # chapter's solution reports. The grader draws none: the exercise's
    # points are the written part's.
    return [{"kind": KINDS[int(rng.integers(3))],
             "seed": int(rng.integers(0, 10))}]


def _positions_judge(out, kind, seed):
    intact, shuffled = (float(a) for a in returned_arrays(
        out, 2, "position_experiment should return the pair (accuracy on "
                "intact digits, accuracy on shuffled digits)"))
    run = f"for kind={kind!r}, seed={seed}"
    if not (0 <= intact <= 1 and 0 <= shuffled <= 1):
        raise Wrong(f"{run} the accuracies are {intact:g} and {shuffled:g}; "
                    f"give shares in [0, 1]", "not-a-share")
    if kind == "none":
        if intact != shuffled:
            raise Wrong(f"{run} the accuracies differ ({intact:.1%} and "
                        f"{shuffled:.1%}); a model without any position "
                        f"gives the same answers for shuffled patches: train "
                        f"with position=False and add no codes",
                        "no-position-differs")
        if not WITHOUT[0] <= intact <= WITHOUT[1]:
            raise Wrong(f"{run} the accuracy is {intact:.1%}; without "
                        f"positions the chapter's model trained for 10 "
                        f"epochs reaches {WITHOUT[0]:.0%} to "
                        f"{WITHOUT[1]:.0%}", "off-the-expected")
        return None
    if kind == "sinusoidal" and intact == shuffled:
        raise Wrong(f"{run} shuffling changes nothing: the codes moved with "
                    f"the patches; shuffle the patches first, then append "
                    f"each slot's code", "codes-moved-with-patches")
    if intact < WITH_POSITIONS:
        raise Wrong(f"{run} the accuracy on intact digits is {intact:.1%}; "
                    f"with positions the chapter's model trained for 10 "
                    f"epochs reaches at least {WITH_POSITIONS:.0%}",
                    "intact-too-low")
    if shuffled > SHUFFLED:
        raise Wrong(f"{run} the accuracy on shuffled digits is "
                    f"{shuffled:.1%}; a model that uses positions falls "
                    f"below {SHUFFLED:.0%} when each digit's patches are "
                    f"shuffled (shuffle the test patches, not the slots)",
                    "shuffled-too-high")


JUDGES = {
    "ex-position-sinusoidal": Judge(
        cases=_sinusoidal_cases, judge=_sinusoidal_judge),
    "ex-position-unshuffle": Judge(
        cases=_unshuffle_cases, judge=_unshuffle_judge),
    "ex-position-bias": Judge(cases=_bias_cases, judge=_bias_judge),
    "ex-position-experiment": Judge(
        cases=_positions_cases, judge=_positions_judge),
}
