"""Figures shared by every chapter, so the book looks like one book.

All helpers draw on a Matplotlib ``Axes`` that you pass in and return it;
the chapter decides the layout and calls ``plt.show()``. Colour maps are
perceptually uniform and readable in grey: ``viridis`` for weights and
scores, ``gray`` for images, two greys for masks.
"""

from __future__ import annotations

import numpy as np

from ._validate import boundary, floats

__all__ = ["CMAP", "ACCENT", "show_image", "show_attention_on_image",
           "show_matrix", "show_mask", "mark_patch", "figure", "show_grid",
           "mark_cell", "show_loglog", "loglog_slope"]

CMAP = "viridis"
ACCENT = "#ff7f0e"          # orange: the chosen query, window borders


def figure(ncols: int = 1, nrows: int = 1, size: float = 3.2, **kwargs):
    """A figure of ``nrows × ncols`` square panels, ``size`` inches each."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows),
                             layout="constrained", **kwargs)
    return fig, axes


def show_image(ax, img, patch: int | None = None, title: str | None = None):
    """Draw a grayscale image, with the patch grid if ``patch`` is given."""
    img = np.asarray(img)
    ax.imshow(img, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    if patch:
        H, W = img.shape
        for y in np.arange(patch, H, patch) - 0.5:
            ax.axhline(y, color="white", lw=0.6, alpha=0.6)
        for x in np.arange(patch, W, patch) - 0.5:
            ax.axvline(x, color="white", lw=0.6, alpha=0.6)
    _tidy(ax, title)
    return ax


def mark_patch(ax, row: int, col: int, patch: int, color: str = "#ff7f0e",
               lw: float = 2.0):
    """Outline patch (row, col) of an image drawn with :func:`show_image`."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((col * patch - 0.5, row * patch - 0.5), patch, patch,
                           fill=False, edgecolor=color, lw=lw))
    return ax


def show_attention_on_image(ax, img, weights, grid: tuple[int, int],
                            patch: int, query: int | None = None,
                            title: str | None = None, colorbar: bool = True):
    """Lay one query's attention weights over the image, patch by patch.

    Parameters
    ----------
    img : array_like, shape (H, W)
    weights : array_like, shape (rows·cols,)
        One row of the attention matrix.
    grid : (rows, cols)
        Patch grid; ``rows·patch = H``.
    query : int, optional
        Token index of the query, outlined in orange.
    """
    rows, cols = grid
    w = np.asarray(weights).reshape(rows, cols)
    ax.imshow(np.asarray(img), cmap="gray", vmin=0, vmax=1,
              interpolation="nearest")
    H, W = rows * patch, cols * patch
    im = ax.imshow(w, cmap=CMAP, alpha=0.75, vmin=0, interpolation="nearest",
                   extent=(-0.5, W - 0.5, H - 0.5, -0.5))
    if query is not None:
        mark_patch(ax, *divmod(int(query), cols), patch)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04,
                           label="attention weight")
    _tidy(ax, title)
    return ax


