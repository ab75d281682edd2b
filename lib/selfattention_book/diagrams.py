"""Schematic diagrams of the book's mechanisms, one function per diagram.

Each function returns a :class:`matplotlib.figure.Figure` drawn from the
library itself: the score matrices are computed by
:func:`~selfattention.attention.attention`, the masks by
:mod:`~selfattention.masks`, the windows by :mod:`~selfattention.windows`,
the counts by :mod:`~selfattention.cost`, so that a change there changes the
picture. ``scripts/diagrams.py`` (``make diagrams``) saves every diagram as
SVG under ``_static/diagrams/`` with its alt text in ``manifest.json``.

Every figure is drawn on one axes whose data units are inches, on a white
card (readable on the dark theme too), at most ``DISPLAY_IN`` wide, so
that it is shown at its own size in the text column and a font size in
points is the size a reader sees; no text is smaller than ``MIN_PT``.
Symbols are mathtext in the notation of the book (appendices/notation.md).
"""

from __future__ import annotations

import io
import re

import numpy as np

from selfattention import attention as _attention
from selfattention import cost, masks, windows
from selfattention.plots import ACCENT, CMAP

__all__ = ["DIAGRAMS", "ALT", "DISPLAY_PX", "DISPLAY_IN", "MIN_PT",
           "scaled_dot_product", "multi_head", "masked_scores",
           "transformer_block", "vit_pipeline", "tokenisation_cost",
           "swin_windows", "nonlocal_block", "cross_attention_correlation",
           "draw", "to_svg", "smallest_text_pt", "SVG_DPI"]

DISPLAY_PX = 700            # width of the book's text column, CSS pixels
CSS_PX_PER_IN = 96          # CSS pixels per inch, the size of an SVG's pt
DISPLAY_IN = DISPLAY_PX / CSS_PX_PER_IN   # a figure this wide: shown 1:1
MIN_PT = 8                  # smallest text at the displayed size
SVG_DPI = 2 * CSS_PX_PER_IN  # pictures in an SVG: sharp on a 2x screen
WIDTH = 7.2                 # inches; every diagram fits the column

INK = "#222222"             # text and outlines
RULE = "#666666"            # arrows and thin lines
CARD = "white"
MATH = "cm"                 # mathtext close to the book's TeX (MathJax)
SIZE = 9                    # ordinary labels
SMALL = 8                   # shapes and notes, the smallest we write

DIAGRAMS: dict = {}         # name -> function
ALT: dict[str, str] = {}    # name -> alt text


def _cmap(name=CMAP):
    import matplotlib

    return matplotlib.colormaps[name]


def _tint(x: float, white: float = 0.55):
    """A light fill: viridis at ``x`` mixed with white (grey-readable)."""
    r, g, b, _ = _cmap()(x)
    return tuple(white + (1 - white) * c for c in (r, g, b))


# roles, each a distinct lightness of the book's colour map
FILL = {"x": "#eeeeee", "q": _tint(0.1), "k": _tint(0.45), "v": _tint(0.8),
        "op": "white", "out": _tint(0.62, 0.7), "norm": "#e4e4e4"}


def diagram(name: str, alt: str):
    """Register a diagram function under ``name`` with its alt text."""
    def register(fn):
        DIAGRAMS[name] = fn
        # read aloud: "d sub k" rather than "d underscore k"
        ALT[name] = re.sub(r"\b([A-Za-z])_(\w+)", r"\1 sub \2",
                           " ".join(alt.split()))
        return fn
    return register


def draw(name: str):
    """The figure of diagram ``name`` (a key of ``DIAGRAMS``)."""
    if name not in DIAGRAMS:
        raise ValueError(f"name must be one of {sorted(DIAGRAMS)}, "
                         f"got {name!r}")
    return DIAGRAMS[name]()


def smallest_text_pt(fig) -> float:
    """The smallest font size of the figure's texts, in points as shown in
    the column (an SVG wider than ``DISPLAY_PX`` is shrunk to fit)."""
    from matplotlib.text import Text

    width_px = fig.get_figwidth() * CSS_PX_PER_IN
    scale = min(DISPLAY_PX, width_px) / width_px
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text()]
    return min(sizes) * scale


def to_svg(fig) -> bytes:
    """The figure as SVG bytes that depend only on the drawing: text as
    paths, ids from a fixed salt, no date. Its description records the
    smallest text as shown, for checks that cannot measure paths."""
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "selfattention-diagrams",
                                "svg.fonttype": "path"}):
        buffer = io.BytesIO()
        # pictures inside are resampled (nearest pixel) at this dpi: two
        # image pixels per CSS pixel, sharp on a 2x screen
        shown = min(DISPLAY_PX, round(fig.get_figwidth() * CSS_PX_PER_IN))
        fig.savefig(buffer, format="svg", facecolor=CARD, dpi=SVG_DPI,
                    metadata={"Date": None, "Description": (
                        f"smallest text {smallest_text_pt(fig):.1f} pt "
                        f"when shown {shown} CSS px wide")})
    return buffer.getvalue()


# ---------------------------------------------------------------- helpers
def _canvas(height: float, width: float = WIDTH):
    """A white figure with one axes in inches, (0, 0) at the bottom left."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), facecolor=CARD)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def _label(ax, x, y, text, size=SIZE, **kw):
    """Text centred on (x, y) unless told otherwise, in the book's fonts."""
    kw = {"ha": "center", "va": "center", "color": INK, **kw}
    return ax.text(x, y, text, fontsize=size, math_fontfamily=MATH,
                   family="DejaVu Sans", **kw)


