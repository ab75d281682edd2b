"""The Middlebury 2014 "Motorcycle" pair that scikit-image ships, and its
half-resolution rows split for training and scoring (:ref:`ch-matching`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["StereoPair", "stereo_pair", "HELD_OUT", "MARGIN", "StereoRows",
           "half_resolution_pair"]


@dataclass(frozen=True)
class StereoPair:
    """A rectified stereo pair and the left image's true disparity."""

    left: np.ndarray        # (500, 741, 3) uint8, the left camera
    right: np.ndarray       # (500, 741, 3) uint8, the right camera
    disparity: np.ndarray   # (500, 741) float32 pixels; NaN where unknown


@lru_cache(maxsize=1)
def _stereo():
    from skimage.data import stereo_motorcycle
    left, right, disparity = stereo_motorcycle()
    disparity = np.where(np.isfinite(disparity), disparity,
                         np.nan).astype(np.float32)
    for a in (left, right, disparity):
        a.setflags(write=False)
    return StereoPair(left, right, disparity)


def stereo_pair():
    """The rectified Middlebury 2014 "Motorcycle" pair, down-sampled four
    times, with ground-truth disparity for the left image (:ref:`ch-matching`).

    Shipped by scikit-image (``skimage.data.stereo_motorcycle``; Scharstein et
    al., GCPR 2014); unknown disparities are NaN.
    """
    return _stereo()


#: Held-out rows of the half-resolution pair, five blocks ``[start, stop)``
#: spread over the image: never seen in training, scored in the chapter.
HELD_OUT = ((20, 30), (70, 80), (120, 130), (170, 180), (220, 230))
#: Rows on either side of each held-out block that training crops also
#: avoid, more than the encoder's receptive field reaches (3 rows).
MARGIN = 5


@dataclass(frozen=True)
class StereoRows:
    """The pair at half resolution and its row split."""

    left: np.ndarray        # (250, 370, 3) float64 in [0, 1]
    right: np.ndarray       # (250, 370, 3)
    disparity: np.ndarray   # (250, 370) float64 half-res pixels, NaN unknown
    held_out: np.ndarray    # (50,) rows scored in the table
    train_rows: np.ndarray  # rows that training crops may use
    blocks: tuple           # the held-out rows as slices, one per block


@lru_cache(maxsize=1)
def _half():
    pair = stereo_pair()
    H, W = pair.disparity.shape[0] // 2, pair.disparity.shape[1] // 2

    def blocks(a):                       # (2H, 2W, ...) -> (H, 2, W, 2, ...)
        a = np.asarray(a[:2 * H, :2 * W], dtype=np.float64)
        return a.reshape(H, 2, W, 2, *a.shape[2:])

    left = blocks(pair.left).mean(axis=(1, 3)) / 255.0      # (H, W, 3)
    right = blocks(pair.right).mean(axis=(1, 3)) / 255.0
    # A block's disparity is known only if all four of its pixels are; a
    # half-resolution pixel moves half as far.
    disparity = blocks(pair.disparity).mean(axis=(1, 3)) / 2.0   # NaN stays
    rows = np.arange(H)
    held = np.concatenate([rows[a:b] for a, b in HELD_OUT])
    near = np.zeros(H, bool)
    for a, b in HELD_OUT:
        near[max(a - MARGIN, 0):b + MARGIN] = True
    train = rows[~near]
    for a in (left, right, disparity, held, train):
        a.setflags(write=False)
    return StereoRows(left, right, disparity, held, train,
                      tuple(slice(a, b) for a, b in HELD_OUT))


def half_resolution_pair() -> StereoRows:
    """The Motorcycle pair averaged over 2 × 2 blocks (500 × 741 becomes
    250 × 370, the last column dropped), its disparity halved, and the rows
    split: the blocks :data:`HELD_OUT` for scoring, :data:`MARGIN` rows
    either side of each unused, the rest for training. Read-only arrays,
    shared between calls."""
    return _half()
