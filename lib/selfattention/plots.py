"""Figures shared by every chapter, drawn on the ``Axes`` given: viridis for
weights, gray for images, two greys for masks, white on black for outlines.
"""

import numpy as np

from ._validate import (boundary, floats, integer, optional, positive_int,
                        require)

__all__ = ["CMAP", "ACCENT", "MAX_WIDTH", "accent", "figure", "show_image",
           "mark_patch", "show_attention_on_image", "show_matrix", "show_mask",
           "show_grid", "mark_cell", "show_loglog", "loglog_slope"]

CMAP = "viridis"
ACCENT = "white"            # the chosen query, window borders


def accent(lw: float = 2.0, color: str = ACCENT) -> dict:
    """Style of query outlines and window borders: white on a black stroke."""
    from matplotlib.patheffects import withStroke

    return dict(color=color, lw=lw,
                path_effects=[withStroke(linewidth=lw + 2, foreground="k")])


#: The widest figure, in inches, that the book's text column shows at full
#: size at 1366 px (738 px at the inline backend's 100 dpi, less a margin
#: for labels outside the panels): a wider one is scaled down, and its text
#: with it, below 8 pt.
MAX_WIDTH = 7.0


def figure(ncols: int = 1, nrows: int = 1, size: float = 3.2, **kwargs):
    """A figure of ``nrows × ncols`` square panels, ``size`` inches each,
    or smaller panels where ``ncols`` of them would be wider than
    :data:`MAX_WIDTH`."""
    import matplotlib.pyplot as plt

    size = min(size, MAX_WIDTH / ncols)
    return plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows),
                        layout="constrained", **kwargs)


