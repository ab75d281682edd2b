"""Diagrams of attention at scale: the cost of tokenisation (:ref:`ch-cost`)
and Swin's windows (:ref:`ch-windows`)."""

from __future__ import annotations

import numpy as np

from selfattention import cost, masks, windows
from ._base import (FILL, INK, SIZE, SMALL, WIDTH, _arrow, _box, _canvas,
                    _head_fill, _image, _label, _tint, diagram)


# --------------------------------------------------------- ch-cost
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


# ------------------------------------------------------ ch-windows
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