def _box(ax, x, y, w, h, text="", fill=FILL["op"], size=SIZE, lw=0.9,
         round_=True):
    """A rounded box with its lower left corner at (x, y), text inside."""
    from matplotlib.patches import FancyBboxPatch

    style = "round,pad=0,rounding_size=0.06" if round_ else "square,pad=0"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, fc=fill,
                                ec=INK, lw=lw))
    if text:
        _label(ax, x + w / 2, y + h / 2, text, size=size)
    return (x, y, w, h)


def _arrow(ax, start, end, bend: float = 0.0, color=RULE, lw=1.0,
           style="-|>"):
    """An arrow from ``start`` to ``end``; ``bend`` curves it."""
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(
        start, end, arrowstyle=style, mutation_scale=9, color=color, lw=lw,
        shrinkA=0, shrinkB=0, connectionstyle=f"arc3,rad={bend}"))


def _elbow(ax, points, color=RULE, lw=1.0):
    """A polyline through ``points`` whose last segment ends in an arrow."""
    xs, ys = zip(*points)
    ax.plot(xs[:-1], ys[:-1], color=color, lw=lw, solid_capstyle="butt")
    _arrow(ax, points[-2], points[-1], color=color, lw=lw)


def _matrix(ax, x, y, rows, cols, cell, fill, name="", shape="",
            size=SIZE, lines=True):
    """A matrix of ``rows × cols`` cells drawn as a block, lower left (x, y);
    ``name`` inside, ``shape`` under it. Returns (x, y, w, h)."""
    from matplotlib.patches import Rectangle

    w, h = cols * cell, rows * cell
    ax.add_patch(Rectangle((x, y), w, h, fc=fill, ec=INK, lw=0.9))
    if lines:
        for r in range(1, rows):
            ax.plot([x, x + w], [y + r * cell] * 2, color="white", lw=0.6)
        for c in range(1, cols):
            ax.plot([x + c * cell] * 2, [y, y + h], color="white", lw=0.6)
    if name:
        _label(ax, x + w / 2, y + h / 2, name, size=size)
    if shape:
        _label(ax, x + w / 2, y - 0.05, shape, size=SMALL, va="top")
    return (x, y, w, h)


def _heat(ax, x, y, values, cell, cmap=CMAP, vmin=None, vmax=None,
          edge="white"):
    """Colour a matrix cell by cell (row 0 on top), lower left (x, y):
    vector squares, sharp at any zoom. NaN cells are left light grey."""
    from matplotlib.patches import Rectangle

    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    lo = finite.min() if vmin is None else vmin
    hi = finite.max() if vmax is None else vmax
    colours = _cmap(cmap)
    rows, cols = values.shape
    for (r, c), v in np.ndenumerate(values):
        fc = (colours((v - lo) / (hi - lo or 1)) if np.isfinite(v)
              else "#e8e8e8")
        ax.add_patch(Rectangle((x + c * cell, y + (rows - 1 - r) * cell),
                               cell, cell, fc=fc, ec=edge, lw=0.5))
    ax.add_patch(Rectangle((x, y), cols * cell, rows * cell, fill=False,
                           ec=INK, lw=0.9))
    return (x, y, cols * cell, rows * cell)


def _mask_grid(ax, x, y, mask, cell, title=""):
    """A boolean mask as a grid: dark = may use, light = blocked (the
    colours of :func:`~selfattention.plots.show_mask`)."""
    from matplotlib.patches import Rectangle

    mask = np.asarray(mask, dtype=bool)
    greys = _cmap("Greys")
    rows, cols = mask.shape
    for (r, c), allowed in np.ndenumerate(mask):
        ax.add_patch(Rectangle(
            (x + c * cell, y + (rows - 1 - r) * cell), cell, cell,
            fc=greys(0.85 if allowed else 0.08), ec="white", lw=0.4))
    ax.add_patch(Rectangle((x, y), cols * cell, rows * cell, fill=False,
                           ec=INK, lw=0.9))
    if title:
        _label(ax, x + cols * cell / 2, y + rows * cell + 0.06, title,
               size=SMALL, va="bottom")
    return (x, y, cols * cell, rows * cell)


def _plus(ax, x, y, r=0.11):
    """A residual addition: a circled plus centred on (x, y)."""
    from matplotlib.patches import Circle

    ax.add_patch(Circle((x, y), r, fc="white", ec=INK, lw=0.9))
    ax.plot([x - r * 0.6, x + r * 0.6], [y, y], color=INK, lw=0.9)
    ax.plot([x, x], [y - r * 0.6, y + r * 0.6], color=INK, lw=0.9)


