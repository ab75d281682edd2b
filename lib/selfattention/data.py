"""Synthetic images and videos with known answers, the chapters' examples,
drawn from the generator given (:ref:`ch-definition`, :ref:`ch-matching`).
"""

import numpy as np

from ._validate import (boundary, floats, generator, integer, number, pair,
                        positive_int, require)

__all__ = ["two_squares", "moving_square_video", "textured_scene",
           "shifted_pair"]


@boundary(rng=generator(), size=positive_int(), noise=number(0))
def two_squares(rng, size=32, noise=0.05):
    """A dark image with two bright squares and light noise
    (:ref:`ch-definition`-:ref:`ch-masks`)."""
    img = np.zeros((size, size))
    a, b = size // 16, 7 * size // 16                  # 2 and 14 for size 32
    img[a:b, a:b] = 1.0
    img[size // 2 + a:size // 2 + b, size // 2 + a:size // 2 + b] = 1.0
    return img + noise * rng.standard_normal(img.shape)


def _square_stays_apart(T, size, side, start, step, distractor) -> None:
    """The moving square stays in the frame, and off the static one."""
    for t in range(T):
        r, c = (a + t * d for a, d in zip(start, step))
        out = not (0 <= r <= size - side and 0 <= c <= size - side)
        require(not out and not (distractor and min(r, c) + side > size - side),
                f"step moves the square "
                f"{'out of the frame' if out else 'onto the static square'} "
                f"at frame {t} (top-left corner ({r}, {c})); choose another "
                f"start, step or T")


@boundary(rng=generator(), T=positive_int(), size=positive_int(),
          side=positive_int(), start=pair(integer(), ("row", "col")),
          step=pair(integer(), ("row", "col")), noise=number(0),
          checks=(_square_stays_apart,))
def moving_square_video(rng, T=4, size=24, side=8, start=(4, 0),
                        step=(0, 4), noise=0.05, distractor=True):
    """A video (T, size, size): a bright square moving by ``step`` per frame
    and, if ``distractor``, a static dimmer one at the bottom right
    (:ref:`ch-nonlocal`)."""
    video = np.zeros((T, size, size))                   # (T, size, size)
    if distractor:
        video[:, size - side:, size - side:] = 0.5
    for t in range(T):
        r, c = start[0] + t * step[0], start[1] + t * step[1]
        video[t, r:r + side, c:c + side] = 1.0
    return video + noise * rng.standard_normal(video.shape)


@boundary(rng=generator(), size=integer(12, what="a number of pixels"),
          n_shapes=positive_int(), texture=number(0))
def textured_scene(rng, size=32, n_shapes=5, texture=0.3):
    """Overlapping rectangles on a faintly textured background, so that every
    neighbourhood differs a little (:ref:`ch-matching`)."""
    img = np.zeros((size, size))
    for _ in range(n_shapes):
        h, w = rng.integers(6, size // 2 + 1, size=2)
        r, c = rng.integers(0, size - h + 1), rng.integers(0, size - w + 1)
        img[r:r + h, c:c + w] = rng.uniform(0.4, 0.9)
    return img + texture * rng.random((size, size))


@boundary(img=floats(ndim=2), shift=pair(integer(), ("dy", "dx")),
          rng=generator(), noise=number(0))
def shifted_pair(img, shift, rng, noise=0.02):
    """Two noisy frames of ``img``, the second rolled by ``shift`` pixels:
    ``img2[y + dy, x + dx] ≈ img1[y, x]`` (:ref:`ch-matching`)."""
    img1 = img + noise * rng.standard_normal(img.shape)
    img2 = np.roll(img, shift, axis=(0, 1)) \
        + noise * rng.standard_normal(img.shape)
    return img1, img2
