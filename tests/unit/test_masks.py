"""Tests of selfattention.masks: True = this query may use this key."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfattention import masks
from selfattention.attention import attention


def by_definition(n, allowed):
    """The (n, n) mask whose entry [i, j] is allowed(i, j)."""
    return np.array([[bool(allowed(i, j)) for j in range(n)]
                     for i in range(n)])


# ------------------------------------------------------------ 1-D masks
@given(st.integers(1, 12))
def test_causal_mask_allows_exactly_the_keys_up_to_the_query(n):
    m = masks.causal_mask(n)
    assert m.dtype == bool
    np.testing.assert_array_equal(m, by_definition(n, lambda i, j: j <= i))


@given(st.integers(1, 12), st.integers(0, 12))
def test_local_mask_is_the_band_of_its_radius(n, radius):
    np.testing.assert_array_equal(
        masks.local_mask(n, radius),
        by_definition(n, lambda i, j: abs(i - j) <= radius))


@given(st.lists(st.integers(1, 6), min_size=1, max_size=4))
def test_padding_mask_allows_the_real_keys_of_each_item(lengths):
    n = 6
    m = masks.padding_mask(lengths, n)
    assert m.shape == (len(lengths), n, n) and m.dtype == bool
    for b, L in enumerate(lengths):
        want = by_definition(n, lambda i, j, L=L: j < L)
        np.testing.assert_array_equal(m[b], want)


def test_padding_mask_makes_padded_items_equal_to_items_alone():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 5, 3))
    X[0, 3:] = 0.0                                   # item 0: 3 real tokens
    Y, _ = attention(X, X, X, mask=masks.padding_mask([3, 5], 5))
    alone, _ = attention(X[0, :3], X[0, :3], X[0, :3])
    np.testing.assert_allclose(Y[0, :3], alone, rtol=0, atol=1e-12)


# ------------------------------------------------------------ grid masks
@given(st.integers(1, 6), st.integers(1, 6))
def test_grid_positions_number_the_tokens_row_major(H, W):
    pos = masks.grid_positions((H, W))
    assert pos.shape == (H * W, 2)
    np.testing.assert_array_equal(pos, [divmod(i, W) for i in range(H * W)])


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 6))
def test_neighborhood_mask_is_the_square_around_each_query(H, W, radius):
    pos = masks.grid_positions((H, W))
    want = by_definition(H * W, lambda i, j: np.abs(pos[i] - pos[j]).max()
                         <= radius)
    np.testing.assert_array_equal(masks.neighborhood_mask((H, W), radius),
                                  want)
    if H == 1:                       # a single row is the 1-D band
        np.testing.assert_array_equal(masks.neighborhood_mask((H, W), radius),
                                      masks.local_mask(W, radius))


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
def test_window_mask_joins_exactly_the_tokens_of_one_window(a, b, M):
    H, W = a * M, b * M
    pos = masks.grid_positions((H, W))
    same = by_definition(H * W, lambda i, j: (pos[i] // M ==
                                              pos[j] // M).all())
    np.testing.assert_array_equal(masks.window_mask((H, W), M), same)
    ids = masks.window_ids((H, W), M)
    assert sorted(set(ids)) == list(range(a * b))
    assert ids[W - 1] == b - 1 and ids[-1] == a * b - 1    # row-major


def test_window_mask_of_the_running_example():
    m = masks.window_mask((8, 8), 4)
    assert m.sum() == 4 * 16 ** 2 == 1024               # of 64² = 4096
    # patches (0, 3) and (0, 4): neighbours, but in different windows
    assert masks.neighborhood_mask((8, 8), 1)[3, 4] and not m[3, 4]


@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from([1, 2, 4]),
       st.integers(0, 3))
def test_mask_of_kind_gives_each_kind_its_shape(a, b, M, radius):
    grid = (a * M, b * M)                       # windows of M tile it
    n = grid[0] * grid[1]

    def of(kind):
        m = masks.mask_of_kind(kind, grid, M=M, radius=radius)
        assert m.shape == (n, n) and m.dtype == bool and m.diagonal().all()
        return m

    assert of("none").all()
    causal = of("causal")
    assert not np.triu(causal, 1).any()                  # no future key
    assert (causal.sum(axis=1) == np.arange(1, n + 1)).all()
    for kind in ("neighborhood", "window"):
        m = of(kind)
        assert (m == m.T).all()                          # symmetric
    window = of("window")
    assert (window.sum(axis=1) == M * M).all()
    closed = (window.astype(int) @ window.astype(int)) > 0
    assert (closed == window).all()                      # blocks: windows
    near = of("neighborhood")
    side = 2 * radius + 1                                # around the query
    assert near.sum(axis=1).max() <= side * side
    if min(grid) >= side:                                # a corner patch
        assert near[0].sum() == (radius + 1) ** 2


def test_mask_of_kind_needs_tiling_windows_only_for_windows():
    assert masks.mask_of_kind("neighborhood", (4, 4), M=3).shape == (16, 16)
    with pytest.raises(ValueError, match="^M"):
        masks.mask_of_kind("window", (4, 4), M=3)


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize("call, name", [
    (lambda: masks.padding_mask([0, 3], 4), "lengths"),
    (lambda: masks.window_mask((8, 8), 3), "M"),
    (lambda: masks.window_ids((6, 4), 3), "M"),
])
def test_arguments_that_do_not_fit_each_other_are_named(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
