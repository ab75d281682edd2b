"""Synthetic images and videos with known answers (chapters 1-4, 9 and 10).

Every generator takes the random generator it draws from, so the book's
examples replay exactly: ``rng = np.random.default_rng(seed)``.

* :func:`two_squares`: the running example, a dark image with two bright
  squares (chapters 1 to 4);
* :func:`moving_square_video`: a square moving across frames, with a static
  distractor (chapter 9);
* :func:`textured_scene` and :func:`shifted_pair`: a scene and two frames of
  it, the second moved by a known displacement (chapter 10);
* :func:`repeated_pattern_pair`: four identical motifs and one landmark, the
  case where cross-attention alone cannot tell the copies apart (chapter 10).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import (boundary, floats, generator, integer, number, pair,
                        positive_int)

__all__ = ["two_squares", "moving_square_video", "textured_scene",
           "shifted_pair", "RepeatedPattern", "repeated_pattern_pair"]


_NOISE = number(0)


@boundary(rng=generator(), size=positive_int(), noise=_NOISE)
def two_squares(rng, size=32, noise=0.05):
    """A dark ``size × size`` image with two bright squares and light noise.

    The squares cover rows and columns 2–13 and 18–29 of a 32 × 32 image
    (scaled for other sizes). Draws ``size²`` standard normals from ``rng``.

    Returns
    -------
    img : ndarray, shape (size, size)
    """
    img = np.zeros((size, size))
    a, b = size // 16, 7 * size // 16                  # 2 and 14 for size 32
    img[a:b, a:b] = 1.0
    img[size // 2 + a:size // 2 + b, size // 2 + a:size // 2 + b] = 1.0
    return img + noise * rng.standard_normal(img.shape)


def _square_stays_apart(args) -> None:
    T, size, side = args["T"], args["size"], args["side"]
    (r0, c0), (dr, dc) = args["start"], args["step"]
    for t in range(T):
        r, c = r0 + t * dr, c0 + t * dc
        if not (0 <= r <= size - side and 0 <= c <= size - side):
            raise ValueError(
                f"step moves the square out of the {size}x{size} frame at "
                f"frame {t} (top-left corner ({r}, {c})); shorten T or the "
                f"step")
        if args["distractor"] and min(r, c) + side > size - side:
            raise ValueError(
                f"step brings the moving square onto the static square at "
                f"frame {t}; choose another start or step")


@boundary(rng=generator(), T=positive_int(), size=positive_int(),
          side=positive_int(), start=pair(integer(), ("row", "col")),
          step=pair(integer(), ("row", "col")), noise=_NOISE,
          checks=(_square_stays_apart,))
def moving_square_video(rng, T=4, size=24, side=8, start=(4, 0),
                        step=(0, 4), noise=0.05, distractor=True):
    """A synthetic video: a bright square moving across dark frames.

    Frame ``t`` holds a square of brightness 1 with its top-left corner at
    ``start + t·step`` (pixels) and, if ``distractor``, a static square of
    brightness 0.5 and the same side in the bottom-right corner. Every frame
    gets its own light Gaussian noise; ``T·size²`` normals are drawn from
    ``rng``.

    Parameters
    ----------
    rng : numpy.random.Generator
    T : int
        Number of frames.
    size : int
        Height and width of a frame in pixels.
    side : int
        Side of both squares in pixels.
    start, step : (int, int)
        Position of the moving square in frame 0 and its motion per frame,
        as (row, col) in pixels.
    noise : float
        Standard deviation of the noise.
    distractor : bool
        Add the static dimmer square.

    Returns
    -------
    video : ndarray, shape (T, size, size)

    Raises
    ------
    TypeError
        If ``rng`` is not a generator.
    ValueError
        If the moving square leaves the frame or meets the static square.
    """
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
    """A scene of overlapping rectangles on a faintly textured background.

    ``n_shapes`` rectangles with sides of 6 to ``size // 2`` pixels and
    brightness 0.4 to 0.9 are painted on a dark frame; a uniform texture of
    amplitude ``texture`` is added everywhere, so every pixel neighbourhood
    looks slightly different and has one true match in a moved copy.

    Returns
    -------
    img : ndarray, shape (size, size)
        Values in [0, 0.9 + texture].
    """
    img = np.zeros((size, size))
    for _ in range(n_shapes):
        h, w = rng.integers(6, size // 2 + 1, size=2)
        r, c = rng.integers(0, size - h + 1), rng.integers(0, size - w + 1)
        img[r:r + h, c:c + w] = rng.uniform(0.4, 0.9)
    return img + texture * rng.random((size, size))


@boundary(img=floats(ndim=2), shift=pair(integer(), ("dy", "dx")),
          rng=generator(), noise=_NOISE)
def shifted_pair(img, shift, rng, noise=0.02):
    """Two noisy frames of ``img``, the second rolled by ``shift`` pixels.

    Parameters
    ----------
    img : array_like, shape (H, W)
    shift : (int, int)
        True displacement (rows down, columns right), applied cyclically.
    rng : numpy.random.Generator
        Draws the independent noise of the two frames (``2·H·W`` normals).
    noise : float
        Standard deviation of the noise, the camera's.

    Returns
    -------
    img1, img2 : ndarray, shape (H, W)
        ``img2[y + dy, x + dx] ≈ img1[y, x]`` (indices modulo H and W).
    """
    img1 = img + noise * rng.standard_normal(img.shape)
    img2 = np.roll(img, shift, axis=(0, 1)) \
        + noise * rng.standard_normal(img.shape)
    return img1, img2


@dataclass(frozen=True)
class RepeatedPattern:
    """Two frames with four identical motifs and one distinct landmark."""

    img1: np.ndarray        # (rows·patch, cols·patch) frame 1
    img2: np.ndarray        # frame 2: the same, moved by `shift` patches
    copies: tuple           # patch (row, col) of the four motifs in frame 1
    landmark: tuple         # patch (row, col) of the landmark in frame 1
    shift: tuple            # (d_row, d_col) in patches
    motif: np.ndarray       # (patch, patch) the repeated motif
    marker: np.ndarray      # (patch, patch) the landmark's motif
    grid: tuple = (6, 10)
    patch: int = 4


@boundary(rng=generator(), shift=pair(integer(0, 1, "0 or 1 patch"),
                                     ("d_row", "d_col")), noise=_NOISE)
def repeated_pattern_pair(rng, shift=(1, 1), noise=0.02):
    """A pair of frames whose motifs cross-attention alone cannot tell apart.

    On a 6 × 10 grid of 4 × 4 patches, four identical ring motifs sit at
    patches (2, 1), (2, 3), (2, 5) and (2, 7) and an X-shaped landmark at
    (4, 8). Frame 2 shows the same scene moved by ``shift`` patches (within
    the frame, no wrap-around). Each frame gets its own noise
    (``2 · 24 · 40`` normals from ``rng``).
    """
    grid, p = (6, 10), 4
    copies = ((2, 1), (2, 3), (2, 5), (2, 7))
    landmark = (4, 8)
    ring = np.ones((p, p))
    ring[1:-1, 1:-1] = 0.0
    cross = np.maximum(np.eye(p), np.eye(p)[::-1])

    def paint(offset):
        img = np.zeros((grid[0] * p, grid[1] * p))
        for (r, c), m in [(rc, ring) for rc in copies] + [(landmark, cross)]:
            r, c = r + offset[0], c + offset[1]
            img[r * p:(r + 1) * p, c * p:(c + 1) * p] = m
        return img + noise * rng.standard_normal(img.shape)

    return RepeatedPattern(img1=paint((0, 0)), img2=paint(shift),
                           copies=copies, landmark=landmark, shift=shift,
                           motif=ring, marker=cross, grid=grid, patch=p)
