"""Tests of selfattention.patches: images become row-major patch tokens."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfattention.patches import (center, digit_patch_tokens, patchify,
                                   unpatchify)


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
def test_patchify_and_unpatchify_are_inverse(H, W, p):
    img = np.arange(H * p * W * p, dtype=float).reshape(H * p, W * p)
    X = patchify(img, p)
    assert X.shape == (H * W, p * p)
    np.testing.assert_array_equal(X[0], img[:p, :p].ravel())
    np.testing.assert_array_equal(unpatchify(X, (H, W)), img)


def test_patch_tokens_are_row_major():
    img = np.arange(16.0).reshape(4, 4)
    X = patchify(img, 2)
    np.testing.assert_array_equal(X[1], [2, 3, 6, 7])


def test_patchify_keeps_batch_axes():
    imgs = np.random.default_rng(0).standard_normal((3, 2, 8, 4))
    X = patchify(imgs, 2)
    assert X.shape == (3, 2, 8, 4)
    np.testing.assert_array_equal(X[2, 1], patchify(imgs[2, 1], 2))


def test_center_removes_each_patch_mean():
    X = center(np.array([[1.0, 3.0], [5.0, 5.0]]))
    np.testing.assert_array_equal(X, [[-1, 1], [0, 0]])


def test_digit_tokens_are_standardized():
    T = digit_patch_tokens(300, 2)
    assert T.shape == (300, 16, 4)
    np.testing.assert_allclose(T.mean(axis=(0, 1)), 0, atol=1e-12)
    np.testing.assert_allclose(T.std(axis=(0, 1)), 1)


@pytest.mark.parametrize("call, error, name", [
    (lambda: patchify(np.ones((10, 10)), 4), ValueError, "p"),
    (lambda: patchify(np.ones((8, 8)), 0), ValueError, "p"),
    (lambda: patchify(np.ones((8, 8)), 2.0), TypeError, "p"),
    (lambda: patchify(np.ones(8), 2), ValueError, "img"),
    (lambda: patchify("image", 2), TypeError, "img"),
    (lambda: unpatchify(np.ones((4, 5)), (2, 2)), ValueError, "X"),
    (lambda: unpatchify(np.ones((4, 4)), (3, 2)), ValueError, "X"),
    (lambda: unpatchify(np.ones((4, 4)), 4), TypeError, "grid"),
    (lambda: center([np.nan, 1.0]), ValueError, "X"),
    (lambda: digit_patch_tokens(5000), ValueError, "n_images"),
    (lambda: digit_patch_tokens(10, 3), ValueError, "p"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=f"^{name}"):
        call()
