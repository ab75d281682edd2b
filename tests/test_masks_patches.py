"""Tests of selfattention.masks, .patches and the running example."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from selfattention import masks
from selfattention.attention import attention, multi_head_attention
from selfattention.example import running_example
from selfattention.patches import (center, digit_patch_tokens, patchify,
                                   unpatchify)


def test_causal_mask_is_lower_triangular():
    m = masks.causal_mask(4)
    assert m.dtype == bool
    np.testing.assert_array_equal(m, np.tril(np.ones((4, 4), bool)))


def test_padding_mask_hides_the_padded_keys_only():
    m = masks.padding_mask([2, 4], 4)
    assert m.shape == (2, 4, 4)
    np.testing.assert_array_equal(m[0, 3], [True, True, False, False])
    assert m[1].all()


def test_local_mask_is_a_band():
    m = masks.local_mask(5, 1)
    assert m.sum() == 5 + 2 * 4
    assert m[0, 1] and not m[0, 2]


def test_window_mask_of_the_running_example():
    m = masks.window_mask((8, 8), (4, 4))
    assert m.shape == (64, 64) and m.sum() == 1024
    ids = masks.window_ids((8, 8), (4, 4))
    assert ids[0] == 0 and ids[7] == 1 and ids[63] == 3


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
def test_patchify_and_unpatchify_are_inverse(rows, cols, p):
    img = np.arange(rows * p * cols * p, dtype=float).reshape(rows * p, cols * p)
    X = patchify(img, p)
    assert X.shape == (rows * cols, p * p)
    np.testing.assert_array_equal(X[0], img[:p, :p].ravel())
    np.testing.assert_array_equal(unpatchify(X, (rows, cols)), img)


def test_patch_tokens_are_row_major():
    img = np.arange(16.0).reshape(4, 4)
    X = patchify(img, 2)
    np.testing.assert_array_equal(X[1], [2, 3, 6, 7])


def test_center_removes_each_patch_mean():
    X = center(np.array([[1.0, 3.0], [5.0, 5.0]]))
    np.testing.assert_array_equal(X, [[-1, 1], [0, 0]])


def test_digit_tokens_are_standardized():
    T = digit_patch_tokens(300, 2)
    assert T.shape == (300, 16, 4)
    np.testing.assert_allclose(T.mean(axis=(0, 1)), 0, atol=1e-12)
    np.testing.assert_allclose(T.std(axis=(0, 1)), 1)


# -------------------------------------------- the document's printed numbers
def test_running_example_reproduces_the_attention_map():
    ex = running_example()
    _, A = attention(ex.X @ ex.W_q, ex.X @ ex.W_k, ex.X @ ex.W_v)
    row = A[ex.query]
    top = [divmod(int(j), 8) for j in np.argsort(row)[::-1][:6]]
    assert top == [(4, 6), (0, 2), (0, 1), (4, 5), (4, 7), (0, 3)]
    assert round(row[37] + row[38], 3) == 0.357
    assert np.array2string(row[:4], precision=2) == "[0.02 0.17 0.19 0.03]"


def test_running_example_four_heads_and_window_mask():
    ex = running_example()
    Y, A = multi_head_attention(ex.X, ex.Wq, ex.Wk, ex.Wv, ex.Wo, 4)
    assert Y.shape == (64, 16) and A.shape == (4, 64, 64)
    Y_p, _ = multi_head_attention(ex.X[ex.perm], ex.Wq, ex.Wk, ex.Wv, ex.Wo, 4)
    np.testing.assert_allclose(Y_p, Y[ex.perm], rtol=0, atol=1e-12)
    mask = masks.window_mask((8, 8), (4, 4))
    _, A_w = multi_head_attention(ex.X, ex.Wq, ex.Wk, ex.Wv, ex.Wo, 4, mask=mask)
    assert A_w[:, ex.query, ~mask[ex.query]].sum() == 0.0


def test_running_example_leaves_the_stream_where_the_digits_table_starts():
    a, b = running_example().rng, running_example().rng
    assert a.standard_normal() == b.standard_normal()
    ref = np.random.default_rng(0)
    ref.standard_normal(32 * 32 + 16 * 16 + 16 * 16 + 4 * 16 * 16)
    ref.permutation(64)
    assert running_example().rng.standard_normal() == pytest.approx(
        ref.standard_normal(), abs=0)
