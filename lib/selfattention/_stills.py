"""Pictures of a kernel-free figure's first state, painted in NumPy as its
script paints them, set as each canvas's CSS background for notebooks whose
scripts do not run (not part of the API).
"""

from __future__ import annotations

import base64
import io

import numpy as np

__all__ = ["background", "grey", "attention_map", "frame", "outline",
           "bars"]


def _png(rgb: np.ndarray, mode: str = "RGB") -> str:
    """``rgb`` (H, W, 3), or (H, W, 4) in ``mode`` "RGBA", as base64 PNG."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8), mode).save(
        buffer, format="PNG", optimize=False, compress_level=9)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def background(rgb: np.ndarray) -> str:
    """A ``style`` attribute value that shows ``rgb`` (H, W, 3) as the
    element's background, stretched to the element's box."""
    return (f"background-image:url(data:image/png;base64,{_png(rgb)});"
            "background-size:100% 100%")


def grey(levels, scale: int) -> np.ndarray:
    """The script's ``grey``: each image pixel a ``scale`` × ``scale``
    square of its grey level (0 … 255). Returns (H·s, W·s, 3) uint8."""
    g = np.asarray(levels, dtype=np.uint8)
    g = np.repeat(np.repeat(g, scale, axis=0), scale, axis=1)
    return np.stack([g, g, g], axis=-1)


def colour(values, lo: float, hi: float, lut) -> np.ndarray:
    """The script's ``colour``: values to RGB through the colour stops
    ``lut`` (k, 3), linearly between stops, rounded as
    JavaScript's ``Math.round`` does (halves up)."""
    lut = np.asarray(lut, dtype=float)
    t = np.clip((np.asarray(values, dtype=float) - lo) / (hi - lo), 0, 1)
    k = t * (len(lut) - 1)
    i = np.floor(k).astype(int)
    f = k - i
    j = np.minimum(i + 1, len(lut) - 1)
    rgb = lut[i] + f[..., None] * (lut[j] - lut[i])
    return np.floor(rgb + 0.5).astype(np.uint8)


def attention_map(weights, rows: int, cols: int, side: int, lo: float,
                  hi: float, lut) -> np.ndarray:
    """The script's ``map``: patch j a ``side`` × ``side`` square of its
    weight's colour. Returns (rows·side, cols·side, 3) uint8."""
    rgb = colour(np.asarray(weights).reshape(rows, cols), lo, hi, lut)
    return np.repeat(np.repeat(rgb, side, axis=0), side, axis=1)


def frame(rgb: np.ndarray, x: float, y: float, w: float,
          h: float) -> np.ndarray:
    """The scripts' two-pen ``strokeRect(x, y, w, h)``: a black line 4 px
    wide under a white one 2 px wide, on a copy of ``rgb`` (coordinates
    rounded to whole pixels, where the canvas would blend)."""
    out = rgb.copy()
    x0, y0 = int(round(x)), int(round(y))
    x1, y1 = int(round(x + w)), int(round(y + h))
    for width, value in ((4, 0), (2, 255)):
        half = width // 2
        for a in (y0, y1):                             # top and bottom
            out[max(a - half, 0):a + half, max(x0 - half, 0):x1 + half] \
                = value
        for b in (x0, x1):                             # left and right
            out[max(y0 - half, 0):y1 + half, max(b - half, 0):b + half] \
                = value
    return out


def outline(rgb: np.ndarray, r: int, c: int, side: int) -> np.ndarray:
    """The script's ``outline``: the two-pen frame around patch (r, c)."""
    return frame(rgb, c * side + 2, r * side + 2, side - 4, side - 4)


def bars(values, ymax: float, width: int, height: int, colour_rgb,
         pad: int, top: int, foot: int) -> np.ndarray:
    """The bar panels of the script's first state (its layout: margins of
    ``pad`` px on the left, ``top`` on top and ``foot`` below), without the
    text, which the figure's caption and labels carry. Returns
    (height, n·width, 3)."""
    out = np.full((height, len(values) * width, 3), 255, dtype=np.uint8)
    ph = height - top - foot
    for s, v in enumerate(values):
        x0, pw = s * width + pad, width - pad - 8
        bw = pw / len(v)
        out[top:top + ph + 1, x0] = 110                   # the axes
        out[top + ph, x0:x0 + pw + 1] = 110
        for j, y in enumerate(v):
            hh = int(round(min(1.0, y / ymax) * ph))
            left = int(round(x0 + j * bw + 1))
            right = left + max(1, int(round(bw - 2)))
            if hh:
                out[top + ph - hh:top + ph, left:right] = colour_rgb
    return out
