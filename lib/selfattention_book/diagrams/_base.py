"""Drawing shared by the book's diagrams: sizes, colours, the registry
(:func:`diagram`, :func:`draw`), SVG output and the boxes, arrows and grids
the diagrams are made of."""

from __future__ import annotations

import io
import re

import numpy as np

from selfattention import attention as _attention
from selfattention.plots import ACCENT, CMAP

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


def _head_fill(i: int, h: int):
    """Fill of head ``i`` of ``h``: evenly spaced lightnesses of viridis."""
    return _tint(0.1 + 0.8 * i / max(h - 1, 1), 0.45)


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
