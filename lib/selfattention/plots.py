"""Figures shared by every chapter, so the book looks like one book.

All helpers draw on a Matplotlib ``Axes`` that you pass in and return it;
the chapter decides the layout and calls ``plt.show()``. Colour maps are
perceptually uniform and readable in grey: ``viridis`` for weights and
scores, ``gray`` for images, two greys for masks.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CMAP", "show_image", "show_attention_on_image", "show_matrix",
           "show_mask", "mark_patch", "figure"]

CMAP = "viridis"


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


def _tidy(ax, title):
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
