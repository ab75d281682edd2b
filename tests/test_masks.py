"""Tests of the neighbourhood mask added to selfattention.masks (chapter 4)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfattention import masks
from selfattention.attention import attention


def test_neighborhood_mask_of_a_corner_and_a_centre_patch():
    m = masks.neighborhood_mask((8, 8), 1)
    assert m.shape == (64, 64) and m.dtype == bool
    corner = np.flatnonzero(m[0])
    np.testing.assert_array_equal(corner, [0, 1, 8, 9])
    centre = np.flatnonzero(m[3 * 8 + 3])                    # patch (3, 3)
    want = [r * 8 + c for r in (2, 3, 4) for c in (2, 3, 4)]
    np.testing.assert_array_equal(centre, want)


def test_neighborhood_mask_radius_zero_is_the_identity():
    np.testing.assert_array_equal(masks.neighborhood_mask((3, 5), 0),
                                  np.eye(15, dtype=bool))


def test_neighborhood_mask_crosses_window_borders():
    # patches (0, 3) and (0, 4) lie in different 4x4 windows but are neighbours
    assert masks.neighborhood_mask((8, 8), 1)[3, 4]
    assert not masks.window_mask((8, 8), (4, 4))[3, 4]


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 6))
def test_neighborhood_mask_invariants(rows, cols, radius):
    m = masks.neighborhood_mask((rows, cols), radius)
    n = rows * cols
    assert m.shape == (n, n)
    assert m.diagonal().all()
    np.testing.assert_array_equal(m, m.T)
    # row r of the grid sees min(rows, r + radius + 1) - max(0, r - radius) rows
    reach = lambda k, size: min(size, k + radius + 1) - max(0, k - radius)
    pos = masks.grid_positions(rows, cols)
    counts = [reach(r, rows) * reach(c, cols) for r, c in pos]
    np.testing.assert_array_equal(m.sum(axis=1), counts)
    # on a 1-row grid it is the 1-D band of local_mask
    if rows == 1:
        np.testing.assert_array_equal(m, masks.local_mask(cols, radius))


def test_neighborhood_mask_feeds_attention():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 3))
    m = masks.neighborhood_mask((4, 4), 1)
    _, A = attention(X, X, X, mask=m)
    assert (A[~m] == 0).all()
    np.testing.assert_allclose(A.sum(axis=-1), 1)


@pytest.mark.parametrize("grid, radius, error, words", [
    ((8, 8), -1, ValueError, ["radius", "non-negative", "-1"]),
    ((8, 8), 1.5, ValueError, ["radius", "1.5"]),
    ((8, 8), True, ValueError, ["radius", "True"]),
    (8, 1, TypeError, ["grid", "pair", "8"]),
    ((0, 8), 1, ValueError, ["rows", "positive"]),
])
def test_neighborhood_mask_rejects_bad_input(grid, radius, error, words):
    with pytest.raises(error) as info:
        masks.neighborhood_mask(grid, radius)
    for word in words:
        assert word in str(info.value)


# mask_of_kind: chapter 4's masks chosen by name (the live widget's factory)

def test_mask_of_kind_matches_each_mask_function():
    grid = (4, 6)
    np.testing.assert_array_equal(masks.mask_of_kind("none", grid, 2),
                                  np.ones((24, 24), dtype=bool))
    np.testing.assert_array_equal(masks.mask_of_kind("causal", grid, 2),
                                  masks.causal_mask(24))
    np.testing.assert_array_equal(masks.mask_of_kind("local", grid, 4),
                                  masks.neighborhood_mask(grid, 2))
    np.testing.assert_array_equal(masks.mask_of_kind("window", grid, 2),
                                  masks.window_mask(grid, (2, 2)))


@given(st.sampled_from(masks.MASK_KINDS), st.integers(1, 4),
       st.integers(1, 4), st.sampled_from([1, 2, 4]))
def test_mask_of_kind_invariants(kind, r, c, size):
    grid = (r * size, c * size)                 # windows of `size` tile it
    m = masks.mask_of_kind(kind, grid, size)
    n = grid[0] * grid[1]
    assert m.shape == (n, n) and m.dtype == bool
    assert m.diagonal().all()                   # every token sees itself


@pytest.mark.parametrize("kind, grid, size, error, word", [
    ("square", (4, 4), 2, ValueError, "kind"),
    ("window", (4, 4), 3, ValueError, "tile"),
    ("local", (4, 4), 0, ValueError, "size"),
    ("none", 16, 2, TypeError, "grid"),
    ("causal", (0, 4), 2, ValueError, "grid rows"),
])
def test_mask_of_kind_rejects_bad_input(kind, grid, size, error, word):
    with pytest.raises(error, match=word):
        masks.mask_of_kind(kind, grid, size)
