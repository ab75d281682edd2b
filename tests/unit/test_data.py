"""The synthetic images and videos of selfattention.data."""

import numpy as np
import pytest

from selfattention.data import (moving_square_video, shifted_pair,
                                textured_scene, two_squares)


def test_two_squares_is_a_dark_image_with_two_bright_squares():
    img = two_squares(np.random.default_rng(0), noise=0.0)
    assert img.shape == (32, 32)
    assert img[2:14, 2:14].min() == 1.0 and img[18:30, 18:30].min() == 1.0
    assert img.sum() == 2 * 144


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("call, error, name", [
    (lambda: two_squares(0), TypeError, "rng"),
    (lambda: two_squares(RNG, size=0), ValueError, "size"),
    (lambda: two_squares(RNG, noise=-1.0), ValueError, "noise"),
    (lambda: textured_scene(None), TypeError, "rng"),
    (lambda: textured_scene(RNG, size=8), ValueError, "size"),
    (lambda: shifted_pair(np.zeros((4, 4)), 3, RNG), TypeError, "shift"),
    (lambda: shifted_pair(np.zeros((4, 4)), (1, 0.5), RNG), TypeError,
     r"shift\[1\]"),
    (lambda: shifted_pair(np.zeros((2, 4, 4)), (1, 1), RNG), ValueError,
     "img"),
    (lambda: moving_square_video(0), TypeError, "rng"),
    (lambda: moving_square_video(RNG, T=6), ValueError, "step"),
    (lambda: moving_square_video(RNG, start=(16, 0), step=(0, 8), T=3),
     ValueError, "step"),
    (lambda: moving_square_video(RNG, T=2.0), TypeError, "T"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=f"^{name}"):
        call()


def test_second_frame_is_the_first_rolled():
    scene = textured_scene(np.random.default_rng(0))
    img1, img2 = shifted_pair(scene, (3, -5), np.random.default_rng(1),
                              noise=0.0)
    assert np.array_equal(np.roll(img1, (3, -5), axis=(0, 1)), img2)
    assert scene.shape == (32, 32) and scene.min() >= 0


def test_square_moves_by_step_and_distractor_stays():
    v = moving_square_video(np.random.default_rng(0), noise=0.0)
    assert v.shape == (4, 24, 24)
    for t in range(4):
        assert (v[t, 4:12, 4 * t:4 * t + 8] == 1.0).all()
        assert v[t].sum() == 64 + 0.5 * 64
        assert (v[t, 16:, 16:] == 0.5).all()
