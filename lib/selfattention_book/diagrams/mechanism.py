"""Diagrams of the mechanism: scaled dot-product attention
(:ref:`ch-definition`), multi-head attention (:ref:`ch-multihead`) and masked
scores (:ref:`ch-masks`)."""

from __future__ import annotations

import numpy as np

from selfattention import attention as _attention
from selfattention import masks
from ._base import (FILL, INK, SIZE, SMALL, WIDTH, _arrow, _box, _canvas,
                    _elbow, _example_attention, _head_fill, _heat, _label,
                    _mask_grid, _matrix, diagram)


# --------------------------------------------------- ch-definition
@diagram("attention", """
Data flow of scaled dot-product attention. The tokens X, n rows of width d,
are multiplied by three learned matrices W_Q, W_K and W_V, giving the
queries Q and keys K, n by d_k, and the values V, n by d_v. Q times K
transposed, divided by the square root of d_k, gives the n by n score matrix
S, drawn as a coloured grid; a softmax over each row turns it into the
weights A, whose rows sum to one; A times V gives the outputs Y, n by d_v,
one weighted average of the values for each token.""")
def scaled_dot_product():
    """:ref:`ch-definition`: X → W_Q, W_K, W_V → Q, K, V → QKᵀ/√d_k → softmax →
    A V."""
    n, d, d_k = 6, 8, 4
    _, _, _, _, S, A = _example_attention(n, d, d_k)
    fig, ax = _canvas(2.7)
    c = 0.1                                   # one cell of X, Q, K, V, Y
    rows = {"q": 2.05, "k": 1.3, "v": 0.55}   # centres of Q, K and V
    x = _matrix(ax, 0.15, 1.3 - n * c / 2, n, d, c, FILL["x"], "$X$",
                r"$n \times d$")
    qkv = {}
    for role, (W, name, shape) in {
            "q": ("W_Q", "Q", r"n \times d_k"),
            "k": ("W_K", "K", r"n \times d_k"),
            "v": ("W_V", "V", r"n \times d_v")}.items():
        y = rows[role]
        _arrow(ax, (x[0] + x[2] + 0.03, 1.3), (1.35, y))
        _box(ax, 1.35, y - 0.16, 0.5, 0.32, f"${W}$", FILL[role])
        _arrow(ax, (1.85, y), (2.1, y))
        qkv[role] = _matrix(ax, 2.1, y - n * c / 2, n, d_k, c, FILL[role],
                            f"${name}$")
        _label(ax, 2.1 + d_k * c + 0.06, y, f"${shape}$", size=SMALL,
               ha="left")
    # the scores, from Q and K
    h = 0.15                                  # one cell of S and A
    s = _heat(ax, 3.55, 1.675 - n * h / 2, S, h)
    for role in ("q", "k"):
        _arrow(ax, (3.05, rows[role]), (s[0] - 0.04, 1.675 + (
            0.2 if role == "q" else -0.2)))
    _label(ax, s[0] + s[2] / 2, s[1] + s[3] + 0.07,
           r"$S = QK^{\top}/\sqrt{d_k}$", va="bottom")
    _label(ax, s[0] + s[2] / 2, s[1] - 0.05, r"$n \times n$ scores",
           size=SMALL, va="top")
    # the weights
    a = _heat(ax, 5.2, s[1], A, h, vmin=0)
    _arrow(ax, (s[0] + s[2] + 0.04, 1.675), (a[0] - 0.04, 1.675))
    _label(ax, (s[0] + s[2] + a[0]) / 2, 1.675 + 0.06, "softmax",
           size=SMALL, va="bottom")
    _label(ax, (s[0] + s[2] + a[0]) / 2, 1.675 - 0.06, "of each row",
           size=SMALL, va="top")
    _label(ax, a[0] + a[2] / 2, a[1] + a[3] + 0.07,
           r"$A = \operatorname{softmax}(S)$", va="bottom")
    _label(ax, a[0] + a[2] / 2, a[1] - 0.05, "rows sum to 1", size=SMALL,
           va="top")
    # the outputs: A times V
    y = _matrix(ax, 6.55, 0.85 - n * c / 2, n, d_k, c, FILL["out"], "$Y$")
    _elbow(ax, [(a[0] + a[2] + 0.04, 1.675), (y[0] + y[2] / 2, 1.675),
                (y[0] + y[2] / 2, y[1] + y[3] + 0.04)])
    _elbow(ax, [(3.05, rows["v"]), (6.3, rows["v"]),
                (6.3, 0.85), (y[0] - 0.04, 0.85)])
    _label(ax, y[0] + y[2] / 2, y[1] - 0.05, r"$Y = AV$", va="top")
    _label(ax, y[0] + y[2] / 2, y[1] - 0.27, r"$n \times d_v$", size=SMALL,
           va="top")
    return fig