def show_image(ax, img, patch: int | None = None, title: str | None = None):
    """Draw a grayscale image, with the patch grid if ``patch`` is given."""
    img = np.asarray(img)
    ax.imshow(img, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    if patch:
        H, W = img.shape
        _rules(ax, range(patch, H, patch), range(patch, W, patch),
               color="white", lw=0.6, alpha=0.6)
    return _tidy(ax, title)


def mark_patch(ax, row: int, col: int, patch: int, color: str = ACCENT,
               lw: float = 2.0):
    """Outline patch (row, col) of an image drawn with :func:`show_image`."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((col * patch - 0.5, row * patch - 0.5), patch,
                           patch, fill=False, **accent(lw, color)))
    return ax


def show_attention_on_image(ax, img, weights, grid: tuple[int, int],
                            patch: int, query: int | None = None,
                            title: str | None = None, colorbar: bool = True,
                            vmax: float | None = None):
    """Lay one query's attention weights (H·W,) over the image's patches."""
    H, W = grid
    ax.imshow(np.asarray(img), cmap="gray", vmin=0, vmax=1,
              interpolation="nearest")
    im = ax.imshow(np.asarray(weights).reshape(H, W), cmap=CMAP, alpha=0.75,
                   vmin=0, vmax=vmax, interpolation="nearest",
                   extent=(-0.5, W * patch - 0.5, H * patch - 0.5, -0.5))
    if query is not None:
        mark_patch(ax, *divmod(int(query), W), patch)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04,
                           label="attention weight")
    return _tidy(ax, title)


def show_matrix(ax, M, title: str | None = None, cmap: str = CMAP,
                vmin=None, vmax=None, colorbar: bool = True,
                xlabel: str = "key j", ylabel: str = "query i"):
    """Draw a score or weight matrix with queries as rows, keys as columns."""
    im = ax.imshow(np.asarray(M), cmap=cmap, vmin=vmin, vmax=vmax,
                   interpolation="nearest")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return _titled(ax, title, xlabel=xlabel, ylabel=ylabel)


def show_mask(ax, mask, title: str | None = None,
              xlabel: str = "key j", ylabel: str = "query i"):
    """Draw a boolean mask: dark = may attend, light = blocked."""
    ax.imshow(np.asarray(mask, dtype=float), cmap="Greys", vmin=-0.15,
              vmax=1.0, interpolation="nearest")
    for axis in (ax.xaxis, ax.yaxis):                 # token indices: whole
        axis.get_major_locator().set_params(integer=True)
    return _titled(ax, title, xlabel=xlabel, ylabel=ylabel)


@boundary(values=floats(ndim=2), M=optional(positive_int()), start=integer(),
          checks=(lambda values, numbers: require(
              numbers is None or np.shape(numbers) == values.shape,
              f"numbers must have the shape of values {values.shape}, got "
              f"{np.shape(numbers)}"),))
def show_grid(ax, values, numbers=None, M: int | None = None, start: int = 0,
              title: str | None = None, cmap: str = CMAP):
    """Colour an (H, W) grid cell by cell, write a number in each cell and
    draw window borders before each row and column ``k`` with
    ``(k - start) % M == 0`` (:ref:`ch-windows`)."""
    lo, hi = values.min(), max(values.max(), values.min() + 1)
    ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
    if numbers is not None:
        for (r, c), v in np.ndenumerate(np.asarray(numbers)):
            dark = (values[r, c] - lo) / (hi - lo) < 0.6
            ax.text(c, r, str(v), ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    if M:
        (H, W), first = values.shape, start % M or M
        _rules(ax, range(first, H, M), range(first, W, M), **accent())
    return _tidy(ax, title)


def mark_cell(ax, row: int, col: int, color: str = ACCENT,
              size: float = 11):
    """Outline cell (row, col) of a grid or image with an open square."""
    ax.plot(col, row, "s", mfc="none", ms=size, mew=2.5, **accent(2.5, color))
    return ax


def show_loglog(ax, x, ys, fit: bool = True, ref_slope: float | None = None,
                xlabel: str | None = None, ylabel: str | None = None,
                title: str | None = None, ticks: bool = False):
    """Plot costs against sizes on log–log axes, with their fitted slopes
    (:ref:`ch-cost` and :ref:`ch-windows`): ``ys`` is one series or
    ``{label: y}``, ``y`` possibly a pair ``(x_i, y_i)``; ``ref_slope`` adds
    a dashed line through the last point."""
    x = np.asarray(x, dtype=float)
    labelled = isinstance(ys, dict)
    series = _series(x, ys if labelled else {None: ys})
    for k, (label, xi, y) in enumerate(series):
        # a typographic minus, as on the axes' tick labels
        slope = (f"slope {loglog_slope(xi, y):.2f}".replace("-", "\u2212")
                 if fit else "")
        ax.loglog(xi, y, "os^vD"[k % 5] + "-", ms=4, color=f"C{k}",
                  label=f"{label} ({slope})" if labelled and fit else label)
        if fit and not labelled:
            ax.text(0.97, 0.95, slope, transform=ax.transAxes, ha="right",
                    va="top", fontsize=8, color="C0")
    if ref_slope is not None:       # through the last point of the last one
        span = np.array([min(xi.min() for _, xi, _ in series),
                         max(xi.max() for _, xi, _ in series)])
        ax.loglog(span, y[-1] * (span / xi[-1]) ** ref_slope, "--",
                  color="gray", lw=1, label=f"slope {ref_slope:g}")
    if ticks:
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.minorticks_off()
    ax.set(**{k: v for k, v in dict(xlabel=xlabel, ylabel=ylabel,
                                     title=title).items() if v})
    if labelled or ref_slope is not None:
        ax.legend(fontsize=8)
    return ax


def _series(x, ys: dict) -> list:
    """``(label, x_i, y_i)`` of each series; a value may be a pair."""
    series = []
    for label, y in ys.items():
        xi, y = ((np.asarray(v, dtype=float) for v in y)
                 if isinstance(y, tuple) else (x, np.asarray(y, dtype=float)))
        if xi.shape != y.shape or xi.ndim != 1:
            raise ValueError(f"ys must have one value per size in series "
                             f"{label or 0}, got shapes {xi.shape} and "
                             f"{y.shape}")
        series.append((label, xi, y))
    return series


def _positive_series(x, y) -> None:
    require(x.shape == y.shape and x.size >= 2, f"x and y must have the same "
            f"length >= 2, got shapes {x.shape} and {y.shape}")
    require((x > 0).all() and (y > 0).all(),
            "x and y must be positive to take logarithms")


@boundary(x=floats(ndim=1), y=floats(ndim=1), checks=(_positive_series,))
def loglog_slope(x, y):
    """Slope ``p`` of the least-squares line through ``(log x, log y)``:
    ``y`` grows like ``x**p`` (:ref:`ch-cost`)."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _rules(ax, rows, cols, **style):
    """Lines above the given rows and left of the given columns."""
    for r in rows:
        ax.axhline(r - 0.5, **style)
    for c in cols:
        ax.axvline(c - 0.5, **style)


def _titled(ax, title, **settings):
    ax.set(**settings)
    if title:
        ax.set_title(title)
    return ax


def _tidy(ax, title):                   # an image: no ticks
    return _titled(ax, title, xticks=[], yticks=[])
