"""Tests of selfattention.windows: partition, shift, masks, bias, attention."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfattention import masks
from selfattention import windows as wn
from selfattention.attention import multi_head_attention


def weights(rng, C, h):
    Ws = [rng.standard_normal((C, C)) / np.sqrt(C) for _ in range(4)]
    return Ws


# ------------------------------------------------------------ partition
def test_partition_of_a_numbered_grid():
    x = np.arange(16).reshape(4, 4, 1)
    w = wn.window_partition(x, 2)[..., 0]
    np.testing.assert_array_equal(w, [[0, 1, 4, 5], [2, 3, 6, 7],
                                      [8, 9, 12, 13], [10, 11, 14, 15]])


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4),
       st.integers(1, 3), st.integers(0, 2))
def test_partition_and_reverse_are_inverse(a, b, M, C, nbatch):
    rng = np.random.default_rng(a * 100 + b * 10 + M)
    x = rng.standard_normal((2,) * nbatch + (a * M, b * M, C))
    w = wn.window_partition(x, M)
    assert w.shape == (2,) * nbatch + (a * b, M * M, C)
    np.testing.assert_array_equal(wn.window_reverse(w, (a * M, b * M)), x)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4))
def test_partition_groups_exactly_the_tokens_of_window_ids(a, b, M):
    H, W = a * M, b * M
    ids = masks.window_ids((H, W), (M, M)).reshape(H, W, 1)
    w = wn.window_partition(ids, M)[..., 0]
    np.testing.assert_array_equal(w, np.repeat(np.arange(a * b)[:, None],
                                               M * M, axis=1))


# ------------------------------------------------------------ shift
@given(st.integers(1, 3), st.integers(2, 5), st.data())
def test_cyclic_shift_is_undone_by_its_reverse(a, M, data):
    s = data.draw(st.integers(0, M - 1))
    x = np.arange(a * M * a * M * 2.0).reshape(a * M, a * M, 2)
    rolled = wn.cyclic_shift(x, s)
    assert rolled[0, 0, 0] == x[s, s, 0]
    np.testing.assert_array_equal(wn.reverse_cyclic_shift(rolled, s), x)


def test_region_labels_of_an_8x8_grid():
    lab = wn.shift_region_labels((8, 8), 4, 2)
    assert sorted(np.unique(lab)) == list(range(9))
    np.testing.assert_array_equal(lab[0], [0, 0, 0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(lab[:, 0], [0, 0, 0, 0, 3, 3, 6, 6])


def test_shifted_mask_blocks_wrapped_neighbours():
    m = wn.shifted_window_mask((8, 8), 4, 2)
    assert m.shape == (4, 16, 16) and m.dtype == bool
    assert m[0].all()                     # the first window never wraps
    assert m.diagonal(axis1=1, axis2=2).all()
    # last window: 4 regions of 2x2 tokens, 4 x 16 allowed pairs
    assert m[3].sum() == 4 * 16
    assert m[1].sum() == 2 * 64          # two regions of 4x2 tokens
    assert not m[3, 0, 15]


def test_unshifted_masks_are_all_true_and_match_window_mask():
    assert wn.shifted_window_mask((6, 6), 3, 0).all()
    np.testing.assert_array_equal(wn.shifted_grid_mask((6, 9), 3, 0),
                                  masks.window_mask((6, 9), (3, 3)))


@given(st.integers(1, 3), st.integers(2, 5), st.data())
def test_grid_mask_is_the_rolled_window_mask_unrolled(a, M, data):
    """The two constructions (region labels, padded windows) agree."""
    s = data.draw(st.integers(0, M - 1))
    H = W = a * M
    pos = np.arange(H * W).reshape(H, W, 1)
    tokens = wn.window_partition(wn.cyclic_shift(pos, s), M)[..., 0]
    per_window = wn.shifted_window_mask((H, W), M, s)
    full = np.zeros((H * W, H * W), dtype=bool)
    for t, m in zip(tokens, per_window):
        full[np.ix_(t, t)] = m
    np.testing.assert_array_equal(full, wn.shifted_grid_mask((H, W), M, s))


def test_padded_window_count_is_one_more_per_axis():
    ids = wn.padded_window_ids((56, 56), 7, 3)
    assert len(np.unique(ids)) == 81
    assert len(np.unique(wn.padded_window_ids((56, 56), 7, 0))) == 64


# ------------------------------------------------------------ bias
def test_relative_position_index_of_m2():
    np.testing.assert_array_equal(wn.relative_position_index(2),
                                  [[4, 3, 1, 0], [5, 4, 2, 1],
                                   [7, 6, 4, 3], [8, 7, 5, 4]])


@given(st.integers(1, 6))
def test_relative_position_index_depends_on_offset_only(M):
    idx = wn.relative_position_index(M)
    assert idx.shape == (M * M, M * M)
    assert idx.min() == 0 and idx.max() == (2 * M - 1) ** 2 - 1
    assert len(np.unique(idx)) == (2 * M - 1) ** 2
    assert (np.diag(idx) == (M - 1) * (2 * M - 1) + M - 1).all()
    r, c = np.divmod(np.arange(M * M), M)
    off = (r[:, None] - r[None, :]) * 100 + (c[:, None] - c[None, :])
    for v in np.unique(idx):
        assert len(np.unique(off[idx == v])) == 1


def test_relative_position_bias_gathers_per_head():
    M, h = 3, 2
    table = np.arange(25 * h, dtype=float).reshape(25, h)
    B = wn.relative_position_bias(table, M)
    assert B.shape == (h, 9, 9)
    idx = wn.relative_position_index(M)
    np.testing.assert_array_equal(B[1], table[idx, 1])


# ------------------------------------------------------------ attention
@pytest.mark.parametrize("shift", [0, 1, 3])
def test_window_attention_matches_full_grid_reference(shift):
    rng = np.random.default_rng(7)
    H, W, C, M, h = 7, 14, 6, 7, 2
    x = rng.standard_normal((2, H, W, C))
    Ws = weights(rng, C, h)
    table = rng.standard_normal(((2 * M - 1) ** 2, h))
    Y, A = wn.window_attention(x, *Ws, h, M, shift, table)
    assert Y.shape == (2, H, W, C) and A.shape == (2, 2, h, 49, 49)
    np.testing.assert_allclose(A.sum(-1), 1.0)
    mask = wn.shifted_grid_mask((H, W), M, shift)
    B = wn.grid_relative_bias(table, (H, W), M, shift)
    Yf, Af = multi_head_attention(x.reshape(2, H * W, C), *Ws, h,
                                  mask=mask, bias=B)
    np.testing.assert_allclose(Y.reshape(2, H * W, C), Yf, atol=1e-12)
    assert Af[:, :, ~mask].max() == 0.0


@pytest.mark.parametrize("shift", [1, 2])
def test_padding_and_cyclic_shift_agree(shift):
    rng = np.random.default_rng(8)
    H, W, C, M, h = 8, 4, 4, 4, 2
    x = rng.standard_normal((H, W, C))
    Ws = weights(rng, C, h)
    table = rng.standard_normal((49, h))
    Yc, Ac = wn.window_attention(x, *Ws, h, M, shift, table)
    Yp, Ap = wn.window_attention(x, *Ws, h, M, shift, table, method="pad")
    assert Ac.shape[0] == 2 and Ap.shape[0] == 3 * 2
    np.testing.assert_allclose(Yc, Yp, atol=1e-12)


def test_shift_changes_the_result_and_bias_matters():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 8, 4))
    Ws = weights(rng, 4, 1)
    Y0, _ = wn.window_attention(x, *Ws, 1, 4, 0)
    Y2, _ = wn.window_attention(x, *Ws, 1, 4, 2)
    Yb, _ = wn.window_attention(x, *Ws, 1, 4, 0, np.ones((49, 1)) * 3.0)
    Yv, _ = wn.window_attention(x, *Ws, 1, 4, 0,
                                rng.standard_normal((49, 1)))
    assert not np.allclose(Y0, Y2)
    np.testing.assert_allclose(Y0, Yb, atol=1e-12)   # constant bias cancels
    assert not np.allclose(Y0, Yv)


# ------------------------------------------------------------ bad input
def test_bad_inputs_raise_clear_errors():
    x = np.zeros((8, 8, 2))
    Ws = [np.eye(2)] * 4
    with pytest.raises(ValueError, match="tile"):
        wn.window_partition(x, 3)
    with pytest.raises(ValueError, match=r"\(\.\.\., H, W, C\)"):
        wn.window_partition(np.zeros((8, 8)), 4)
    with pytest.raises(TypeError, match="M must be a positive integer"):
        wn.window_partition(x, 2.0)
    with pytest.raises(ValueError, match="windows"):
        wn.window_reverse(np.zeros((3, 16, 2)), (8, 8))
    with pytest.raises(ValueError, match="M² tokens"):
        wn.window_reverse(np.zeros((4, 15, 2)), (8, 8))
    with pytest.raises(TypeError, match="grid"):
        wn.window_reverse(np.zeros((4, 16, 2)), 8)
    with pytest.raises(TypeError, match="shift"):
        wn.cyclic_shift(x, 1.5)
    with pytest.raises(ValueError, match="non-negative"):
        wn.reverse_cyclic_shift(x, -1)
    with pytest.raises(ValueError, match="0..3"):
        wn.shifted_window_mask((8, 8), 4, 4)
    with pytest.raises(TypeError, match="shift"):
        wn.shift_region_labels((8, 8), 4, True)
    with pytest.raises(ValueError, match=r"\(49, h\)"):
        wn.relative_position_bias(np.zeros((25, 2)), 4)
    with pytest.raises(ValueError, match="one column per head"):
        wn.window_attention(x, *Ws, 2, 4, 0, np.zeros((49, 1)))
    with pytest.raises(ValueError, match="method"):
        wn.window_attention(x, *Ws, 1, 4, 2, method="roll")
    with pytest.raises(ValueError, match="finite"):
        wn.window_attention(np.full((8, 8, 2), np.nan), *Ws, 1, 4)
    with pytest.raises(ValueError, match="divide"):
        wn.window_attention(x, *Ws, 1, 3)