# ---------------------------------------------------- ch-multihead
def _strips(ax, x, y, w, height, h, name="", label_size=SIZE):
    """A matrix cut into ``h`` column strips, one colour per head."""
    from matplotlib.patches import Rectangle

    for i in range(h):
        ax.add_patch(Rectangle((x + i * w / h, y), w / h, height,
                               fc=_head_fill(i, h), ec=INK, lw=0.6))
    ax.add_patch(Rectangle((x, y), w, height, fill=False, ec=INK, lw=0.9))
    if name:
        _label(ax, x - 0.06, y + height / 2, name, size=label_size,
               ha="right")
    return (x, y, w, height)


@diagram("multihead", """
Multi-head attention with h = 4 heads. The tokens X, n by d, are projected
once each by W_Q, W_K and W_V into Q, K and V, n by d; each is cut along its
columns into h strips of width d_k = d/h, one colour per head. Head i runs
scaled dot-product attention on its own strips of Q, K and V and returns
head i, n by d_v. The h outputs are concatenated side by side into an n by
h d_v matrix, and W_O, h d_v by d, maps it back to the width d.""")
def multi_head():
    """:ref:`ch-multihead`: one projection, split into h heads of width d_k =
    d/h,
    attention per head, concatenation, W_O."""
    h = 4
    fig, ax = _canvas(2.75)
    x = _matrix(ax, 0.15, 1.35 - 0.3, 6, 8, 0.1, FILL["x"], "$X$",
                r"$n \times d$")
    # Q, K, V, each n × d, cut into h strips
    group = []
    for name, y in (("Q", 2.05), ("K", 1.35), ("V", 0.65)):
        start, end = (x[0] + x[2] + 0.03, 1.35), (1.62, y)
        _arrow(ax, start, end)
        above = 0.1 if name != "V" else -0.1
        _label(ax, (start[0] + end[0]) / 2 - 0.03, (start[1] + end[1]) / 2
               + above, f"$W_{name}$", size=SMALL, ha="right")
        group.append(_strips(ax, 1.9, y - 0.2, 0.8, 0.4, h, f"${name}$"))
    q = group[0]
    _label(ax, q[0] + q[2] / h / 2, q[1] + q[3] + 0.04, "$d_k$", size=SMALL,
           va="bottom")
    _label(ax, q[0] + q[2] / 2, q[1] + q[3] + 0.22,
           r"$n \times d$ each, cut into $h$ heads of $d_k = d/h$",
           size=SMALL, va="bottom")
    # one attention per head
    heads = []
    for i in range(h):
        y = 2.13 - i * 0.5
        _arrow(ax, (2.76, 1.35 + (1.5 - i) * 0.3), (3.15, y + 0.16))
        _box(ax, 3.15, y, 1.2, 0.32, "", _head_fill(i, h))
        _label(ax, 3.75, y + 0.16, f"attention, head {i + 1}", size=SMALL)
        heads.append(y + 0.16)
    _label(ax, 3.75, 0.3, r"head $i$: $\operatorname{softmax}(Q_i K_i^{\top}"
           r"/\sqrt{d_k})\,V_i$", size=SMALL)
    # concatenation
    cat = (4.9, 1.35 - 0.3, 0.8, 0.6)
    for i, y in enumerate(heads):
        _arrow(ax, (4.39, y), (cat[0] - 0.04, 1.35 + (1.5 - i) * 0.12))
    _strips(ax, *cat, h)
    _label(ax, cat[0] + cat[2] / 2, cat[1] + cat[3] + 0.06, "concatenate",
           size=SMALL, va="bottom")
    _label(ax, cat[0] + cat[2] / 2, cat[1] - 0.05, r"$n \times h d_v$",
           size=SMALL, va="top")
    # output projection
    _arrow(ax, (cat[0] + cat[2] + 0.03, 1.35), (5.9, 1.35))
    _box(ax, 5.9, 1.35 - 0.18, 0.45, 0.36, "$W_O$", FILL["op"])
    _label(ax, 6.125, 1.35 - 0.25, r"$h d_v \times d$", size=SMALL,
           va="top")
    _arrow(ax, (6.35, 1.35), (6.5, 1.35))
    _matrix(ax, 6.5, 1.35 - 0.3, 6, 6, 0.1, FILL["out"], "", "")
    _label(ax, 6.8, 1.35 - 0.36, r"$n \times d$", size=SMALL, va="top")
    return fig


