"""Positional encodings and the relative position bias (chapter 5)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfattention import attention, position


# ------------------------------------------------------------ sinusoidal 1D
def test_sinusoidal_1d_matches_the_formula():
    n, d = 9, 12
    E = position.sinusoidal_1d(n, d)
    assert E.shape == (n, d)
    for t in range(n):
        for i in range(d // 2):
            angle = t / 10000 ** (2 * i / d)
            assert E[t, 2 * i] == pytest.approx(np.sin(angle), abs=1e-15)
            assert E[t, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-15)


def test_sinusoidal_1d_position_zero_alternates_zero_and_one():
    E = position.sinusoidal_1d(3, 8)
    assert np.array_equal(E[0], np.tile([0.0, 1.0], 4))


@given(n=st.integers(2, 40), half=st.integers(1, 16),
       base=st.floats(2.0, 1e5))
def test_sinusoidal_dot_products_depend_only_on_the_offset(n, half, base):
    E = position.sinusoidal_1d(n, 2 * half, base=base)
    G = E @ E.T
    assert np.abs(E).max() <= 1.0
    for k in range(-(n - 1), n):
        diag = np.diag(G, k)
        assert np.allclose(diag, diag[0], atol=1e-9)


@given(t=st.integers(0, 50), k=st.integers(0, 50), half=st.integers(1, 8))
def test_shifting_a_position_is_a_fixed_rotation(t, k, half):
    d = 2 * half
    E = position.sinusoidal_1d(t + k + 1, d)
    # E[t + k] = R_k E[t] with R_k built from E[k] alone (the same for all t)
    s, c = E[k, 0::2], E[k, 1::2]
    rotated = np.empty(d)
    rotated[0::2] = E[t, 0::2] * c + E[t, 1::2] * s
    rotated[1::2] = E[t, 1::2] * c - E[t, 0::2] * s
    assert np.allclose(rotated, E[t + k], atol=1e-9)


@pytest.mark.parametrize("call, error, name", [
    (lambda: position.sinusoidal_1d(4, 5), ValueError, "d"),     # odd
    (lambda: position.sinusoidal_1d(0, 4), ValueError, "n"),
    (lambda: position.sinusoidal_1d(4, 0), ValueError, "d"),
    (lambda: position.sinusoidal_1d(4.0, 4), TypeError, "n"),
    (lambda: position.sinusoidal_1d(4, 4, base=1.0), ValueError, "base"),
    (lambda: position.sinusoidal_1d(4, 4, base=np.inf), ValueError, "base"),
    (lambda: position.sinusoidal_1d(4, 4, base="big"), TypeError, "base"),
    (lambda: position.sinusoidal_2d((4, 4), 6), ValueError, "d"),
    (lambda: position.sinusoidal_2d((4, "4"), 8), TypeError, r"grid\[1\]"),
    (lambda: position.sinusoidal_2d(4, 8), TypeError, "grid"),
    (lambda: position.relative_offsets((0, 2)), ValueError, r"grid\[0\]"),
    (lambda: position.relative_position_index([3]), TypeError, "grid"),
    (lambda: position.relative_position_bias(np.zeros((5, 5)), (4, 4)),
     ValueError, "table"),
    (lambda: position.relative_position_bias(np.zeros(49), (4, 4)),
     ValueError, "table"),
    (lambda: position.relative_position_bias(np.full((7, 7), np.nan),
                                             (4, 4)), ValueError, "table"),
    (lambda: position.relative_position_bias("table", (4, 4)), TypeError,
     "table"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=f"^{name}"):
        call()


# ------------------------------------------------------------ sinusoidal 2D
@given(H=st.integers(1, 6), W=st.integers(1, 6), quarter=st.integers(1, 6))
def test_sinusoidal_2d_is_row_code_then_column_code(H, W, quarter):
    d = 4 * quarter
    E = position.sinusoidal_2d((H, W), d)
    assert E.shape == (H * W, d)
    E_row = position.sinusoidal_1d(H, d // 2)
    E_col = position.sinusoidal_1d(W, d // 2)
    for i in range(H * W):
        r, c = divmod(i, W)
        assert np.array_equal(E[i, :d // 2], E_row[r])
        assert np.array_equal(E[i, d // 2:], E_col[c])


def test_every_patch_gets_its_own_2d_code():
    E = position.sinusoidal_2d((8, 8), 16)
    assert len(np.unique(E.round(12), axis=0)) == 64


# ------------------------------------------------------------ relative bias
@given(H=st.integers(1, 6), W=st.integers(1, 6))
def test_relative_index_numbers_the_offsets(H, W):
    idx = position.relative_position_index((H, W))
    off = position.relative_offsets((H, W))
    n = H * W
    assert idx.shape == (n, n) and off.shape == (n, n, 2)
    assert idx.min() >= 0 and idx.max() < (2 * H - 1) * (2 * W - 1)
    centre = (H - 1) * (2 * W - 1) + W - 1
    assert np.all(np.diag(idx) == centre)
    # equal index <=> equal offset
    flat_off = off.reshape(n * n, 2)
    flat_idx = idx.reshape(n * n)
    for value in np.unique(flat_idx):
        assert len(np.unique(flat_off[flat_idx == value], axis=0)) == 1


def swin_index(M):
    """The relative position index as Swin's released block builds it."""
    coords = np.stack(np.meshgrid(np.arange(M), np.arange(M),
                                  indexing="ij"))          # (2, M, M)
    flat = coords.reshape(2, -1)                            # (2, M²)
    rel = (flat[:, :, None] - flat[:, None, :]).transpose(1, 2, 0)
    rel[:, :, 0] += M - 1
    rel[:, :, 1] += M - 1
    rel[:, :, 0] *= 2 * M - 1
    return rel.sum(-1)                                      # (M², M²)


