"""The stereo explorer: a pixel of the left image of a rectified pair, and the
weights it gives the candidates on its row of the right image, disparity by
disparity (:ref:`ch-matching`).
"""

from __future__ import annotations

import numpy as np

from .. import _stills
from ..stereo import DISPARITIES as _DISPARITIES
from .._validate import (boundary, floats, integer, ints, optional, pair,
                         positive, positive_int, require)
from ._figure import (_OWN_KEYS, _TOP, _colour_scale, _grey_levels, _html,
                      _legend, _payload, _script, _shell, _strongest,
                      _uid, _viridis_stops)

#: Screen pixels per image pixel in the enlarged strips, and the height of
#: the bars of weights.
_ZOOM, _BARS = 10, 90
#: This figure's own styles (the others' are in ``static/figure.css``):
#: buttons large enough to tap, strips as wide as the column allows.
_STYLE = ("<style>.sa-stereo .sa-move{margin:4px 0 0 0}.sa-stereo .sa-move "
          "button{min-width:44px;min-height:44px;font-size:1.2em}"
          ".sa-stereo .sa-zoom{max-width:330px}.sa-stereo .sa-zoom canvas"
          "{width:100%}.sa-stereo .sa-zoom p{font-size:0.85em;margin:2px 0 "
          "6px 0}.sa-stereo .sa-axis{display:flex;justify-content:"
          "space-between;gap:8px}.sa-stereo .sa-axis span:nth-child(2)"
          "{text-align:center}</style>\n")


def _hex_rows(levels, chunk: int = 32) -> list[str]:
    """Rows of values 0 … 255 as hex strings, a space every ``chunk``
    values (no long run without a space, see :func:`_payload`)."""
    return [bytes(row).hex(" ", -chunk)
            for row in np.asarray(levels, dtype=np.uint8)]


def _stereo_caption(levels, truth, row: int, image_row: int, c: int) -> str:
    """The caption the script writes, for weights stored as ``levels``
    (0 … 255) and the truth rounded to 0.1 (None: unknown)."""
    w = [v / 255 for v in levels]
    best = ", ".join(f"disparity {d} ({w[d]:.2f})" for d in _strongest(w))
    told = ("unknown" if truth is None else f"{truth:.1f}, right column "
            f"{c - truth:.1f}")
    return (f"left pixel: held-out row {row} (image row {image_row}), column "
            f"{c}; most weight on {best}; true disparity {told}")


def _stereo_fits(left, right, weights, truth, query, image_rows=None) -> None:
    """The pair (H, W), the weights (h, W, D + 1) and truth (h, W) of its
    rows ``image_rows``, and a query among them."""
    require(left.shape == right.shape, f"left and right must share one shape "
            f"(H, W), got {left.shape} and {right.shape}")
    rows = np.arange(left.shape[0]) if image_rows is None else image_rows
    require(rows.size > 0 and 0 <= rows.min() and rows.max() < left.shape[0],
            f"image_rows must name rows 0 … {left.shape[0] - 1} of the pair")
    band = (len(rows), left.shape[1])
    require(truth.shape == band, f"truth must have shape (h, W) = {band}, "
            f"one row per entry of image_rows, got {truth.shape}")
    require(weights.shape[:2] == band, f"weights must have shape (h, W, "
            f"D + 1) = {band + ('D + 1',)}, got {weights.shape}")
    r, c = query
    require(r < band[0] and c < band[1], f"query must be a pixel (row of "
            f"image_rows, column) of the {band} rows, got {(r, c)}")


def _blocks(image_rows) -> list[int]:
    """For each row of the band, the first row of its block: the run of
    consecutive image rows it belongs to."""
    first = [0]
    for k in range(1, len(image_rows)):
        same = image_rows[k] == image_rows[k - 1] + 1
        first.append(first[-1] if same else k)
    return first


def _marks(shape, x, y, w, h) -> np.ndarray:
    """The two-pen frame of :func:`_stills.frame` alone, as RGBA (shape
    (H, W, 4)), transparent elsewhere."""
    drawn = _stills.frame(np.full(shape + (3,), 7, np.uint8), x, y, w, h)
    seen = (drawn != 7).any(-1)
    return np.dstack([np.where(seen[..., None], drawn, 0),
                      255 * seen]).astype(np.uint8)