# -------------------------------------------------------- ch-masks
def _write_cells(ax, grid, where, text, size=SMALL, color=INK):
    """Write ``text`` in the cells of a drawn grid where ``where`` holds."""
    x, y, w, h = grid
    rows, cols = where.shape
    for (r, c), yes in np.ndenumerate(where):
        if yes:
            _label(ax, x + (c + 0.5) * w / cols,
                   y + (rows - r - 0.5) * h / rows, text, size=size,
                   color=color)


@diagram("masks", """
A mask on the score matrix. Top row, left to right: the six by six scores S;
a causal mask, a grid whose dark cells mark True, query i may use key j,
and whose light cells mark False; the masked scores, where every False
entry has become minus infinity before the softmax; and the weights A after
the softmax of each row, exactly zero where the mask is False, each row
still summing to one. Bottom row, four masks as grids of queries (rows) by
keys (columns): causal, the lower triangle; padding, the last two keys of
six hidden from every query; local with radius 1, a band of three around
the diagonal; and windows, 16 patches of a 4 by 4 grid in windows of 2 by
2, each patch seeing the four of its own window.""")
def masked_scores():
    """:ref:`ch-masks`: −∞ before the softmax where the mask is False (True =
    this
    query may use this key); causal, padding, local and window masks."""
    n = 6
    X, Q, K, V, S, _ = _example_attention(n)
    mask = masks.causal_mask(n)
    _, A = _attention.attention(Q, K, V, mask=mask)
    fig, ax = _canvas(4.1)
    cell, top = 0.21, 2.45
    side = n * cell
    mid = top + side / 2
    lo, hi = S.min(), S.max()
    s = _heat(ax, 0.35, top, S, cell, vmin=lo, vmax=hi)
    _label(ax, s[0] + side / 2, top + side + 0.07, "scores $S$",
           va="bottom")
    _label(ax, s[0] - 0.06, mid, "query $i$", size=SMALL, rotation=90,
           ha="right")
    _label(ax, s[0] + side / 2, top - 0.05, "key $j$", size=SMALL,
           va="top")
    m = _mask_grid(ax, 2.05, top, mask, cell)
    _label(ax, m[0] + side / 2, top + side + 0.07, "mask (causal)",
           va="bottom")
    _label(ax, m[0] + side / 2, top - 0.05, "dark: True", size=SMALL,
           va="top")
    x2 = 3.8
    _elbow(ax, [(s[0] + side / 2, top - 0.24), (s[0] + side / 2, top - 0.33),
                (x2 + side / 2, top - 0.33), (x2 + side / 2, top - 0.04)])
    _arrow(ax, (m[0] + side + 0.05, mid), (x2 - 0.05, mid))
    t = _heat(ax, x2, top, np.where(mask, S, np.nan), cell, vmin=lo,
              vmax=hi)
    _write_cells(ax, t, ~mask, "\u2212\u221e")
    _label(ax, x2 + side / 2, top + side + 0.07,
           r"$-\infty$ where False", va="bottom")
    x3 = 5.72
    _arrow(ax, (x2 + side + 0.05, mid), (x3 - 0.05, mid))
    _label(ax, (x2 + side + x3) / 2, mid + 0.06, "softmax", size=SMALL,
           va="bottom")
    _label(ax, (x2 + side + x3) / 2, mid - 0.06, "each row", size=SMALL,
           va="top")
    a = _heat(ax, x3, top, np.where(mask, A, np.nan), cell, vmin=0,
              vmax=1)
    _write_cells(ax, a, ~mask, "0")
    _label(ax, x3 + side / 2, top + side + 0.07, "weights $A$",
           va="bottom")
    _label(ax, x3 + side / 2, top - 0.05, "rows sum to 1", size=SMALL,
           va="top")
    # four kinds of mask, as the library builds them, each 1.2 in wide
    kinds = [("causal", masks.causal_mask(n)),
             ("padding: 4 real tokens",
              masks.padding_mask(np.array([4]), n)[0]),
             ("local, radius 1", masks.local_mask(n, 1)),
             (r"windows $2 \times 2$, $4 \times 4$ grid",
              masks.window_mask((4, 4), 2))]
    for k, (title, grid) in enumerate(kinds):
        _mask_grid(ax, 0.35 + 1.75 * k, 0.25, grid, 1.2 / grid.shape[0],
                   title)
    _label(ax, WIDTH / 2, 1.86, "rows: queries $i$, columns: keys $j$; "
           "dark: query $i$ may use key $j$ (True)", size=SMALL)
    return fig
