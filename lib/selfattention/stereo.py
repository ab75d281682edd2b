"""Stereo matching along the rows of a rectified pair, at half resolution
(:ref:`ch-matching`): every volume is indexed ``(row, column, disparity)``.
"""

import numpy as np

from ._validate import (boundary, floats, integer, ints, number, optional,
                        positive_int, require, same_shape)

__all__ = ["MAX_DISP", "patch_features", "epipolar_mask", "disparity_volume",
           "winner_take_all", "soft_argmax", "disparity_scores", "occluded",
           "ambiguous", "local_contrast"]

#: Largest disparity searched, in half-resolution pixels (the ground truth
#: reaches 29.95).
MAX_DISP = 32


@boundary(img=floats(ndim=3), k=positive_int(), rows=optional(ints(ndim=1)),
          checks=(lambda img, rows: require(
              rows is None or not len(rows) or (
                  0 <= rows.min() and rows.max() < img.shape[0]),
              f"rows must be row indices of img, 0 to {img.shape[0] - 1}"),))
def patch_features(img, k=5, rows=None):
    """Each pixel's ``k × k`` neighbourhood as one descriptor."""
    r = k // 2
    padded = np.pad(img, ((r, r), (r, r), (0, 0)), mode="reflect")
    win = np.lib.stride_tricks.sliding_window_view(padded, (k, k), (0, 1))
    rows = np.arange(img.shape[0]) if rows is None else rows
    n, W, c = len(rows), img.shape[1], img.shape[2]
    F = win[rows].reshape(n, W, c * k * k)             # (n, W, c·k²)
    F = F - F.mean(axis=-1, keepdims=True)
    norm = np.linalg.norm(F, axis=-1, keepdims=True)
    return F / np.where(norm > 0, norm, 1.0)


@boundary(W=positive_int(), max_disp=integer(0))
def epipolar_mask(W, max_disp):
    """Which right-image columns a left pixel may match, for one row."""
    x = np.arange(W)
    d = x[:, None] - x[None, :]                        # (W, W): x - x'
    return (d >= 0) & (d <= max_disp)


@boundary(F_left=floats(ndim=3), F_right=floats(ndim=3),
          max_disp=integer(0),
          checks=(lambda F_left, F_right: same_shape(F_left=F_left,
                                                     F_right=F_right),))
def disparity_volume(F_left, F_right, max_disp):
    """Correlations of every left pixel with its candidate matches."""
    H, W, _ = F_left.shape
    C = np.full((H, W, max_disp + 1), -np.inf)
    for d in range(min(max_disp + 1, W)):
        C[:, d:, d] = np.sum(F_left[:, d:] * F_right[:, :W - d], axis=-1)
    return C                                            # (H, W, D + 1)


@boundary(C=floats(min_ndim=1, neg_inf=True))
def winner_take_all(C):
    """The disparity of each pixel's largest correlation."""
    return np.argmax(C, axis=-1)


@boundary(C=floats(min_ndim=1, neg_inf=True),
          temperature=number(0, strict=True))
def soft_argmax(C, temperature):
    """Attention over the candidates: expected disparity and its spread."""
    Z = C / temperature
    P = np.exp(Z - Z.max(axis=-1, keepdims=True))       # (..., D + 1)
    P = P / P.sum(axis=-1, keepdims=True)
    d = np.arange(C.shape[-1])                          # (D + 1,)
    mean = P @ d                                        # (...)
    spread = np.sqrt(np.maximum(P @ d ** 2 - mean ** 2, 0.0))
    return mean, spread


#: Disparities with NaN where unknown: what the ground truth holds.
DISPARITIES = floats(nan=True)


@boundary(estimate=floats(), truth=DISPARITIES,
          mask=optional(floats()),
          checks=(lambda estimate, truth: same_shape(estimate=estimate,
                                                     truth=truth),))
def disparity_scores(estimate, truth, mask=None):
    """End-point error and the shares within 1 and 3 pixels."""
    keep = np.isfinite(truth)
    if mask is not None:
        keep &= np.asarray(mask) != 0
    err = np.abs(estimate[keep] - truth[keep])
    if not len(err):
        raise ValueError("no pixel to score: the truth is unknown (NaN) "
                         "everywhere the mask allows")
    return {"epe": float(err.mean()), "within_1": float(np.mean(err <= 1)),
            "within_3": float(np.mean(err <= 3)), "pixels": int(len(err))}


@boundary(disparity=DISPARITIES, tolerance=number(0))
def occluded(disparity, tolerance=1.0):
    """Left pixels that the right camera cannot see, from the true
    disparity (H, W) -> bool (H, W)."""
    W = disparity.shape[-1]
    lands = np.arange(W) - disparity                   # (H, W), NaN unknown
    lands_or_inf = np.where(np.isfinite(lands), lands, np.inf)
    # the leftmost landing point of the pixels to the right of each x
    right_of = np.minimum.accumulate(lands_or_inf[..., ::-1], axis=-1)
    right_of = np.concatenate([right_of[..., -2::-1],
                               np.full(lands.shape[:-1] + (1,), np.inf)],
                              axis=-1)
    hidden = (right_of < lands - tolerance) | (lands < 0)
    return hidden & np.isfinite(lands)


@boundary(C=floats(min_ndim=1, neg_inf=True), gap=integer(1),
          margin=number(0))
def ambiguous(C, gap=3, margin=0.02):
    """Pixels whose correlations have a rival peak: a candidate at least
    ``gap`` disparities from the best scores within ``margin`` of it.
    ``C`` (..., D + 1) -> bool (...)."""
    best = np.argmax(C, axis=-1)                        # (...)
    d = np.arange(C.shape[-1])
    far = np.abs(d - best[..., None]) >= gap            # (..., D + 1)
    rival = np.where(far, C, -np.inf).max(axis=-1)
    return rival >= C.max(axis=-1) - margin


@boundary(img=floats(ndim=2), k=positive_int())
def local_contrast(img, k=5):
    """Standard deviation of ``img`` (H, W) over each ``k × k``
    neighbourhood (mirrored at the borders) -> (H, W)."""
    from scipy.ndimage import uniform_filter

    mean = uniform_filter(img, k, mode="mirror")
    square = uniform_filter(img ** 2, k, mode="mirror")
    return np.sqrt(np.maximum(square - mean ** 2, 0.0))
