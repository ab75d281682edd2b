"""The stereo explorer: a pixel of the left image of a rectified pair, and the
weights its row of the right image receives, disparity by disparity
(:ref:`ch-matching`).
"""

from __future__ import annotations

import numpy as np

from .. import _stills
from ..stereo import DISPARITIES as _DISPARITIES
from .._validate import (boundary, floats, integer, ints, optional, pair,
                         positive, positive_int, require)
from ._figure import (_OWN_KEYS, _TOP, _colour_scale, _grey_levels, _html,
                      _legend, _payload, _script, _shell, _strongest, _uid,
                      _viridis_stops)


def _hex_rows(levels, chunk: int = 32) -> list[str]:
    """Rows of values 0 … 255 as hex strings, a space every ``chunk``
    values (no long run without a space, see :func:`_payload`)."""
    rows = []
    for row in np.asarray(levels, dtype=int):
        text = "".join(f"{v:02x}" for v in row)
        rows.append(" ".join(text[i:i + 2 * chunk]
                             for i in range(0, len(text), 2 * chunk)))
    return rows


def _stereo_caption(levels, truth, row: int, c: int) -> str:
    """The caption the script writes, for weights stored as ``levels``
    (0 … 255) and the truth rounded to 0.1 (None: unknown)."""
    w = [v / 255 for v in levels]
    best = ", ".join(f"disparity {d} ({w[d]:.2f})" for d in _strongest(w))
    told = ("unknown" if truth is None else f"{truth:.1f}, right column "
            f"{c - truth:.1f}")
    return (f"left pixel: row {row}, column {c}; most weight on "
            f"{best}; true disparity {told}")


def _stereo_band_fits(left, right, weights, truth, query,
                      image_rows=None) -> None:
    """A band of the pair, its weights (h, W, D + 1) and a query inside."""
    require(left.shape == right.shape == truth.shape, f"left, right and truth "
            f"must share one shape (h, W), got {left.shape}, {right.shape} "
            f"and {truth.shape}")
    require(weights.shape[:2] == left.shape, f"weights must have shape (h, W, "
            f"D + 1) = {left.shape + ('D + 1',)}, got {weights.shape}")
    require(image_rows is None or len(image_rows) == left.shape[0],
            f"image_rows must name the {left.shape[0]} rows of the band, got "
            f"{0 if image_rows is None else len(image_rows)}")
    r, c = query
    require(0 <= r < left.shape[0] and 0 <= c < left.shape[1], f"query must "
            f"be a pixel of the (h, W) = {left.shape} band, got {(r, c)}")


@boundary(left=floats(ndim=2), right=floats(ndim=2),
          weights=floats(ndim=3), truth=_DISPARITIES,
          step=positive_int(), query=pair(integer(0), ("row", "column")),
          image_rows=optional(ints(ndim=1)), scale=positive_int(),
          vmax=optional(positive()), checks=(_stereo_band_fits,))
