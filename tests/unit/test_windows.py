"""Window partition, cyclic shift, shifted-window masks, window attention
and patch merging.

The reference for window attention is Swin's released construction, written
out below in PyTorch as an independent implementation: nine slices of the
rolled grid labelled 0 … 8 and -100 added between different labels, the
relative position index (Δr + M - 1)(2M - 1) + (Δc + M - 1) with Δ = query -
key, and the scale head_dim ** -0.5.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from selfattention import masks, position
from selfattention import windows as wn
from selfattention.attention import multi_head_attention


def weights(rng, C):
    return [rng.standard_normal((C, C)) / np.sqrt(C) for _ in range(4)]


# ------------------------------------------------------------ Swin, written out
def swin_partition(x, M):
    B, H, W, C = x.shape
    x = x.view(B, H // M, M, W // M, M, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, M * M, C)


def swin_reverse(windows, M, H, W):
    B = windows.shape[0] // (H * W // M // M)
    x = windows.view(B, H // M, W // M, M, M, -1)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, -1)


def swin_index(M):
    coords = torch.stack(torch.meshgrid(torch.arange(M), torch.arange(M),
                                        indexing="ij"))     # (2, M, M)
    flat = coords.flatten(1)                                 # (2, M²)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0)
    rel[:, :, 0] += M - 1
    rel[:, :, 1] += M - 1
    rel[:, :, 0] *= 2 * M - 1
    return rel.sum(-1)                                       # (M², M²)


def swin_mask(H, W, M, s):
    img = torch.zeros(1, H, W, 1)
    cnt = 0
    for hs in (slice(0, -M), slice(-M, -s), slice(-s, None)):
        for ws in (slice(0, -M), slice(-M, -s), slice(-s, None)):
            img[:, hs, ws, :] = cnt
            cnt += 1
    win = swin_partition(img, M).squeeze(-1)                 # (nW, M²)
    diff = win[:, None, :] - win[:, :, None]
    return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)


def swin_window_attention(x, W_q, W_k, W_v, W_o, heads, M, s, table):
    """Swin's W-MSA / SW-MSA with relative position bias, float64."""
    x = torch.from_numpy(x)[None]                            # (1, H, W, C)
    _, H, W, C = x.shape
    if s:
        x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
    win = swin_partition(x, M)                               # (nW, M², C)
    nW, N, _ = win.shape

    def heads_of(Wm):
        y = win @ torch.from_numpy(Wm)
        return y.reshape(nW, N, heads, -1).permute(0, 2, 1, 3)

    q, k, v = heads_of(W_q), heads_of(W_k), heads_of(W_v)
    q = q * q.shape[-1] ** -0.5
    attn = q @ k.transpose(-2, -1)                           # (nW, h, N, N)
    bias = table[swin_index(M).view(-1)].view(N, N, -1).permute(2, 0, 1)
    attn = attn + bias[None]
    if s:
        attn = attn + swin_mask(H, W, M, s).double()[:, None]
    attn = attn.softmax(-1)
    y = (attn @ v).transpose(1, 2).reshape(nW, N, -1) @ torch.from_numpy(W_o)
    y = swin_reverse(y, M, H, W)
    if s:
        y = torch.roll(y, shifts=(s, s), dims=(1, 2))
    return y[0].numpy()


@pytest.mark.parametrize("H, W, M, s, heads", [
    (14, 14, 7, 0, 3), (14, 14, 7, 3, 3), (8, 12, 4, 2, 2), (6, 9, 3, 1, 1)])
def test_window_attention_is_swins_released_construction(H, W, M, s, heads):
    rng = np.random.default_rng(H * W + s)
    C = 4 * heads
    x = rng.standard_normal((H, W, C))
    Ws = weights(rng, C)
    table = rng.standard_normal((heads, 2 * M - 1, 2 * M - 1))
    # Swin stores the table as ((2M-1)², heads), rows in (Δr, Δc) order
    swin_table = torch.from_numpy(table.reshape(heads, -1).T.copy())
    expected = swin_window_attention(x, *Ws, heads, M, s, swin_table)
    Y, A = wn.window_attention(x, *Ws, heads, M, s, table)
    assert np.abs(Y - expected).max() < 1e-10