@pytest.mark.parametrize("M", [1, 2, 3, 7])
def test_window_index_is_swins(M):
    assert np.array_equal(position.relative_position_index((M, M)),
                          swin_index(M))


def test_relative_bias_reads_the_offset_entry():
    H, W = 3, 5
    rng = np.random.default_rng(0)
    table = rng.standard_normal((2 * H - 1, 2 * W - 1))
    B = position.relative_position_bias(table, (H, W))
    for i in range(H * W):
        for j in range(H * W):
            (ri, ci), (rj, cj) = divmod(i, W), divmod(j, W)
            assert B[i, j] == table[ri - rj + H - 1, ci - cj + W - 1]


def test_relative_bias_keeps_the_head_axis_first():
    table = np.arange(2 * 7 * 7, dtype=float).reshape(2, 7, 7)   # 2 heads
    B = position.relative_position_bias(table, (4, 4))
    assert B.shape == (2, 16, 16)
    assert np.array_equal(B[1],
                          position.relative_position_bias(table[1], (4, 4)))


# ------------------------------------------------------------ equivariance
@given(seed=st.integers(0, 10_000))
def test_attention_is_equivariant_and_position_breaks_it(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((9, 8))
    W = [rng.standard_normal((8, 8)) for _ in range(4)]
    perm = rng.permutation(9)
    while np.array_equal(perm, np.arange(9)):
        perm = rng.permutation(9)
    Y, _ = attention.multi_head_attention(X, *W, h=2)
    Y_p, _ = attention.multi_head_attention(X[perm], *W, h=2)
    assert np.allclose(Y_p, Y[perm], rtol=0, atol=1e-10)
    E = position.sinusoidal_2d((3, 3), 8)
    Y_E, _ = attention.multi_head_attention(X + E, *W, h=2)
    Y_Ep, _ = attention.multi_head_attention(X[perm] + E, *W, h=2)
    assert not np.allclose(Y_Ep, Y_E[perm], rtol=0, atol=1e-6)
