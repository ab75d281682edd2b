"""The judges of :ref:`ch-position`, Position and equivariance: hidden cases,
judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import numpy as np
from selfattention_exercises.core import (
    Wrong,
    expect_shape,
    returned_array,
    returned_arrays,
    type_name,
)
from selfattention.position import relative_position_bias

from . import Judge


def _shift_cases(rng):
    drawn = {"d": 2 * int(rng.integers(2, 17)),
             "k": int(rng.choice([-1, 1]) * rng.integers(2, 60)),
             "base": float(10.0 ** rng.uniform(1, 5))}
    return [{"d": 8, "k": 3, "base": 10000.0}, drawn]


def shift_reference(d, k, base, exponent=2.0, layout="pairs"):
    """The (d, d) matrix that takes the code of position t to that of t + k.

    Pair i turns by k·ω_i, ω_i = base^(-exponent·i/d): sin(a + b) = sin a
    cos b + cos a sin b, cos(a + b) = cos a cos b - sin a sin b. ``layout``
    ``"halves"`` is the same map for codes with all sines first.
    """
    i = np.arange(d // 2)
    angle = k * float(base) ** (-exponent * i / d)         # (d/2,)
    cos, sin = np.cos(angle), np.sin(angle)
    s_, c_ = ((2 * i, 2 * i + 1) if layout == "pairs"
              else (i, i + d // 2))                      # sine, cosine rows
    M = np.zeros((d, d))
    M[s_, s_], M[s_, c_] = cos, sin
    M[c_, s_], M[c_, c_] = -sin, cos
    return M


def _shift_judge(M, d, k, base):
    M = returned_array(M, "shift_matrix")
    expect_shape(M, "M", (d, d), "(d, d)")
    ref = shift_reference(d, k, base)
    if np.allclose(M, ref, rtol=0, atol=1e-8):
        return None
    case = f"for d={d}, k={k}, base={base:.6g}"
    if np.allclose(M, ref.T, rtol=0, atol=1e-8):
        raise Wrong(f"{case} your matrix moves codes by -k: M E_t is "
                    f"E_(t-k). The new sine of a pair is sin(a + b) = sin a "
                    f"cos b + cos a sin b, with the code as a column on the "
                    f"right of M", "transposed")
    if np.allclose(M, shift_reference(d, 1, base), rtol=0, atol=1e-8):
        raise Wrong(f"{case} your matrix moves codes by one position: pair "
                    f"i turns by k·ω_i, not by ω_i", "k-missing")
    if np.allclose(M, shift_reference(d, k, base, exponent=1.0), rtol=0,
                   atol=1e-8):
        raise Wrong(f"{case} the frequencies are base^(-i/d); pair i of the "
                    f"encoding turns at ω_i = base^(-2i/d)",
                    "exponent-i-over-d")
    if base != 10000.0 and np.allclose(M, shift_reference(d, k, 10000.0),
                                       rtol=0, atol=1e-8):
        raise Wrong(f"{case} your matrix uses the base 10000, not the base "
                    f"it is given", "base-ignored")
    if np.allclose(M, shift_reference(d, k, base, layout="halves"), rtol=0,
                   atol=1e-8):
        raise Wrong(f"{case} your matrix acts on codes with all sines first; "
                    f"the encoding interleaves them: column 2i holds the sine"
                    f" of pair i, column 2i + 1 its cosine", "halves-layout")
    pair = np.arange(d) // 2
    if np.abs(M[pair[:, None] != pair[None, :]]).max() > 1e-8:
        raise Wrong(f"{case} your matrix mixes different column pairs; each"
                    f" pair turns on its own circle, so M is zero outside "
                    f"the 2 × 2 blocks on its diagonal", "mixes-pairs")
    raise Wrong(f"{case} M E_t is not E_(t+k): the 2 × 2 block of pair i "
                f"should turn (sin ω_i t, cos ω_i t) by the angle k·ω_i",
                "not-the-shift")


def _bias_gradient_cases(rng):
    rows, cols = 3, 4                      # not square: catches swapped axes
    drawn_rows = int(rng.integers(2, 6))
    drawn_cols = drawn_rows + int(rng.integers(1, 3))
    return [{"G": rng.standard_normal((r * c, r * c)), "rows": r, "cols": c}
            for r, c in [(rows, cols), (drawn_cols, drawn_rows)]]


def _table_index(rows, cols, row_major=True):
    """The table entry (row, column) that B[i, j] reads, as two (n, n)
    arrays; with ``row_major=False`` for tokens numbered column by
    column."""
    i = np.arange(rows * cols)
    r, c = np.divmod(i, cols) if row_major else np.divmod(i, rows)[::-1]
    return (r[:, None] - r[None, :] + rows - 1,
            c[:, None] - c[None, :] + cols - 1)


def bias_gradient_reference(G, rows, cols, row_major=True):
    """dL/dB̂: each table entry sums G over the pairs at its offset."""
    grad = np.zeros((2 * rows - 1, 2 * cols - 1))
    np.add.at(grad, _table_index(rows, cols, row_major), G)
    return grad


def _bias_gradient_judge(out, G, rows, cols):
    grad = returned_array(out, "bias_gradient")
    expect_shape(grad, "the gradient", (2 * rows - 1, 2 * cols - 1),
                 "(2·rows − 1, 2·cols − 1)", "one entry per table entry")
    ref = bias_gradient_reference(G, rows, cols)
    if np.allclose(grad, ref):
        return None
    case = f"for a grid of {rows} × {cols} patches"
    if np.allclose(grad, ref[::-1, ::-1]):
        raise Wrong(f"{case} every entry holds the gradient of the opposite "
                    f"offset: B[i, j] reads the offset query minus key, "
                    f"(r_i − r_j, c_i − c_j), so G[i, j] belongs there",
                    "offset-reversed")
    index = _table_index(rows, cols)
    last = np.zeros_like(ref)
    last[index] = G                        # what fancy indexing keeps
    if np.allclose(grad, last):
        raise Wrong(f"{case} each entry holds the gradient of one pair "
                    f"only: many pairs share an offset, and indexing with "
                    f"repeated indices (grad[dr, dc] += G) writes each entry "
                    f"once instead of adding. Sum over every pair at the "
                    f"offset", "duplicates-dropped")
    pairs = bias_gradient_reference(np.ones_like(G), rows, cols)
    if np.allclose(grad, ref / pairs):
        raise Wrong(f"{case} you average G over the pairs at each offset; "
                    f"the loss changes by every pair's G when the entry "
                    f"changes, so the gradient is their sum", "mean-not-sum")
    if np.allclose(grad, bias_gradient_reference(G, rows, cols,
                                                 row_major=False)):
        raise Wrong(f"{case} your tokens are numbered column by column; "
                    f"the grid is row-major: token i sits in row i // cols, "
                    f"column i % cols", "not-row-major")
    raise Wrong(f"{case} the gradient of table entry (Δr + rows − 1, Δc + "
                f"cols − 1) is the sum of G[i, j] over the pairs whose "
                f"offset is (Δr, Δc)", "not-the-gradient")


# The cases of 5.3: tables with some symmetry (or none), each with a shuffle
# of the grid that it allows or not.
def _grid_perm(rows, cols, where):
    """The shuffle that puts in slot (r, c) the token of ``where(r, c)``."""
    r, c = np.divmod(np.arange(rows * cols), cols)
    src_r, src_c = where(r, c)
    return (src_r * cols + src_c).astype(np.int64)


def _table(rng, rows, cols, kind):
    dr, dc = np.meshgrid(np.arange(1 - rows, rows), np.arange(1 - cols, cols),
                         indexing="ij")                 # (2R-1, 2C-1)
    T = rng.standard_normal(dr.shape)
    if kind == "point":                                 # T(-Δ) = T(Δ)
        return (T + T[::-1, ::-1]) / 2
    if kind == "rows":                                  # T(-Δr, Δc) = T(Δ)
        return (T + T[::-1, :]) / 2
    if kind == "swap":                                  # T(Δc, Δr) = T(Δ)
        return (T + T.T) / 2
    if kind == "radial":                                # a function of |Δ|²
        values = rng.standard_normal(2 * rows ** 2 + 1)
        return values[dr ** 2 + dc ** 2]
    if kind == "constant":
        return np.full(dr.shape, rng.standard_normal())
    if kind == "rows-only":                             # h(Δr)
        return rng.standard_normal(2 * rows - 1)[dr + rows - 1]
    if kind == "diagonals-only":                        # h(Δr + Δc)
        return rng.standard_normal(2 * (rows + cols) - 3)[
            dr + dc + rows + cols - 2]
    return T                                            # no symmetry


def _within(rng, groups):
    """A shuffle that keeps every token in its group and moves some."""
    while True:
        perm = np.arange(groups.size)
        for g in np.unique(groups):
            members = np.flatnonzero(groups == g)
            perm[members] = rng.permutation(members)
        if not np.array_equal(perm, np.arange(groups.size)):
            return perm


def _equivariance_cases(rng):
    def side():
        return int(rng.integers(2, 6))

    cases = []

    def add(rows, cols, table, perm):
        cases.append({"table": _table(rng, rows, cols, table),
                      "rows": rows, "cols": cols,
                      "perm": np.asarray(perm, dtype=np.int64)})

    R, C = side(), side()
    add(R, C, "none", np.arange(R * C))                          # identity
    R, C = side(), side() + 1
    add(R, C, "none", rng.permutation(R * C))                    # random
    R, C = side(), side()
    s = int(rng.integers(1, C))
    add(R, C, "none", _grid_perm(R, C, lambda r, c: (r, (c - s) % C)))
    R, C = side(), side()
    add(R, C, "point", np.arange(R * C)[::-1])                   # half-turn
    R, C = side(), side()
    add(R, C, "rows", _grid_perm(R, C, lambda r, c: (R - 1 - r, c)))
    add(R, C, "rows", _grid_perm(R, C, lambda r, c: (r, C - 1 - c)))
    R, C = side(), side()
    add(R, C, "point", _grid_perm(R, C, lambda r, c: (R - 1 - r, c)))
    N = side()
    add(N, N, "swap", _grid_perm(N, N, lambda r, c: (c, r)))     # transpose
    add(N, N, "swap", _grid_perm(N, N, lambda r, c: (c, N - 1 - r)))
    add(N, N, "radial", _grid_perm(N, N, lambda r, c: (c, N - 1 - r)))
    R, C = side(), side()
    add(R, C, "constant", rng.permutation(R * C))
    R, C = side(), side()
    r, c = np.divmod(np.arange(R * C), C)
    add(R, C, "rows-only", _within(rng, r))                      # in rows
    order = _within(rng, np.zeros(R, dtype=int))                 # rows moved
    add(R, C, "rows-only", _grid_perm(R, C, lambda r, c: (order[r], c)))
    R, C = side(), side()
    r, c = np.divmod(np.arange(R * C), C)
    add(R, C, "diagonals-only", _within(rng, r + c))
    # The identity first; the others in a drawn order, which an answer
    # that counts its calls cannot know.
    return cases[:1] + [cases[1 + k] for k in rng.permutation(len(cases) - 1)]


def equivariance_change(table, rows, cols, perm):
    """PᵀBP - B for the bias B of ``table`` and the shuffle ``perm``
    (``X[perm]``): the change of the bias seen from the tokens."""
    B = relative_position_bias(table, (rows, cols))     # (n, n)
    back = np.argsort(perm)                             # slot of each token
    return B[back][:, back] - B


def _equivariance_judge(out, table, rows, cols, perm):
    if type(out) is not bool:
        raise Wrong(f"still_equivariant should return True or False, got "
                    f"{type_name(out)}", "type")
    D = equivariance_change(table, rows, cols, perm)
    truth = bool(np.abs(D).max() < 1e-6)
    if out == truth:
        return None
    n = rows * cols
    grid = f"on a {rows} × {cols} grid"
    if not out:
        if np.array_equal(perm, np.arange(n)):
            raise Wrong(f"{grid} with perm the identity, nothing moves: the "
                        f"layer stays equivariant", "identity")
        raise Wrong(f"{grid} the layer stays equivariant under this shuffle:"
                    f" every pair of tokens lands at an offset where the "
                    f"table holds the same number, so PᵀBP = B",
                    "symmetry-missed")
    i, j = np.unravel_index(np.argmax(np.abs(D)), D.shape)
    back = np.argsort(perm)                             # slot of each token
    pos = np.stack(np.divmod(np.arange(n), cols), axis=1)
    before = tuple(int(v) for v in pos[i] - pos[j])
    after = tuple(int(v) for v in pos[back[i]] - pos[back[j]])
    moved = (f"tokens {i} and {j} go from offset {before} to {after}, where "
             f"the table holds another number")
    torus = any(np.array_equal(perm, _grid_perm(
        rows, cols, lambda r, c, a=a, b=b: ((r - a) % rows, (c - b) % cols)))
        for a in range(rows) for b in range(cols))
    if torus:
        raise Wrong(f"{grid} this cyclic shift breaks equivariance: it keeps "
                    f"offsets only on a torus, and the bias is not circular "
                    f"({moved})", "not-a-torus")
    raise Wrong(f"{grid} this shuffle breaks equivariance: {moved}",
                "broken-missed")


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
    "ex-position-shift": Judge(cases=_shift_cases, judge=_shift_judge),
    "ex-position-bias-gradient": Judge(cases=_bias_gradient_cases,
                                       judge=_bias_gradient_judge),
    "ex-position-bias-equivariance": Judge(
        cases=_equivariance_cases, judge=_equivariance_judge),
    "ex-position-experiment": Judge(
        cases=_positions_cases, judge=_positions_judge),
}