@pytest.mark.parametrize("M", [1, 2, 3, 7])
def test_the_index_windows_use_is_swins(M):
    assert np.array_equal(position.relative_position_index((M, M)),
                          swin_index(M).numpy())


@given(st.integers(1, 3), st.integers(1, 3), st.integers(2, 5), st.data())
@settings(max_examples=30)
def test_rolled_masks_are_swins_nine_slice_masks(a, b, M, data):
    s = data.draw(st.integers(1, M - 1))
    H, W = a * M, b * M
    swin = swin_mask(H, W, M, s).numpy()                     # 0 or -100
    assert np.array_equal(wn.rolled_window_masks((H, W), M, s), swin == 0)


# ------------------------------------------------------------ partition
def test_partition_of_a_numbered_grid():
    x = np.arange(16).reshape(4, 4, 1)
    w = wn.window_partition(x, 2)[..., 0]
    np.testing.assert_array_equal(w, [[0, 1, 4, 5], [2, 3, 6, 7],
                                      [8, 9, 12, 13], [10, 11, 14, 15]])
    assert w.dtype == x.dtype


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4),
       st.integers(1, 3), st.integers(0, 2))
def test_partition_and_reverse_are_inverse(a, b, M, C, nbatch):
    rng = np.random.default_rng(a * 100 + b * 10 + M)
    x = rng.standard_normal((2,) * nbatch + (a * M, b * M, C))
    w = wn.window_partition(x, M)
    assert w.shape == (2,) * nbatch + (a * b, M * M, C)
    np.testing.assert_array_equal(wn.window_reverse(w, (a * M, b * M), M), x)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4))
def test_partition_groups_exactly_the_tokens_of_window_ids(a, b, M):
    H, W = a * M, b * M
    ids = masks.window_ids((H, W), M).reshape(H, W, 1)
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
    lab = wn.region_labels((8, 8), 4, 2)
    assert sorted(np.unique(lab)) == list(range(9))
    np.testing.assert_array_equal(lab[0], [0, 0, 0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(lab[:, 0], [0, 0, 0, 0, 3, 3, 6, 6])
    assert not wn.region_labels((8, 8), 4, 0).any()


def test_rolled_masks_keep_wrapped_neighbours_apart():
    m = wn.rolled_window_masks((8, 8), 4, 2)
    assert m.shape == (4, 16, 16) and m.dtype == bool
    assert m[0].all()                     # the first window never wraps
    assert m.diagonal(axis1=1, axis2=2).all()
    assert m[3].sum() == 4 * 16           # corner: 4 regions of 2x2 tokens
    assert m[1].sum() == 2 * 64           # edge: 2 regions of 4x2 tokens
    assert not m[3, 0, 15]
    assert wn.rolled_window_masks((6, 6), 3, 0).all()


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 5))
def test_unshifted_mask_is_the_window_mask(a, b, M):
    grid = (a * M, b * M)
    np.testing.assert_array_equal(wn.shifted_window_mask(grid, M, 0),
                                  masks.window_mask(grid, M))


@given(st.integers(1, 3), st.integers(2, 5), st.data())
def test_grid_mask_is_the_rolled_window_masks_unrolled(a, M, data):
    """The two constructions (region labels, padded windows) agree."""
    s = data.draw(st.integers(0, M - 1))
    H = W = a * M
    place = np.arange(H * W).reshape(H, W, 1)
    tokens = wn.window_partition(wn.cyclic_shift(place, s), M)[..., 0]
    full = np.zeros((H * W, H * W), dtype=bool)
    for t, m in zip(tokens, wn.rolled_window_masks((H, W), M, s)):
        full[np.ix_(t, t)] = m
    np.testing.assert_array_equal(full, wn.shifted_window_mask((H, W), M, s))


