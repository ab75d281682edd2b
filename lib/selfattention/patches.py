"""Synthetic images and patch grids: how an image becomes tokens (chapter 1).

A ``p × p`` patch of a grayscale image becomes one token of ``p²`` pixels,
numbered row-major over the patch grid, as in ViT.
"""

from __future__ import annotations

import numpy as np

from ._legacy import as_float_array, positive_int

__all__ = ["patchify", "unpatchify", "center",
           "digit_patch_tokens"]


def patchify(img, p: int) -> np.ndarray:
    """Cut images into non-overlapping ``p × p`` patches, row-major.

    Parameters
    ----------
    img : array_like, shape (..., H, W)
        Grayscale images; ``p`` must divide ``H`` and ``W``.
    p : int
        Patch side in pixels.

    Returns
    -------
    X : ndarray, shape (..., (H/p)·(W/p), p²)
        One token per patch; token ``r·(W/p) + c`` is patch (r, c).
    """
    img = as_float_array(img, "img", min_ndim=2)
    p = positive_int(p, "p")
    *batch, H, W = img.shape
    if H % p or W % p:
        raise ValueError(
            f"patch size p={p} must divide the image height and width, "
            f"got an image of {H}x{W}"
        )
    g = img.reshape(*batch, H // p, p, W // p, p)       # (..., R, p, C, p)
    g = np.moveaxis(g, -3, -2)                          # (..., R, C, p, p)
    return g.reshape(*batch, (H // p) * (W // p), p * p)


def unpatchify(X, grid: tuple[int, int]) -> np.ndarray:
    """Inverse of :func:`patchify`: (..., R·C, p²) -> (..., R·p, C·p)."""
    X = as_float_array(X, "X", min_ndim=2)
    R, C = grid
    *batch, n, pp = X.shape
    p = int(round(np.sqrt(pp)))
    if p * p != pp or n != R * C:
        raise ValueError(
            f"X of shape {X.shape} does not hold {R}x{C} square patches"
        )
    g = X.reshape(*batch, R, C, p, p)
    return np.moveaxis(g, -3, -2).reshape(*batch, R * p, C * p)


def center(X) -> np.ndarray:
    """Subtract each token's mean, so a flat patch becomes the zero vector."""
    X = as_float_array(X, "X")
    return X - X.mean(axis=-1, keepdims=True)


def digit_patch_tokens(n_images: int = 300, p: int = 2) -> np.ndarray:
    """Patches of scikit-learn's 8 × 8 digits, standardized per pixel.

    Each image becomes ``(8/p)²`` tokens of ``p²`` pixels; every pixel of a
    patch is then standardized over all images and tokens (mean 0, standard
    deviation 1), the unit-variance input that chapter 2's argument assumes.

    Returns
    -------
    T : ndarray, shape (n_images, (8/p)², p²)
    """
    from sklearn.datasets import load_digits

    n_images = positive_int(n_images, "n_images")
    images = load_digits().images
    if n_images > len(images):
        raise ValueError(
            f"n_images must be at most {len(images)}, got {n_images}"
        )
    T = patchify(images[:n_images], p)                   # (N, n, p²)
    return (T - T.mean(axis=(0, 1))) / T.std(axis=(0, 1))