def show_matrix(ax, M, title: str | None = None, cmap: str = CMAP,
                vmin=None, vmax=None, colorbar: bool = True,
                xlabel: str = "key j", ylabel: str = "query i"):
    """Draw a score or weight matrix with queries as rows, keys as columns."""
    im = ax.imshow(np.asarray(M), cmap=cmap, vmin=vmin, vmax=vmax,
                   interpolation="nearest")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def show_mask(ax, mask, title: str | None = None,
              xlabel: str = "key j", ylabel: str = "query i"):
    """Draw a boolean mask: dark = may attend, light = blocked."""
    ax.imshow(np.asarray(mask, dtype=float), cmap="Greys", vmin=-0.15,
              vmax=1.0, interpolation="nearest")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def show_grid(ax, values, numbers=None, M: int | None = None, start: int = 0,
              title: str | None = None, cmap: str = CMAP):
    """Colour an (H, W) grid cell by cell, write a number in each cell and
    draw window borders (chapter 8).

    Parameters
    ----------
    values : array_like, shape (H, W)
        Colour of each cell: window index, region label, 0/1 for a mask...
        Constant grids are drawn in the lowest colour.
    numbers : array_like, shape (H, W), optional
        Text written in each cell, white on dark cells and black on light.
    M : int, optional
        Window side. A border (orange) is drawn before every row ``r`` and
        column ``c`` with ``(r - start) % M == 0``, except at the grid's edge.
    start : int
        Offset of the windows: ``M - s`` for windows shifted by ``s``.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be a 2-D (H, W) grid, got shape "
                         f"{values.shape}")
    if numbers is not None and np.shape(numbers) != values.shape:
        raise ValueError(f"numbers must have the shape of values "
                         f"{values.shape}, got {np.shape(numbers)}")
    lo = values.min()
    hi = max(values.max(), lo + 1)
    ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
    if numbers is not None:
        for (r, c), v in np.ndenumerate(np.asarray(numbers)):
            dark = (values[r, c] - lo) / (hi - lo) < 0.6
            ax.text(c, r, str(v), ha="center", va="center", fontsize=6,
                    color="white" if dark else "black")
    if M:
        H, W = values.shape
        for k in range(1, H):
            if (k - start) % M == 0:
                ax.axhline(k - 0.5, color=ACCENT, lw=2)
        for k in range(1, W):
            if (k - start) % M == 0:
                ax.axvline(k - 0.5, color=ACCENT, lw=2)
    _tidy(ax, title)
    return ax


def mark_cell(ax, row: int, col: int, color: str = ACCENT,
              size: float = 11):
    """Outline cell (row, col) of a grid, or pixel (row, col) of an image,
    with an open square ``size`` points wide (chapters 8 and 10)."""
    ax.plot(col, row, "s", mfc="none", mec=color, ms=size, mew=2.5)
    return ax


def show_loglog(ax, x, ys, fit: bool = True, ref_slope: float | None = None,
                xlabel: str | None = None, ylabel: str | None = None,
                title: str | None = None, ticks: bool = False):
    """Plot costs against sizes on log–log axes, with their fitted slopes
    (chapters 7 and 8).

    Parameters
    ----------
    x : array_like, shape (k,)
        Positive sizes, shared by every series.
    ys : array_like of shape (k,), or dict
        One series, or ``{label: y}`` for several; a value may also be a
        pair ``(x_i, y_i)`` for a series measured at other sizes.
    fit : bool
        Write each series' least-squares slope
        (:func:`loglog_slope`) in its legend label, or,
        for a single unlabelled series, in the top corner.
    ref_slope : float, optional
        Add a dashed grey reference line of this slope through the last
        point of the last series, over the whole range of sizes.
    ticks : bool
        Label the x axis at the sizes of ``x`` instead of powers of ten.

    Returns
    -------
    ax
    """
    x = np.asarray(x, dtype=float)
    labelled = isinstance(ys, dict)
    series = _series(x, ys if labelled else {None: ys})
    for k, (label, xi, y) in enumerate(series):
        # a typographic minus, as on the axes' tick labels
        slope = (f"{loglog_slope(xi, y):.2f}".replace("-", "\u2212")
                 if fit else None)
        if label is not None and fit:
            label = f"{label} (slope {slope})"
        ax.loglog(xi, y, "os^vD"[k % 5] + "-", ms=4, color=f"C{k}",
                  label=label)
        if not labelled and fit:
            ax.text(0.97, 0.95, f"slope {slope}", transform=ax.transAxes,
                    ha="right", va="top", fontsize=8, color="C0")
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


def _fits_loglog(args) -> None:
    x, y = args["x"], args["y"]
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y must have the same length >= 2, got "
                         f"shapes {x.shape} and {y.shape}")
    if not ((x > 0).all() and (y > 0).all()):
        raise ValueError("x and y must be positive to take logarithms")


@boundary(x=floats(ndim=1), y=floats(ndim=1), checks=(_fits_loglog,))
def loglog_slope(x, y):
    """Slope of the least-squares line through ``(log x, log y)``.

    Parameters
    ----------
    x, y : array_like, shape (k,)
        Positive sizes and costs, ``k ≥ 2`` (chapter 7).

    Returns
    -------
    slope : float
        ``p`` when ``y`` grows like ``x**p``.
    """
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _tidy(ax, title):
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