def test_padding_needs_one_more_window_per_axis():
    assert np.array_equal(np.unique(wn.padded_window_ids((56, 56), 7, 3)),
                          np.arange(81))
    unshifted = wn.padded_window_ids((56, 56), 7, 0)
    assert np.array_equal(unshifted.ravel(), masks.window_ids((56, 56), 7))


def test_grid_bias_is_the_window_bias_of_each_window():
    rng = np.random.default_rng(1)
    M, s, h = 3, 1, 2
    table = rng.standard_normal((h, 2 * M - 1, 2 * M - 1))
    B = wn.shifted_window_bias(table, (6, 6), M, s)          # (h, 36, 36)
    B_win = position.relative_position_bias(table, (M, M))   # (h, 9, 9)
    place = np.arange(36).reshape(6, 6, 1)
    tokens = wn.window_partition(wn.cyclic_shift(place, s), M)[..., 0]
    inside = wn.rolled_window_masks((6, 6), M, s)
    for t, m in zip(tokens, inside):         # every pair of one window
        np.testing.assert_array_equal(B[:, t][:, :, t][:, m], B_win[:, m])
    assert not B[:, ~wn.shifted_window_mask((6, 6), M, s)].any()


# ------------------------------------------------------------ attention
@pytest.mark.parametrize("shift", [0, 1, 3])
def test_window_attention_is_masked_attention_over_the_grid(shift):
    rng = np.random.default_rng(7)
    H, W, C, M, h = 7, 14, 6, 7, 2
    x = rng.standard_normal((2, H, W, C))
    Ws = weights(rng, C)
    table = rng.standard_normal((h, 2 * M - 1, 2 * M - 1))
    Y, A = wn.window_attention(x, *Ws, h, M, shift, table)
    assert Y.shape == (2, H, W, C) and A.shape == (2, 2, h, 49, 49)
    np.testing.assert_allclose(A.sum(-1), 1.0)
    mask = wn.shifted_window_mask((H, W), M, shift)
    B = wn.shifted_window_bias(table, (H, W), M, shift)
    Yf, Af = multi_head_attention(x.reshape(2, H * W, C), *Ws, h,
                                  mask=mask, bias=B)
    assert np.abs(Y.reshape(2, H * W, C) - Yf).max() < 1e-12
    assert Af[:, :, ~mask].max() == 0.0


def test_shift_changes_the_result_and_a_constant_bias_does_not():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 8, 4))
    Ws = weights(rng, 4)
    Y0, _ = wn.window_attention(x, *Ws, 1, 4, 0)
    Y2, _ = wn.window_attention(x, *Ws, 1, 4, 2)
    Yb, _ = wn.window_attention(x, *Ws, 1, 4, 0, np.full((1, 7, 7), 3.0))
    Yv, _ = wn.window_attention(x, *Ws, 1, 4, 0,
                                rng.standard_normal((1, 7, 7)))
    assert not np.allclose(Y0, Y2)
    assert np.abs(Y0 - Yb).max() < 1e-12     # a constant bias cancels
    assert not np.allclose(Y0, Yv)


# ------------------------------------------------------------ merging
def swin_patch_merging(x, reduction):
    """Swin's PatchMerging, written out (LayerNorm without its affine part,
    whose initial values 1 and 0 change nothing)."""
    x = torch.from_numpy(x)[None]                            # (1, H, W, C)
    x0, x1 = x[:, 0::2, 0::2, :], x[:, 1::2, 0::2, :]
    x2, x3 = x[:, 0::2, 1::2, :], x[:, 1::2, 1::2, :]
    z = torch.cat([x0, x1, x2, x3], -1)                      # (1, H/2, W/2, 4C)
    z = torch.nn.functional.layer_norm(z, z.shape[-1:])
    return (z @ torch.from_numpy(reduction))[0].numpy()


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4))
@settings(max_examples=20)
def test_patch_merging_is_swins(a, b, C):
    rng = np.random.default_rng(100 * a + 10 * b + C)
    x = rng.standard_normal((2 * a, 2 * b, C))
    W_merge = rng.standard_normal((4 * C, 2 * C))
    np.testing.assert_allclose(wn.patch_merging(x, W_merge),
                               swin_patch_merging(x, W_merge), atol=1e-10)


