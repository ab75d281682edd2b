"""Patch grids: each ``p × p`` patch of a grayscale image becomes a token of
``p²`` pixels, row-major over the grid ``(H, W)`` (:ref:`ch-definition`).
"""

import numpy as np

from ._validate import (boundary, divides, floats, grid_shape, integer,
                        positive_int, require)

__all__ = ["patchify", "unpatchify", "center", "digit_patch_tokens"]


@boundary(img=floats(min_ndim=2), p=positive_int(),
          checks=(lambda img, p: divides("p", p, img.shape[-2:],
                                         "the image's height and width"),))
def patchify(img, p):
    """Cut images (..., H·p, W·p) into ``p × p`` patches (..., H·W, p²),
    numbered row-major."""
    *batch, H_img, W_img = img.shape
    H, W = H_img // p, W_img // p
    g = img.reshape(*batch, H, p, W, p)                 # (..., H, p, W, p)
    g = np.moveaxis(g, -3, -2)                          # (..., H, W, p, p)
    return g.reshape(*batch, H * W, p * p)              # (..., n, p²)


def _square_patches(X, grid) -> None:
    (H, W), p = grid, int(round(np.sqrt(X.shape[-1])))
    require(p * p == X.shape[-1] and X.shape[-2] == H * W,
            f"X must hold {H}x{W} square patches, shape (..., {H * W}, p²), "
            f"got shape {X.shape}")


@boundary(X=floats(min_ndim=2), grid=grid_shape(), checks=(_square_patches,))
def unpatchify(X, grid):
    """Inverse of :func:`patchify`: (..., H·W, p²) -> (..., H·p, W·p)."""
    H, W = grid
    *batch, _, pp = X.shape
    p = int(round(np.sqrt(pp)))
    g = X.reshape(*batch, H, W, p, p)                   # (..., H, W, p, p)
    g = np.moveaxis(g, -3, -2)                          # (..., H, p, W, p)
    return g.reshape(*batch, H * p, W * p)


@boundary(X=floats(min_ndim=1))
def center(X):
    """Subtract each token's mean, so a flat patch becomes the zero vector."""
    return X - X.mean(axis=-1, keepdims=True)


@boundary(n_images=integer(1, 1797, "a number of images"), p=positive_int(),
          checks=(lambda p: divides("p", p, (8,), "the digits' 8 pixels"),))
def digit_patch_tokens(n_images=300, p=2):
    """Patches of scikit-learn's 8 × 8 digits, each pixel standardized over
    all images and tokens (:ref:`ch-scaling`): shape (n_images, (8/p)², p²)."""
    from sklearn.datasets import load_digits

    T = patchify(load_digits().images[:n_images], p)     # (N, n, p²)
    return (T - T.mean(axis=(0, 1))) / T.std(axis=(0, 1))