def stereo_explorer(left, right, weights, truth, step=5, query=(0, 0),
                    image_rows=None, title="", scale=2, vmax=None):
    """A kernel-free figure: pick a left pixel, see its weights on the
    right row (:ref:`ch-matching`).

    Parameters
    ----------
    left, right : array_like, shape (h, W)
        A band of rows of the two images, grey values roughly in [0, 1].
    weights : array_like, shape (h, W, D + 1)
        For each left pixel, its weights on the right pixels ``x − d`` of
        its row, ``d = 0 … D`` (each row sums to 1).
    truth : array_like, shape (h, W)
        True disparity of each left pixel, NaN where unknown.
    step : int
        Queries are every ``step``-th row and column of the band.
    query : (int, int)
        Pixel (row, column) of the band selected when the page loads;
        moved to the nearest query.
    image_rows : array_like of int, shape (h,), optional
        The row of the whole image that each row of the band shows (for
        the caption; a band may stack several blocks of rows). Default
        ``0 … h - 1``.
    title : str
        Title above the figure, and the name of its group.
    scale : int
        Screen pixels per image pixel.
    vmax : float, optional
        Top of the colour scale (larger weights get its colour); by default
        the first round number at or above the largest weight.

    Returns
    -------
    IPython.display.HTML
        Self-contained HTML and JavaScript. The images and the weights are
        stored as levels 0 … 255 (weights to 1/255), so the HTML is byte for
        byte stable for the same inputs.
    """
    h, W = left.shape
    rows, cols = np.arange(0, h, step), np.arange(0, W, step)
    P = weights[rows][:, cols]                          # (h', W', D + 1)
    lo, hi, ticks = _colour_scale(P, vmax)
    levels = np.clip(np.round(255 * P), 0, 255).astype(int) \
        .reshape(-1, P.shape[-1])
    t = truth[rows][:, cols]
    named = (np.arange(h) if image_rows is None else image_rows)[rows]
    qr = int(np.argmin(np.abs(rows - query[0])))
    qc = int(np.argmin(np.abs(cols - query[1])))
    data = {"left": _hex_rows(_grey_levels(left)),
            "right": _hex_rows(_grey_levels(right)),
            "weights": _hex_rows(levels), "rows": rows.tolist(),
            "cols": cols.tolist(), "W": W, "h": h, "scale": scale,
            "truth": [[None if not np.isfinite(v) else round(float(v), 1)
                       for v in row] for row in t],
            "imageRows": named.tolist(), "query": [qr, qc],
            "lut": _viridis_stops(),
            "lo": lo, "hi": hi, "top": _TOP}
    payload = _payload(data)
    uid = _uid("sa-stereo-", payload, str(title))
    w_px, h_px = W * scale, h * scale
    help_text = ("Click a pixel of the left image, or focus it and press the "
                 "arrow keys, to move the query; the strip under the right "
                 "image colours the right pixels of the query's row by the "
                 "query's weight, and the white tick marks the true match.")
    # What the script draws first, as each canvas's background (_stills):
    # the images with the query's mark, and the strip of its weights.
    r0, c0, t0 = int(rows[qr]), int(cols[qc]), data["truth"][qr][qc]
    mark = 4

    def marked(rgb, x):
        return _stills.frame(rgb, (x + 0.5) * scale - mark,
                             (r0 + 0.5) * scale - mark, 2 * mark, 2 * mark)
    pick_still = marked(_stills.grey(_grey_levels(left), scale), c0)
    key_still = _stills.grey(_grey_levels(right), scale)
    key_still[int((r0 + 0.5) * scale)] = 255           # the query's row
    if t0 is not None:
        key_still = marked(key_still, c0 - t0)
    strip = np.full((24, w_px, 3), 255, dtype=np.uint8)
    shown = levels[qr * len(cols) + qc] / 255
    for d in range(min(len(shown), c0 + 1)):
        strip[:18, (c0 - d) * scale:(c0 - d + 1) * scale] = _stills.colour(
            shown[d], lo, hi, data["lut"])
    if t0 is not None:
        x = int(round((c0 - t0 + 0.5) * scale))
        strip[14:24, max(x - 2, 0):x + 2] = 0
        strip[16:24, max(x - 1, 0):x + 1] = 255
    body = (
        f'<div class="sa-row">\n<figure><canvas class="sa-pick" '
        f'width="{w_px}" height="{h_px}" '
        f'style="{_stills.background(pick_still)}" '
        f'tabindex="0" role="application" {_OWN_KEYS} '
        f'aria-describedby="{uid}-help" aria-label="left image, {h} rows: '
        f'arrow keys move the query">'
        f'</canvas><figcaption>left image (queries)</figcaption></figure>\n'
        f'<figure><canvas class="sa-key" width="{w_px}" height="{h_px}" '
        f'style="{_stills.background(key_still)}" '
        f'role="img" aria-label="right image, the same rows"></canvas>'
        f'<canvas class="sa-map" width="{w_px}" height="24" '
        f'style="{_stills.background(strip)}" role="img" '
        f'aria-describedby="{uid}-cap" aria-label="weights of the query on '
        f'the right pixels of its row"></canvas>'
        f'<figcaption>right image (keys) and the weights on the query\'s '
        f'row</figcaption></figure>\n</div>\n')
    body += _legend(lo, hi, ticks, "the weight of the query pixel on each "
                    "right pixel of its row", clipped=float(P.max()) > hi)
    caption = _stereo_caption(levels[qr * len(cols) + qc],
                              data["truth"][qr][qc], int(named[qr]),
                              int(cols[qc]))
    return _html(_shell(
        uid=uid, css_class="sa-stereo", testid="stereo-explorer",
        title=title or "Matching along the row", max_width=w_px + 30,
        body=body, caption=caption, caption_testid="stereo-caption",
        help_text=help_text, payload=payload, script=_STEREO_JS))


_STEREO_JS = _script("stereo_explorer.js")