def _layers(marks: np.ndarray, image: np.ndarray) -> str:
    """A ``style`` value with two backgrounds: the RGBA ``marks`` over the
    RGB ``image``; the script keeps the image and draws its own marks."""
    return ("background-image:url(data:image/png;base64,"
            f"{_stills._png(marks, 'RGBA')}),url(data:image/png;base64,"
            f"{_stills._png(image)});background-size:100% 100%")


@boundary(left=floats(ndim=2), right=floats(ndim=2),
          weights=floats(ndim=3), truth=_DISPARITIES,
          step=positive_int(), query=pair(integer(0), ("row", "column")),
          image_rows=optional(ints(ndim=1)), scale=positive_int(),
          vmax=optional(positive()), checks=(_stereo_fits,))
def stereo_explorer(left, right, weights, truth, step=5, query=(0, 0),
                    image_rows=None, title="", scale=1, vmax=None):
    """A kernel-free figure: pick a left pixel, see its weights on the
    candidates of its right row (:ref:`ch-matching`); returns
    ``IPython.display.HTML``, self-contained and byte-stable (images and
    weights stored as levels 0 … 255).

    ``left`` and ``right`` (H, W) hold grey values roughly in [0, 1];
    ``weights`` (h, W, D + 1) give each left pixel of the rows
    ``image_rows`` (by default every row, h = H; runs of consecutive rows
    show as blocks) its weights on the right pixels ``x − d``, d = 0 … D,
    each summing to 1, and ``truth`` (h, W) its true disparity, NaN where
    unknown. Queries are every ``step``-th of those rows and columns;
    ``query`` (row of ``image_rows``, column) is moved to the nearest and
    selected first. ``title`` stands above the figure and names its group;
    ``scale`` gives screen pixels per image pixel; ``vmax`` the top of the
    colour scale and bars (larger weights drawn at it), by default the
    first round number at or above the largest weight.
    """
    H, W = left.shape
    image_rows = np.arange(H) if image_rows is None else image_rows
    h, D1 = len(image_rows), weights.shape[2]
    rows, cols = np.arange(0, h, step), np.arange(0, W, step)
    P = weights[rows][:, cols]                          # (h', W', D + 1)
    lo, hi, ticks = _colour_scale(P, vmax)
    levels = np.clip(np.round(255 * P), 0, 255).astype(int) \
        .reshape(-1, P.shape[-1])
    first = _blocks(image_rows)
    tall = max(first[k:].count(first[k]) for k in range(h))   # rows/block
    grey_l, grey_r = np.array(_grey_levels(left)), np.array(_grey_levels(right))
    data = {"left": _hex_rows(grey_l[image_rows]),
            "right": _hex_rows(grey_r[image_rows]),
            "weights": _hex_rows(levels), "rows": rows.tolist(),
            "cols": cols.tolist(), "W": W, "scale": scale, "zoom": _ZOOM,
            "tall": tall, "first": first, "imageRows": image_rows.tolist(),
            "truth": [[None if not np.isfinite(v) else round(float(v), 1)
                       for v in truth[r][cols]] for r in rows],
            "query": [int(np.argmin(np.abs(rows - query[0]))),
                      int(np.argmin(np.abs(cols - query[1])))],
            "lut": _viridis_stops(), "lo": lo, "hi": hi, "top": _TOP}
    payload = _payload(data)
    uid = _uid("sa-stereo-", payload, str(title))
    qr, qc = data["query"]
    r0, c0, t0 = int(rows[qr]), int(cols[qc]), data["truth"][qr][qc]
    shown = levels[qr * len(cols) + qc]

    # The first state, as the script draws it (_stills): the two images,
    # the rows without queries paled on the left one, under the marks.
    s, z = scale, _ZOOM
    pale = np.ones(H, bool)
    pale[image_rows] = False
    left_rgb = _stills.grey(np.where(pale[:, None], 102 + 3 * grey_l // 5,
                                     grey_l), s)
    y0 = int(image_rows[r0]) * s + s // 2
    marks_l = _marks((H * s, W * s), c0 * s + s // 2 - 6, y0 - 6, 12, 12)
    x0 = max(c0 - D1 + 1, 0) * s
    marks_r = _marks((H * s, W * s), x0, y0 - 6, (c0 + 1) * s - 1 - x0, 12)
    strips = []
    a = first[r0]
    for band in (grey_l[image_rows], grey_r[image_rows]):
        block = np.full((tall, D1), 255)
        n = first.count(a)
        lo_c = c0 - D1 + 1
        for j in range(D1):
            if lo_c + j >= 0:
                block[:n, j] = band[a:a + n, lo_c + j]
        strips.append(_stills.grey(block, z))
    strips[0] = _stills.frame(strips[0], (D1 - 1) * z, (r0 - a) * z, z, z)
    bars = np.full((_BARS, D1 * z, 3), 255, np.uint8)
    for d in range(min(D1, c0 + 1)):
        height = int(round(min(1.0, shown[d] / 255 / hi) * (_BARS - 8)))
        x = (D1 - 1 - d) * z
        if height:
            bars[_BARS - height:, x + 1:x + z - 1] = _stills.colour(
                shown[d] / 255, lo, hi, data["lut"])
    if t0 is not None:
        x = int(round((D1 - 1 - t0 + 0.5) * z))
        for pen, value in ((4, 0), (2, 255)):
            bars[:, max(x - pen // 2, 0):x + pen // 2] = value
            strips[1][(r0 - a) * z:(r0 - a + 1) * z,
                      max(x - pen // 2, 0):x + pen // 2] = value

    def canvas(cls, w, hgt, style, extra):
        return (f'<canvas class="{cls}" width="{w}" height="{hgt}" '
                f'style="{style}" {extra}></canvas>')
    picture = (f'{_OWN_KEYS} tabindex="0" role="application" '
               f'aria-describedby="{uid}-help" aria-label="left image: the '
               f'held-out rows are unpaled; arrow keys move the query"')
    move = "".join(
        f'<button type="button" {_OWN_KEYS} data-move="{k}" aria-label='
        f'"move the query {name} by {step} pixels">{sign}</button>'
        for k, (sign, name) in enumerate((("◀", "left"), ("▶", "right"),
                                          ("▲", "up"), ("▼", "down"))))
    body = (
        _STYLE + '<div class="sa-row">\n<figure>'
        + canvas("sa-pick", W * s, H * s, _layers(marks_l, left_rgb)
                 + f";width:{W * s}px", picture)
        + '<figcaption>left image (queries)</figcaption>\n'
        f'<div class="sa-buttons sa-move" role="group" aria-label="move the '
        f'query">{move}</div></figure>\n<figure>'
        + canvas("sa-key", W * s, H * s, _layers(marks_r, _stills.grey(
            grey_r, s)) + f";width:{W * s}px", 'role="img" aria-label="right '
            'image: the query\'s row, its candidates framed"')
        + '<figcaption>right image (keys)</figcaption></figure>\n</div>\n'
        '<div class="sa-zoom">'
        + canvas("sa-zoom-left", D1 * z, tall * z, _stills.background(
            strips[0]), 'role="img" aria-label="left image enlarged: the '
            'query\'s block, the query framed at the right end"')
        + '<p>left image, the query\'s block, enlarged; the query framed</p>'
        + canvas("sa-zoom-right", D1 * z, tall * z, _stills.background(
            strips[1]), 'role="img" aria-label="right image enlarged: the '
            'same rows, at the query\'s candidates"')
        + "<p>right image, the same rows: the query's candidates</p>"
        + canvas("sa-map", D1 * z, _BARS, _stills.background(bars),
                 f'role="img" aria-describedby="{uid}-cap" aria-label='
                 f'"weight of the query on each candidate"')
        + f'<p class="sa-axis"><span>disparity {D1 - 1}</span>'
        f"<span>weight on each candidate (bars, 0 to {hi:g}); the true match "
        f"a white line</span><span>0</span></p></div>\n")
    body += _legend(lo, hi, ticks, "the weight of the query on each "
                    "candidate", clipped=float(P.max()) > hi)
    help_text = ("Click or tap a pixel in the unpaled rows of the left image, "
                 "or focus it and press the arrow keys, or use the buttons, "
                 f"to move the query (every {step}th row and column). The "
                 "enlarged strips show the query's block on both images, "
                 f"over the {D1} candidates of its row; the bars give the "
                 "query's weight on each.")
    caption = _stereo_caption(shown, t0, r0, int(image_rows[r0]), c0)
    return _html(_shell(
        uid=uid, css_class="sa-stereo", testid="stereo-explorer",
        title=title or "Matching along the row", max_width=2 * W * s + 50,
        body=body, caption=caption, caption_testid="stereo-caption",
        help_text=help_text, payload=payload, script=_STEREO_JS))


_STEREO_JS = _script("stereo_explorer.js")
