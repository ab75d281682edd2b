"""How much of a map of attention, one weight per patch (N, n), falls on an
object given as a pixel mask (N, S, S) (:ref:`ch-photographs`).
"""

from __future__ import annotations

import numpy as np

from ._validate import (boundary, divides, floats, number, positive_int,
                        require, same_shape)
from .patches import patchify

__all__ = ["patch_shares", "weight_inside", "top_mass_patches", "map_iou"]


def _positive_rows(weights) -> None:
    require(not (weights < 0).any() and np.all(weights.sum(axis=-1) > 0),
            f"weights must hold non-negative rows with a positive sum, got "
            f"smallest entry {weights.min():.3g} and smallest row sum "
            f"{weights.sum(axis=-1).min():.3g}")


def _maps_fit(weights, shares) -> None:
    same_shape(weights=weights, shares=shares)
    _positive_rows(weights)


@boundary(masks=floats(ndim=3), patch=positive_int(),
          checks=(lambda masks, patch: divides(
              "patch", patch, masks.shape[-2:],
              "the masks' height and width"),))
def patch_shares(masks, patch):
    """Each patch's share of object pixels, (N, n) in [0, 1]: ``masks``
    (N, S, S), nonzero on the object, cut into row-major patches."""
    return patchify((masks != 0).astype(np.float64), patch).mean(axis=-1)


@boundary(weights=floats(ndim=2), shares=floats(ndim=2),
          checks=(_maps_fit,))
def weight_inside(weights, shares):
    """The share of each map's weight that falls on object pixels, (N,)."""
    p = weights / weights.sum(axis=-1, keepdims=True)
    return (p * shares).sum(axis=-1)


@boundary(weights=floats(ndim=2), mass=number(0, 1, strict=True),
          checks=(_positive_rows,))
def top_mass_patches(weights, mass=0.6):
    """(N, n) bool: in each row, the fewest heaviest patches that hold at
    least ``mass`` of the row's weight (Caron et al. 2021 keep 0.6)."""
    p = weights / weights.sum(axis=-1, keepdims=True)
    order = np.argsort(-p, axis=-1, kind="stable")        # heaviest first
    before = np.cumsum(np.take_along_axis(p, order, -1), -1) - \
        np.take_along_axis(p, order, -1)                  # mass above each
    keep_sorted = before < mass
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return keep


@boundary(weights=floats(ndim=2), shares=floats(ndim=2),
          mass=number(0, 1, strict=True),
          checks=(_maps_fit,))
def map_iou(weights, shares, mass=0.6):
    """Intersection over union, in pixels, of the patches
    :func:`top_mass_patches` keeps with the object whose patch ``shares``
    (N, n) are given; (N,). Counted in patches: the intersection is the
    kept patches' shares, the union the kept patches plus the object's
    pixels outside them."""
    kept = top_mass_patches(weights, mass)
    inter = (shares * kept).sum(axis=-1)
    union = kept.sum(axis=-1) + shares.sum(axis=-1) - inter
    return inter / union