def _example_attention(n=6, d=8, d_k=4, seed=0):
    """Scores, weights and the pieces of a small random self-attention,
    computed by the library: (X, Q, K, V, S, A)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    W_q, W_k, W_v = (rng.standard_normal((d, d_k)) / np.sqrt(d)
                     for _ in range(3))
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    S = Q @ K.T / np.sqrt(d_k)                     # (n, n) scaled scores
    _, A = _attention.attention(Q, K, V)           # (n, n) weights
    return X, Q, K, V, S, A


# ------------------------------------------------------------- chapter 1
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


# ------------------------------------------------------------- chapter 3
def _head_fill(i: int, h: int):
    """Fill of head ``i`` of ``h``: evenly spaced lightnesses of viridis."""
    return _tint(0.1 + 0.8 * i / max(h - 1, 1), 0.45)


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


# ------------------------------------------------------------- chapter 4
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


# ------------------------------------------------------------- chapter 6
@diagram("transformer_block", """
The pre-LN transformer block. The tokens X, n by d, enter on the left. A
layer normalisation feeds multi-head self-attention, where the tokens
exchange information, and a residual connection adds its output to X,
giving X'. A second layer normalisation feeds the MLP, which widens each
token from d to d_mlp, applies a GELU and narrows it back to d, one token at
a time; a second residual connection adds its output to X', giving X'', n by
d, the input of the next block.""")
def transformer_block():
    """:ref:`ch-transformer`: LN → multi-head attention → add → LN → MLP →
    add."""
    from matplotlib.patches import FancyBboxPatch

    fig, ax = _canvas(2.35)
    y, top = 1.2, 1.85                       # main line, residual line
    ax.add_patch(FancyBboxPatch(
        (0.92, 0.62), 5.72, 1.62, boxstyle="round,pad=0,rounding_size=0.08",
        fill=False, ec=RULE, lw=0.8, ls=(0, (4, 3))))
    _label(ax, 0.98, 2.2, "one block", size=SMALL, ha="left", va="top",
           color=RULE)
    _matrix(ax, 0.15, y - 0.24, 6, 6, 0.08, FILL["x"], "", "")
    _label(ax, 0.39, y - 0.3, r"$X$, $n \times d$", size=SMALL, va="top")
    for start, stop, step, extra in (
            (0.75, 3.45, ("LN", "multi-head\nattention"), "q"),
            (3.85, 6.45, ("LN", "MLP"), "v")):
        _arrow(ax, (start - 0.12 if start < 1 else start, y), (start + 0.3, y))
        ln = _box(ax, start + 0.3, y - 0.2, 0.42, 0.4, step[0], FILL["norm"])
        _arrow(ax, (ln[0] + ln[2], y), (ln[0] + ln[2] + 0.2, y))
        body = _box(ax, ln[0] + ln[2] + 0.2, y - 0.27, 1.2, 0.54, step[1],
                    FILL[extra])
        _arrow(ax, (body[0] + body[2], y), (stop - 0.13, y))
        _plus(ax, stop, y)
        _elbow(ax, [(start + 0.12, y), (start + 0.12, top), (stop, top),
                    (stop, y + 0.12)])
        _label(ax, (start + stop) / 2 + 0.05, top + 0.06, "residual",
               size=SMALL, va="bottom")
        if extra == "q":
            _label(ax, body[0] + body[2] / 2, body[1] - 0.06,
                   r"$h$ heads, $W_O$", size=SMALL, va="top")
        else:
            _label(ax, body[0] + body[2] / 2, body[1] - 0.06,
                   r"$d \to d_{\mathrm{mlp}} \to d$, GELU", size=SMALL,
                   va="top")
    _arrow(ax, (3.58, y), (3.85, y))
    _label(ax, 3.72, y + 0.1, "$X'$", va="bottom")
    _arrow(ax, (6.58, y), (6.7, y))
    _matrix(ax, 6.7, y - 0.24, 6, 6, 0.08, FILL["out"], "", "")
    _label(ax, 6.94, y - 0.3, r"$X''$", size=SMALL, va="top")
    _label(ax, WIDTH / 2, 0.3,
           r"$X' = X + \operatorname{MSA}(\operatorname{LN}(X)), \qquad "
           r"X'' = X' + \operatorname{MLP}(\operatorname{LN}(X'))$")
    return fig


def _image(ax, img, x, y, w, h, grid=None, vmin=0.0, vmax=1.0):
    """A greyscale picture in the box (x, y, w, h), optionally with the
    lines of a ``grid = (rows, cols)`` of patches over it."""
    from matplotlib.patches import Rectangle

    ax.imshow(img, cmap="gray", vmin=vmin, vmax=vmax, extent=(x, x + w, y,
              y + h), interpolation="nearest", zorder=1)
    if grid is not None:
        rows, cols = grid
        for r in range(1, rows):
            ax.plot([x, x + w], [y + r * h / rows] * 2, color=ACCENT, lw=0.6,
                    alpha=0.8, zorder=2)
        for c in range(1, cols):
            ax.plot([x + c * w / cols] * 2, [y, y + h], color=ACCENT, lw=0.6,
                    alpha=0.8, zorder=2)
    ax.add_patch(Rectangle((x, y), w, h, fill=False, ec=INK, lw=0.9,
                           zorder=3))
    ax.set_xlim(0, ax.figure.get_figwidth())     # imshow resets the limits
    ax.set_ylim(0, ax.figure.get_figheight())
    ax.set_aspect("auto")
    return (x, y, w, h)


def _column(ax, x, y_top, count, w, cell, fills, names=()):
    """A column of ``count`` token rows from ``y_top`` down."""
    from matplotlib.patches import Rectangle

    for i in range(count):
        ax.add_patch(Rectangle((x, y_top - (i + 1) * cell), w, cell,
                               fc=fills[i] if i < len(fills) else fills[-1],
                               ec=INK, lw=0.5))
    return (x, y_top - count * cell, w, count * cell)


VIT_PATCH = 4                    # chapter 6: 28 × 28 digits, 7 × 7 patches
SHOWN = 6                        # token rows drawn before the ellipsis


def _token_rows(ax, x, y_top, w, cell, fills, cls=None):
    """A column of tokens: an optional class token, ``SHOWN`` rows, an
    ellipsis and the last row. ``fills`` gives a colour per drawn row."""
    from matplotlib.patches import Rectangle

    rows = ([cls] if cls is not None else []) + list(fills[:SHOWN]) + [
        None, fills[-1]]
    for i, fill in enumerate(rows):
        y = y_top - (i + 1) * cell
        if fill is None:
            _label(ax, x + w / 2, y + cell / 2, "\u22ee", size=SIZE)
            continue
        ax.add_patch(Rectangle((x, y), w, cell, fc=fill, ec=INK, lw=0.6))
    return (x, y_top - len(rows) * cell, w, len(rows) * cell)


@diagram("vit", f"""
The vision transformer pipeline. A 28 by 28 handwritten digit is cut into a
7 by 7 grid of patches of {VIT_PATCH} by {VIT_PATCH} pixels: n = 49 tokens
of p squared = {VIT_PATCH ** 2} values each, drawn as a column of patches.
One linear map W_E embeds every patch to width d; a learned class token
x_cls is placed in front, and the position embeddings E, one per slot, are
added: 1 + n tokens of width d. L transformer blocks process them. The
class token's output alone goes through a layer normalisation and a linear
head to ten class scores, one per digit.""")
def vit_pipeline():
    """:ref:`ch-transformer`: image → patches → W_E, + E, class token → L
    blocks →
    class token → head."""
    from selfattention import data, patches

    images, _ = data.mnist_digits()
    img, p = images[0], VIT_PATCH
    side = img.shape[0] // p                              # 7 patches a side
    fig, ax = _canvas(2.55)
    top, cell, mid = 2.15, 0.17, 1.3
    pic = _image(ax, img, 0.15, mid - 0.6, 1.2, 1.2, grid=(side, side))
    _label(ax, pic[0] + pic[2] / 2, pic[1] - 0.05,
           rf"${side} \times {side}$ patches, $p = {p}$", size=SMALL,
           va="top")
    _arrow(ax, (1.4, mid), (1.62, mid))
    # the patches, one per row, as their pixels
    tiles = patches.patchify(img, p)                      # (49, 16)
    shown = [*range(SHOWN), len(tiles) - 1]
    rows = [*range(SHOWN), SHOWN + 1]                     # skip the ellipsis
    for i, k in zip(rows, shown):
        _image(ax, tiles[k].reshape(p, p), 1.67,
               top - cell - (i + 1) * cell + 0.01, cell - 0.02, cell - 0.02)
    _label(ax, 1.67 + cell / 2, top - cell - (SHOWN + 0.5) * cell, "\u22ee",
           size=SIZE)
    _label(ax, 1.75, top - cell * 9 - 0.05, f"$n = {len(tiles)}$",
           size=SMALL, va="top")
    _label(ax, 1.75, top - cell * 9 - 0.23, f"$p^2 = {p * p}$ values",
           size=SMALL, va="top")
    _arrow(ax, (1.9, mid), (2.08, mid))
    _box(ax, 2.08, mid - 0.18, 0.45, 0.36, "$W_E$", FILL["k"])
    _arrow(ax, (2.53, mid), (2.78, mid))
    # class token + embedded patches, plus position embeddings
    cls = _tint(0.95, 0.3)
    col = _token_rows(ax, 2.85, top, 0.5, cell, [FILL["k"]] * 7, cls)
    _label(ax, 2.8, top - cell / 2, r"$\mathbf{x}_{\mathrm{cls}}$",
           size=SMALL, ha="right")
    _label(ax, 3.1, top + 0.05, "$d$", size=SMALL, va="bottom")
    _label(ax, 3.55, mid, "+", size=12)
    _token_rows(ax, 3.7, top, 0.3, cell, ["#dddddd"] * 7, "#dddddd")
    _label(ax, 3.85, top + 0.05, "$E$", size=SMALL, va="bottom")
    _label(ax, 3.43, col[1] - 0.05, "$1 + n$ tokens", size=SMALL, va="top")
    _arrow(ax, (4.05, mid), (4.25, mid))
    blocks = _box(ax, 4.25, mid - 0.75, 1.0, 1.5, "", FILL["q"])
    _label(ax, 4.75, mid + 0.25, "transformer", size=SIZE)
    _label(ax, 4.75, mid + 0.05, "block", size=SIZE)
    _label(ax, 4.75, mid - 0.25, r"$\times\, L$", size=SIZE)
    _arrow(ax, (blocks[0] + blocks[2], mid), (5.45, mid))
    out = _token_rows(ax, 5.48, top, 0.3, cell, ["#eeeeee"] * 7, cls)
    _label(ax, 5.63, out[1] - 0.05, "outputs", size=SMALL, va="top")
    _arrow(ax, (5.81, top - cell / 2), (6.1, top - cell / 2))
    _label(ax, 5.9, top + 0.05, "class token", size=SMALL, va="bottom")
    head = _box(ax, 6.1, top - 0.55, 0.7, 0.5, "LN,\nlinear", FILL["out"],
                size=SMALL)
    _arrow(ax, (6.45, head[1]), (6.45, 1.2))
    _matrix(ax, 5.95, 1.0, 1, 10, 0.1, FILL["out"])
    _label(ax, 6.45, 0.95, "10 class", size=SMALL, va="top")
    _label(ax, 6.45, 0.78, "scores", size=SMALL, va="top")
    return fig


# ------------------------------------------------------------- chapter 7
IMAGE_SIDE = 224
COST_PATCHES = (32, 16, 8)


def _count(v: int) -> str:
    return f"{v:,}"


def _cost_rows():
    """(P, n, entries) for the patch sides drawn, then one token a pixel."""
    rows = []
    for P in (*COST_PATCHES, 1):
        n = cost.tokens(IMAGE_SIDE, P)
        rows.append((P, n, cost.score_entries(n)))
    return rows


def _cost_alt() -> str:
    (*drawn, (_, n1, e1)) = _cost_rows()
    parts = "; ".join(f"patches of {P} by {P} pixels give n = {_count(n)} "
                      f"tokens and {_count(e)} score entries per head"
                      for P, n, e in drawn)
    return (f"How the patch size sets the cost. A {IMAGE_SIDE} by "
            f"{IMAGE_SIDE} image is drawn three times with its patch grid; "
            f"{parts}. Under each image its n by n score matrix is drawn as "
            f"a square whose side is proportional to n, all on one scale. "
            f"With one token per pixel, n = {_count(n1)} and a head holds "
            f"{_count(e1)} entries, "
            f"{cost.human_bytes(cost.attention_bytes(n1))} in float32: its "
            f"square, on the same scale, would be "
            f"{n1 // drawn[-1][1]} times as wide as the largest one drawn.")


@diagram("cost", _cost_alt())
def tokenisation_cost():
    """:ref:`ch-cost`: patch side P → n = HW/P² tokens → an n × n score matrix
    per head, drawn to one scale; one token per pixel off the page."""
    from matplotlib.patches import Rectangle

    from selfattention import data

    rows = _cost_rows()
    fig, ax = _canvas(3.4)
    side, largest = 1.15, rows[len(COST_PATCHES) - 1][1]
    per_token = 1.25 / largest                     # inches per token
    img = data.two_squares(np.random.default_rng(0), IMAGE_SIDE, noise=0)
    for k, (P, n, entries) in enumerate(rows[:-1]):
        x = 0.2 + 1.6 * k
        g = IMAGE_SIDE // P
        _image(ax, 0.15 + 0.7 * img, x, 1.95, side, side, grid=(g, g))
        _label(ax, x + side / 2, 1.95 + side + 0.06,
               f"$P = {P}$: $n = {_count(n)}$".replace(",", "{,}"),
               va="bottom")
        w = n * per_token
        ax.add_patch(Rectangle((x + side / 2 - w / 2, 1.65 - w), w, w,
                               fc=_tint(0.35, 0.25), ec=INK, lw=0.9))
        _label(ax, x + side / 2, 1.6 - w, f"{_count(entries)} entries",
               size=SMALL, va="top")
        _arrow(ax, (x + side / 2, 1.91), (x + side / 2, 1.69))
    for i, line in enumerate((r"squares: the $n \times n$ scores of one",
                              r"head, side proportional to $n$,",
                              "one scale for all")):
        _label(ax, 0.2, 0.85 - 0.18 * i, line, size=SMALL, ha="left",
               va="top")
    P, n, entries = rows[-1]
    x, wide = 5.0, n * per_token
    lines = [("one token per pixel ($P = 1$):", SIZE),
             (f"$n = {_count(n)}$".replace(",", "{,}") + " tokens", SIZE),
             (f"{_count(entries)} entries", SIZE),
             (f"{cost.human_bytes(cost.attention_bytes(n))} in float32,",
              SIZE),
             ("per head and layer", SIZE)]
    for i, (line, size) in enumerate(lines):
        _label(ax, x, 3.25 - 0.22 * i, line, size=size, ha="left",
               va="top")
    # the top-left corner of the P = 1 square, top-aligned with the others
    ax.add_patch(Rectangle((x, 0.05), WIDTH - 0.03 - x, 1.6,
                           fc=_tint(0.35, 0.6), ec="none"))
    ax.plot([x, WIDTH - 0.03], [1.65, 1.65], color=INK, lw=0.9)
    ax.plot([x, x], [1.65, 0.05], color=INK, lw=0.9)
    for i, line in enumerate(("its corner, on the same scale:",
                              f"the square would be {wide:.0f} in wide,",
                              f"{n // largest} times the one for "
                              f"$P = {COST_PATCHES[-1]}$")):
        _label(ax, x + 0.1, 1.5 - 0.2 * i, line, size=SMALL, ha="left",
               va="top")
    return fig


# ------------------------------------------------------------- chapter 8
SWIN_M = 7                       # Swin's window side
SWIN_GRID = (14, 14)             # 2 × 2 windows of 7 × 7 patches


def _regions(ax, x, y, ids, cell, letters=None, borders=None):
    """A patch grid coloured by region ``ids`` (H, W), each region's letter
    written at its centre; ``borders``: window side for accent lines."""
    from matplotlib.patches import Rectangle

    H, W = ids.shape
    kinds = np.unique(ids)
    for (r, c), k in np.ndenumerate(ids):
        shade = 0.15 + 0.7 * (np.searchsorted(kinds, k) * 5 % len(kinds)) \
            / max(len(kinds) - 1, 1)
        ax.add_patch(Rectangle((x + c * cell, y + (H - 1 - r) * cell), cell,
                               cell, fc=_tint(shade, 0.5), ec="white",
                               lw=0.3))
    if letters is not None:
        # one letter per connected piece: label (H, W) of pieces
        for piece in np.unique(letters):
            rr, cc = np.nonzero(letters == piece)
            if not rr.size:
                continue
            _label(ax, x + (cc.mean() + 0.5) * cell,
                   y + (H - rr.mean() - 0.5) * cell,
                   "ABCDEFGHI"[ids[rr[0], cc[0]]], size=SMALL)
    if borders:
        for k in range(0, H + 1, borders):
            ax.plot([x, x + W * cell], [y + k * cell] * 2, color=INK, lw=1.6)
        for k in range(0, W + 1, borders):
            ax.plot([x + k * cell] * 2, [y, y + H * cell], color=INK, lw=1.6)
    ax.add_patch(Rectangle((x, y), W * cell, H * cell, fill=False, ec=INK,
                           lw=1.2))
    return (x, y, W * cell, H * cell)


def _pieces(ids, M):
    """Label every (region, window) piece of a grid with its own number."""
    H, W = ids.shape
    r, c = np.indices((H, W))
    return ids * 10_000 + (r // M) * (W // M) + c // M


@diagram("swin", f"""
Swin's windows on a 14 by 14 grid of patches with M = {SWIN_M}. Left: the
regular partition, four windows of 7 by 7 patches, A to D, with thick
borders. Middle: the shifted partition, displaced by s = floor(M/2) = 3
patches down and to the right, cuts the grid into nine windows, A to I, of
3, 7 or 4 patches a side. Right: after rolling the grid up and to the left
by s (the cyclic shift), the regular window borders enclose whole shifted
windows again, except along the bottom and right, where one window holds
pieces of several shifted windows (several letters) that a mask keeps
apart. Bottom: patch merging takes each 2 by 2 neighbourhood of tokens of
width C, concatenates them (top-left, bottom-left, top-right, bottom-right)
into 4C features, normalises them and maps them with W_merge to 2C: an H by
W by C grid becomes H/2 by W/2 by 2C.""")
def swin_windows():
    """:ref:`ch-windows`: windows of M × M patches, the shifted windows (shift
    ⌊M/2⌋, cyclic shift), patch merging (2 × 2 → 4C → 2C)."""
    M, s = SWIN_M, SWIN_M // 2
    regular = masks.window_ids(SWIN_GRID, M).reshape(SWIN_GRID)
    shifted = windows.padded_window_ids(SWIN_GRID, M, s)
    rolled = windows.cyclic_shift(shifted[..., None], s)[..., 0]
    fig, ax = _canvas(3.35)
    cell, y = 0.108, 1.45
    panels = [
        (0.25, regular, regular, M,
         f"windows, $M = {M}$"),
        (2.65, shifted, shifted, None,
         rf"shifted by $s = \lfloor M/2 \rfloor = {s}$"),
        (5.05, rolled, _pieces(rolled, M), M,
         r"cyclic shift: roll up, left by $s$")]
    for x, ids, pieces, border, title in panels:
        g = _regions(ax, x, y, ids, cell, pieces, border)
        _label(ax, x + g[2] / 2, y + g[3] + 0.08, title, va="bottom")
    x = panels[1][0]                          # the shifted borders
    for b in (s, M + s):
        ax.plot([x, x + 14 * cell], [y + (14 - b) * cell] * 2, color=INK,
                lw=1.6)
        ax.plot([x + b * cell] * 2, [y, y + 14 * cell], color=INK, lw=1.6)
    _arrow(ax, (0.25 + 14 * cell + 0.08, y + 0.75),
           (2.65 - 0.08, y + 0.75))
    _arrow(ax, (2.65 + 14 * cell + 0.08, y + 0.75),
           (5.05 - 0.08, y + 0.75))
    _label(ax, 5.05 + 7 * cell, y - 0.06,
           "a mask keeps the letters apart", size=SMALL, va="top")
    # patch merging
    from matplotlib.patches import Rectangle

    order = ["top-left", "bottom-left", "top-right", "bottom-right"]
    fills = [_head_fill(i, 4) for i in range(4)]
    y0, c = 0.3, 0.3
    _label(ax, 0.25, 0.98, "patch merging:", ha="left", va="bottom")
    at = {(0, 1): 0, (0, 0): 1, (1, 1): 2, (1, 0): 3}   # (col, row) -> slot
    for (col, row), k in at.items():
        ax.add_patch(Rectangle((2 + col * c, y0 + row * c), c, c,
                               fc=fills[k], ec=INK, lw=0.8))
        _label(ax, 2 + (col + 0.5) * c, y0 + (row + 0.5) * c,
               f"{k + 1}", size=SMALL)
    _label(ax, 2 + c, y0 - 0.05, "$2 \\times 2$, width $C$ each",
           size=SMALL, va="top")
    _arrow(ax, (2.7, y0 + c), (3, y0 + c))
    for k in range(4):
        ax.add_patch(Rectangle((3.05 + k * 0.3, y0 + c - 0.1), 0.3, 0.2,
                               fc=fills[k], ec=INK, lw=0.8))
        _label(ax, 3.2 + k * 0.3, y0 + c, f"{k + 1}", size=SMALL)
    _label(ax, 3.65, y0 + c - 0.15, "$4C$, concatenated", size=SMALL,
           va="top")
    _arrow(ax, (4.3, y0 + c), (4.55, y0 + c))
    _box(ax, 4.55, y0 + c - 0.17, 1.05, 0.34, r"LN, $W_{\mathrm{merge}}$",
         FILL["op"], size=SMALL)
    _arrow(ax, (5.6, y0 + c), (5.85, y0 + c))
    ax.add_patch(Rectangle((5.85, y0 + c - 0.1), 0.6, 0.2, fc=FILL["out"],
                           ec=INK, lw=0.8))
    _label(ax, 6.15, y0 + c - 0.15, "$2C$", size=SMALL, va="top")
    _label(ax, 5.2, y0 - 0.09, r"the grid: $H \times W \times C \;\to\;"
           r"H/2 \times W/2 \times 2C$", size=SMALL, va="top")
    _label(ax, 0.25, 0.8, ", ".join(f"{k + 1} {o}" for k, o in
                                    enumerate(order[:2])) + ",",
           size=SMALL, ha="left", va="top")
    _label(ax, 0.25, 0.62, ", ".join(f"{k + 3} {o}" for k, o in
                                     enumerate(order[2:])),
           size=SMALL, ha="left", va="top")
    return fig


# ------------------------------------------------------------- chapter 9
def _clip(ax, video, x, y, side, step=0.1):
    """The frames of a video as a stack, first frame at the back."""
    T = len(video)
    for t in range(T):
        _image(ax, np.clip(video[t], 0, 1), x + t * step,
               y + (T - 1 - t) * step, side, side)
    return (x, y, side + (T - 1) * step, side + (T - 1) * step)


@diagram("nonlocal", """
The non-local block of Wang et al. on a video feature map of T frames of H
by W positions with C channels, drawn as a stack of four frames. Three 1 by
1 convolutions, theta, phi and g, embed every position; reshaped, they are
N by d_k, N by d_k and N by d_v matrices, with N = T H W. The scores theta
times phi transposed form an N by N matrix, every position against every
position in every frame; a softmax over each row gives f; y = f g averages
the g features. A last 1 by 1 convolution W_z maps y back to C channels, and
a residual connection adds the input x, giving z of the same shape T by H by
W by C.""")
def nonlocal_block():
    """:ref:`ch-nonlocal`: θ, φ, g as 1×1 convolutions, f = softmax(θφᵀ), y =
    f·g,
    W_z and the residual, on a T × H × W × C map."""
    from selfattention import data

    video = data.moving_square_video(np.random.default_rng(0))
    fig, ax = _canvas(2.85)
    mid = 1.5
    clip = _clip(ax, video, 0.15, mid - 0.42, 0.55)
    _label(ax, 0.15 + clip[2] / 2, clip[1] - 0.06,
           r"$\mathbf{x}$: $T \times H \times W \times C$", size=SMALL,
           va="top")
    rows = {"q": mid + 0.75, "k": mid, "v": mid - 0.75}
    names = {"q": (r"W_\theta", r"\theta", "d_k"),
             "k": (r"W_\phi", r"\phi", "d_k"),
             "v": ("W_g", "g", "d_v")}
    for role, y in rows.items():
        W, name, width = names[role]
        _arrow(ax, (clip[0] + clip[2] + 0.05, mid), (1.25, y))
        _box(ax, 1.25, y - 0.17, 0.62, 0.34, f"${W}$", FILL[role])
        _arrow(ax, (1.87, y), (2.1, y))
        _matrix(ax, 2.1, y - 0.2, 4, 3, 0.1, FILL[role], f"${name}$",
                lines=False)
        _label(ax, 2.48, y, f"$N \\times {width}$", size=SMALL, ha="left")
    _label(ax, 1.56, 0.3, r"$1 \times 1 \times 1$ convolutions",
           size=SMALL)
    # scores and weights
    n = 6
    _, Q, K, V, S, _ = _example_attention(n, seed=3)
    from selfattention.attention import softmax
    f = softmax(Q @ K.T)                          # scale 1, as Wang et al.
    h = 0.13
    sx, sy = 3.45, mid + 0.375 - n * h / 2
    for role in ("q", "k"):
        _arrow(ax, (3.05, rows[role]), (sx - 0.04, mid + 0.375 + (
            0.15 if role == "q" else -0.15)))
    sc = _heat(ax, sx, sy, f, h, vmin=0)
    _label(ax, sx + sc[2] / 2, sy + sc[3] + 0.07,
           r"$f = \operatorname{softmax}(\theta \phi^{\top})$", va="bottom")
    _label(ax, sx + sc[2] / 2, sy - 0.05, r"$N \times N$, $N = THW$",
           size=SMALL, va="top")
    # y = f g
    yx = 4.75
    _elbow(ax, [(sc[0] + sc[2] + 0.04, mid + 0.375),
                (yx + 0.15, mid + 0.375), (yx + 0.15, mid + 0.05)])
    _elbow(ax, [(3.05, rows["v"]), (yx + 0.15, rows["v"]),
                (yx + 0.15, mid - 0.45)])
    _matrix(ax, yx, mid - 0.45, 4, 3, 0.1, FILL["out"], "$y$", lines=False)
    _label(ax, yx + 0.35, mid - 0.05, r"$y = f g$", ha="left")
    _arrow(ax, (yx + 0.3, mid - 0.25), (5.45, mid - 0.25))
    _box(ax, 5.45, mid - 0.42, 0.55, 0.34, "$W_z$", FILL["op"])
    _arrow(ax, (6.0, mid - 0.25), (6.27, mid - 0.25))
    _plus(ax, 6.38, mid - 0.25)
    _elbow(ax, [(0.15 + clip[2] / 2, clip[1] + clip[3] + 0.04),
                (0.15 + clip[2] / 2, 2.62), (6.38, 2.62),
                (6.38, mid - 0.13)])
    _label(ax, 6.3, 2.57, "residual", size=SMALL, ha="right", va="top")
    _arrow(ax, (6.49, mid - 0.25), (6.62, mid - 0.25))
    _label(ax, 6.9, mid - 0.25, r"$\mathbf{z}$", size=SIZE)
    _label(ax, 6.65, mid - 0.5, r"$T \times H \times W$", size=SMALL,
           va="top")
    _label(ax, 6.65, mid - 0.68, r"$\times\, C$", size=SMALL, va="top")
    return fig


# ------------------------------------------------------------ chapter 10
def _frames(size=16, p=4):
    """Two frames of a textured scene, the second moved by one patch, and
    their patch tokens scaled to unit length: (img1, img2, X1, X2, grid)."""
    from selfattention import data, matching, patches

    rng = np.random.default_rng(0)
    img = data.textured_scene(rng, size=size, n_shapes=3)
    img1, img2 = data.shifted_pair(img, (p, p), rng)
    X1, X2 = (matching.normalize(patches.center(patches.patchify(i, p)))
              for i in (img1, img2))
    return img1, img2, X1, X2, (size // p, size // p)


@diagram("matching", """
Two ways to compare the patches of two frames, side by side. Left,
cross-attention: the queries Q = X_1 W_Q come from frame 1, the keys
K = X_2 W_K and the values V = X_2 W_V from frame 2; the n by m scores
Q K transposed over the square root of d_k go through a softmax of each
row, and each patch of frame 1 receives A V, an average of frame 2's
values. Right, RAFT's all-pairs correlation volume: both frames pass
through one shared encoder, giving features F_1 and F_2, HW by C each; the
volume C = F_1 F_2 transposed, HW by HW, keeps every dot product as it is:
no separate query and key projections, no softmax and no weighted sum; the
flow is read by looking up the correlations around its current
estimate.""")
def cross_attention_correlation():
    """:ref:`ch-matching`: queries from image 1, keys and values from image 2;
    RAFT's C = F1·F2ᵀ from one shared encoder, no softmax, no weighted
    sum."""
    from selfattention import matching

    img1, img2, X1, X2, grid = _frames()
    _, A = _attention.attention(4 * X1, 4 * X2, X2)       # sharp, as ch. 10
    C = matching.correlation_volume(X1.reshape(*grid, -1),
                                    X2.reshape(*grid, -1))
    C = C.reshape(X1.shape[0], X2.shape[0])               # (HW, HW)
    fig, ax = _canvas(3.2)
    side, h = 0.5, 0.06                   # frame side; one cell of A and C
    ax.plot([3.62, 3.62], [0.15, 3.05], color=RULE, lw=0.6)
    for x0, title in ((0.1, "cross-attention"),
                      (3.8, "RAFT's correlation volume")):
        _label(ax, x0, 3.05, title, ha="left", va="top")
    # cross-attention
    _image(ax, img1, 0.15, 1.95, side, side)
    _image(ax, img2, 0.15, 0.6, side, side)
    _label(ax, 0.4, 1.9, "frame 1", size=SMALL, va="top")
    _label(ax, 0.4, 0.55, "frame 2", size=SMALL, va="top")
    _arrow(ax, (0.7, 2.2), (0.95, 2.2))
    _box(ax, 0.95, 2.04, 0.45, 0.32, "$W_Q$", FILL["q"])
    for y, W, role in ((1.05, "W_K", "k"), (0.6, "W_V", "v")):
        _arrow(ax, (0.7, 0.85), (0.95, y))
        _box(ax, 0.95, y - 0.16, 0.45, 0.32, f"${W}$", FILL[role])
    a = _heat(ax, 1.85, 2.2 - 8 * h, A, h, vmin=0)
    _elbow(ax, [(1.4, 2.2), (1.8, 2.2)])
    _elbow(ax, [(1.4, 1.05), (a[0] + 0.2, 1.05), (a[0] + 0.2, a[1] - 0.03)])
    _label(ax, a[0] + a[2] / 2, a[1] + a[3] + 0.06,
           r"$\operatorname{softmax}(QK^{\top}/\sqrt{d_k})$", size=SMALL,
           va="bottom")
    _label(ax, a[0] + a[2] + 0.06, a[1] + a[3] / 2, r"$A$, $n \times m$",
           size=SMALL, ha="left")
    _box(ax, 2.75, 1.0, 0.6, 0.3, "$AV$", FILL["out"])
    _arrow(ax, (a[0] + a[2] - 0.15, a[1] - 0.03), (3.0, 1.3))
    _elbow(ax, [(1.4, 0.6), (3.05, 0.6), (3.05, 1.0)])
    _label(ax, 2.6, 0.38, "each patch of frame 1: an average",
           size=SMALL, va="top")
    _label(ax, 2.6, 0.2, "of frame 2's values", size=SMALL, va="top")
    # correlation volume
    _image(ax, img1, 3.85, 1.95, side, side)
    _image(ax, img2, 3.85, 0.6, side, side)
    _label(ax, 4.1, 1.9, "frame 1", size=SMALL, va="top")
    _label(ax, 4.1, 0.55, "frame 2", size=SMALL, va="top")
    enc = _box(ax, 4.6, 1.15, 0.8, 0.7, "one shared\nencoder", FILL["k"],
               size=SMALL)
    _arrow(ax, (4.4, 2.2), (4.75, enc[1] + enc[3]))
    _arrow(ax, (4.4, 0.85), (4.75, enc[1]))
    _arrow(ax, (5.4, 1.65), (5.6, 1.95))
    _arrow(ax, (5.4, 1.35), (5.6, 1.05))
    _label(ax, 5.65, 2.0, "$F_1$", size=SIZE, ha="left")
    _label(ax, 5.65, 1.0, "$F_2$", size=SIZE, ha="left")
    c = _heat(ax, 6.1, 1.5 - 8 * h + 0.35, C, h)
    _arrow(ax, (5.9, 2.0), (6.06, c[1] + c[3] - 0.1))
    _arrow(ax, (5.9, 1.0), (6.06, c[1] + 0.1))
    _label(ax, c[0] + c[2] / 2, c[1] + c[3] + 0.06,
           r"$C = F_1 F_2^{\top}$", size=SIZE, va="bottom")
    _label(ax, c[0] + c[2] / 2, c[1] - 0.05, r"$HW \times HW$",
           size=SMALL, va="top")
    for i, line in enumerate(("no softmax, no weighted sum:",
                              "look up the correlations",
                              "around the flow estimate")):
        _label(ax, 5.3, 0.55 - 0.18 * i, line, size=SMALL, va="top")
    return fig