def test_patch_merging_reads_each_2x2_neighbourhood():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 6, 3))                    # batch of 2
    out = wn.patch_merging(x, np.eye(12))                    # (2, 2, 3, 12)
    assert out.shape == (2, 2, 3, 12)
    for i, j in np.ndindex(2, 3):
        z = np.concatenate([x[:, 2 * i, 2 * j], x[:, 2 * i + 1, 2 * j],
                            x[:, 2 * i, 2 * j + 1], x[:, 2 * i + 1, 2 * j + 1]],
                           axis=-1)                          # (2, 12)
        np.testing.assert_allclose(out[:, i, j], wn.layer_norm(z))
    # a change in one patch moves exactly one merged token
    y = x.copy()
    y[0, 3, 4] += 1.0
    moved = np.abs(wn.patch_merging(y, np.eye(12)) - out).max(-1) > 0
    assert moved.sum() == 1 and moved[0, 1, 2]


def test_layer_norm_is_torchs_without_affine():
    x = np.random.default_rng(4).standard_normal((3, 5, 8))
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x), (8,)).numpy()
    np.testing.assert_allclose(wn.layer_norm(x), ref, atol=1e-12)


# ------------------------------------------------------------ bad input
X = np.zeros((8, 8, 2))
WS = [np.eye(2)] * 4


@pytest.mark.parametrize("call, error, name", [
    (lambda: wn.window_partition(X, 3), ValueError, "M"),
    (lambda: wn.window_partition(np.zeros((8, 8)), 4), ValueError, "x"),
    (lambda: wn.window_partition(X, 2.0), TypeError, "M"),
    (lambda: wn.window_partition(X.astype(str), 2), TypeError, "x"),
    (lambda: wn.window_reverse(np.zeros((3, 16, 2)), (8, 8), 4), ValueError,
     "windows"),
    (lambda: wn.window_reverse(np.zeros((4, 16, 2)), (8, 8), 3), ValueError,
     "M"),
    (lambda: wn.window_reverse(np.zeros((4, 16, 2)), 8, 4), TypeError,
     "grid"),
    (lambda: wn.cyclic_shift(X, 1.5), TypeError, "shift"),
    (lambda: wn.reverse_cyclic_shift(X, -1), ValueError, "shift"),
    (lambda: wn.rolled_window_masks((8, 8), 4, 4), ValueError, "shift"),
    (lambda: wn.region_labels((8, 8), 4, True), TypeError, "shift"),
    (lambda: wn.shifted_window_mask((8, 6), 4, 1), ValueError, "M"),
    (lambda: wn.padded_window_ids((8, 0), 4, 1), ValueError, "grid"),
    (lambda: wn.shifted_window_bias(np.zeros((2, 5, 5)), (8, 8), 4, 1),
     ValueError, "table"),
    (lambda: wn.window_attention(X, *WS, 2, 4, 0, np.zeros((1, 7, 7))),
     ValueError, "bias_table"),
    (lambda: wn.patch_merging(np.zeros((6, 6, 2)), np.zeros((4, 4))),
     ValueError, "W_merge"),
    (lambda: wn.patch_merging(np.zeros((6, 5, 2)), np.zeros((8, 4))),
     ValueError, "grid"),
    (lambda: wn.patch_merging(np.zeros((6, 2)), np.zeros((8, 4))),
     ValueError, "x"),
    (lambda: wn.patch_merging(X, "W"), TypeError, "W_merge"),
    (lambda: wn.window_attention(np.full((8, 8, 2), np.nan), *WS, 1, 4),
     ValueError, "x"),
    (lambda: wn.window_attention(X, *WS, 1, 3), ValueError, "M"),
    (lambda: wn.window_attention(X, *WS, 1, 4, 4), ValueError, "shift"),
    (lambda: wn.window_attention(X, *WS, 3, 4), ValueError, "h"),
    (lambda: wn.window_attention(X, np.eye(3), *WS[1:], 1, 4), ValueError,
     "W_q"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        call()
