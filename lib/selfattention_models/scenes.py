"""Scenes of handwritten digits on photograph crops, each digit with its exact
mask and box; training and test scenes share no digit and no photograph.
"""

from dataclasses import dataclass

import numpy as np

from selfattention._validate import (boundary, generator, integer, ints,
                                     number, one_of, pair, positive_int,
                                     require, sequence)

from .mnist import mnist_digits
from .photos import NAMES, crops_fit, random_crops

__all__ = ["split_digits", "Scenes", "digit_scenes"]


@boundary(test_fraction=number(0, 1, strict=True), seed=integer(0))
def split_digits(test_fraction=0.2, seed=0):
    """Indices into :func:`~selfattention_models.mnist.mnist_digits` for
    training and for testing, stratified by class."""
    from sklearn.model_selection import train_test_split
    labels = mnist_digits()[1]
    train, test = train_test_split(np.arange(len(labels)),
                                   test_size=test_fraction, random_state=seed,
                                   stratify=labels)
    return np.sort(train), np.sort(test)


@dataclass(frozen=True)
class Scenes:
    """A batch of scenes; the digits of scene ``i`` are its first
    ``counts[i]`` entries of ``labels`` and ``boxes``."""

    images: np.ndarray      # (n, S, S) float64 grey levels in [0, 1]
    segments: np.ndarray    # (n, S, S) int8: 0 background, j for digit j - 1
    labels: np.ndarray      # (n, k) int64 class of each digit; -1: none
    boxes: np.ndarray       # (n, k, 4) int64 (top, left, bottom, right)
    counts: np.ndarray      # (n,) int64 digits in each scene, 1 … k
    photos: np.ndarray      # (n,) int64 index of the background photograph

    def mask(self, i, j):
        """(S, S) bool: the ink of digit ``j`` of scene ``i``."""
        return self.segments[i] == j + 1


def _place(rng, sizes, S, tries=1000):
    """Top-left corners for squares of ``sizes`` in an S × S image, none
    overlapping another; None when a square finds no place."""
    corners = []
    for s in sizes:
        for _ in range(tries):
            r, c = rng.integers(S - s + 1, size=2)
            if all(r + s <= r2 or r2 + s2 <= r or c + s <= c2 or c2 + s2 <= c
                   for (r2, c2), s2 in zip(corners, sizes)):
                corners.append((int(r), int(c)))
                break
        else:
            return None
    return corners


def _digit(index, side):
    """Digit ``index`` as ink opacity (side, side) in [0, 1]."""
    from skimage.transform import resize
    img = mnist_digits()[0][index]                      # (28, 28)
    if side == img.shape[0]:
        return img
    return np.clip(resize(img, (side, side), anti_aliasing=True), 0, 1)


def _digits_fit_scene(photos, digits, size, n_digits, digit_size,
                      short_side) -> None:
    """Digits are MNIST indices, ranges run low to high, digits keep some
    ink (at least 14 pixels a side), the most digits of the largest side
    cover at most half the scene (so that they can be placed apart), and
    the scene fits the photographs."""
    total = len(mnist_digits()[1])
    require(len(digits) and 0 <= digits.min() and digits.max() < total,
            f"digits must be indices of the {total} MNIST digits, 0 to "
            f"{total - 1}, got {len(digits)} indices")
    for name, (low, high) in (("n_digits", n_digits),
                              ("digit_size", digit_size)):
        require(low <= high, f"{name} must run from low to high, got "
                             f"{(low, high)}")
    require(digit_size[0] >= 14, f"digit_size must be at least 14 pixels "
            f"(below that some digits keep no pixel of opacity 0.5), got "
            f"{digit_size[0]}")
    require(2 * n_digits[1] * digit_size[1] ** 2 <= size * size,
            f"n_digits and digit_size must leave the digits at most half of "
            f"the {size} × {size} scene (size) to be placed apart, got up to "
            f"{n_digits[1]} digits of {digit_size[1]} pixels a side")
    crops_fit(photos, size, short_side, photos="photos")


@boundary(rng=generator(), n=positive_int(), photos=sequence(one_of(*NAMES)),
          digits=ints(ndim=1), size=positive_int(),
          n_digits=pair(positive_int(), ("fewest", "most")),
          digit_size=pair(positive_int(), ("smallest", "largest")),
          short_side=positive_int(), checks=(_digits_fit_scene,))
def digit_scenes(rng, n, photos, digits, size=64, n_digits=(1, 3),
                 digit_size=(16, 24), short_side=128):
    """``n`` scenes of ``size`` × ``size`` pixels: a crop of one of
    ``photos`` with ``n_digits`` digits (drawn uniformly from the MNIST
    indices ``digits``) pasted where none overlaps another."""
    images, labels_all = mnist_digits()
    crops, source = random_crops(rng, photos, n, size, short_side)
    k = n_digits[1]
    segments = np.zeros((n, size, size), np.int8)
    labels = np.full((n, k), -1, np.int64)
    boxes = np.full((n, k, 4), -1, np.int64)
    counts = rng.integers(n_digits[0], n_digits[1] + 1, size=n)
    for i in range(n):
        corners = None
        while corners is None:                          # rare: place again
            sides = rng.integers(digit_size[0], digit_size[1] + 1,
                                 size=counts[i])
            corners = _place(rng, sides, size)
        for j, ((r, c), s) in enumerate(zip(corners, sides)):
            index = digits[rng.integers(len(digits))]
            alpha = _digit(index, int(s))               # (s, s)
            under = crops[i, r:r + s, c:c + s]
            ink = 1.0 if under.mean() < 0.5 else 0.0
            crops[i, r:r + s, c:c + s] = under * (1 - alpha) + ink * alpha
            rows, cols = np.nonzero(alpha >= 0.5)
            segments[i, r + rows, c + cols] = j + 1
            labels[i, j] = labels_all[index]
            boxes[i, j] = (r + rows.min(), c + cols.min(),
                           r + rows.max() + 1, c + cols.max() + 1)
    return Scenes(crops, segments, labels, boxes, counts.astype(np.int64),
                  source.astype(np.int64))
