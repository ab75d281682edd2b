"""Unit and property tests of selfattention.attention (chapters 1 and 3)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from selfattention.attention import (attention, merge_heads,
                                     multi_head_attention, softmax,
                                     split_heads)

finite = st.floats(-30, 30, allow_nan=False, width=64)


@st.composite
def qkv(draw, batch=True):
    """Random Q, K, V with independent sizes and optional batch axes."""
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2))) if batch else ()
    n_q, n_k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    Q = draw(hnp.arrays(np.float64, lead + (n_q, d_k), elements=finite))
    K = draw(hnp.arrays(np.float64, lead + (n_k, d_k), elements=finite))
    V = draw(hnp.arrays(np.float64, lead + (n_k, d_v), elements=finite))
    return Q, K, V


@st.composite
def qkv_mask(draw):
    """Q, K, V and a boolean mask in which every query keeps one key."""
    Q, K, V = draw(qkv(batch=False))
    n_q, n_k = Q.shape[0], K.shape[0]
    mask = draw(hnp.arrays(bool, (n_q, n_k)))
    keep = draw(hnp.arrays(np.int64, (n_q,),
                           elements=st.integers(0, n_k - 1)))
    mask[np.arange(n_q), keep] = True
    return Q, K, V, mask


# ---------------------------------------------------------------- softmax
def test_softmax_matches_the_definition():
    S = np.array([[0.0, 1.0, 2.0], [3.0, 3.0, 3.0]])
    E = np.exp(S)
    np.testing.assert_allclose(softmax(S), E / E.sum(1, keepdims=True))


def test_softmax_of_large_logits_does_not_overflow():
    P = softmax(np.array([1000.0, 1001.0, 1002.0]))
    assert np.all(np.isfinite(P))
    np.testing.assert_allclose(P, softmax(np.array([0.0, 1.0, 2.0])))


def test_softmax_gives_exact_zero_to_minus_infinity():
    P = softmax(np.array([0.0, -np.inf, 1.0]))
    assert P[1] == 0.0
    assert P.sum() == pytest.approx(1.0)


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3),
                  elements=st.floats(-1e300, 1e300, allow_nan=False)))
def test_softmax_rows_are_distributions_even_for_huge_logits(S):
    P = softmax(S)
    assert np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=1e-12)


@given(hnp.arrays(np.float64, (3, 5), elements=finite), finite)
def test_adding_a_constant_to_a_row_changes_nothing(S, c):
    np.testing.assert_allclose(softmax(S + c), softmax(S), atol=1e-12)


# ---------------------------------------------------------------- attention
def test_attention_on_a_hand_computed_case():
    # Two keys; the query matches the first: weights e/(e+1) and 1/(e+1).
    Q = np.array([[2.0, 0.0, 0.0, 0.0]])            # d_k = 4, sqrt = 2
    K = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    V = np.array([[1.0], [0.0]])
    Y, A = attention(Q, K, V)
    w = np.e / (np.e + 1)
    np.testing.assert_allclose(A, [[w, 1 - w]])
    np.testing.assert_allclose(Y, [[w]])


@given(qkv())
def test_weights_are_distributions_and_outputs_are_their_averages(t):
    Q, K, V = t
    Y, A = attention(Q, K, V)
    assert A.shape == Q.shape[:-1] + (K.shape[-2],)
    assert Y.shape == Q.shape[:-1] + (V.shape[-1],)
    assert np.all(A >= 0)
    np.testing.assert_allclose(A.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(Y, A @ V, atol=1e-12)


@given(qkv(batch=False), st.permutations(range(6)))
def test_self_attention_is_permutation_equivariant(t, order):
    Q, K, V = t
    n = min(Q.shape[0], K.shape[0])
    X = np.concatenate([Q[:n], K[:n]], axis=1)           # tokens (n, 2 d_k)
    W = np.vstack([np.eye(Q.shape[1]), np.eye(Q.shape[1])])
    W_v = np.ones((X.shape[1], 2))
    perm = np.array([i for i in order if i < n])
    Y, _ = attention(X @ W, X @ W, X @ W_v)
    Y_p, _ = attention(X[perm] @ W, X[perm] @ W, X[perm] @ W_v)
    np.testing.assert_allclose(Y_p, Y[perm], atol=1e-9)


@given(qkv_mask())
def test_masked_keys_get_exactly_zero_weight(t):
    Q, K, V, mask = t
    _, A = attention(Q, K, V, mask=mask)
    assert np.all(A[~mask] == 0.0)
    np.testing.assert_allclose(A.sum(-1), 1.0, rtol=1e-12)


def test_masking_equals_renormalising_over_the_allowed_keys():
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((n, 2)) for n in (3, 4, 4))
    mask = np.array([[1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 0, 1]], bool)
    _, A = attention(Q, K, V, mask=mask)
    _, A_full = attention(Q, K, V)
    renorm = np.where(mask, A_full, 0)
    renorm /= renorm.sum(-1, keepdims=True)
    np.testing.assert_allclose(A, renorm, atol=1e-12)


def test_bias_is_added_to_the_scaled_scores():
    rng = np.random.default_rng(4)
    Q, K, V = rng.standard_normal((3, 5, 4))
    B = rng.standard_normal((5, 5))
    _, A = attention(Q, K, V, bias=B)
    np.testing.assert_allclose(A, softmax(Q @ K.T / 2.0 + B))


def test_explicit_scale_replaces_one_over_sqrt_dk():
    rng = np.random.default_rng(5)
    Q, K, V = rng.standard_normal((3, 4, 9))
    _, A = attention(Q, K, V, scale=1.0)
    np.testing.assert_allclose(A, softmax(Q @ K.T))


def test_float32_stays_float32():
    Q = np.ones((2, 3), np.float32)
    Y, A = attention(Q, Q, Q)
    assert Y.dtype == np.float32 and A.dtype == np.float32


def test_batch_dimensions_broadcast():
    rng = np.random.default_rng(6)
    Q = rng.standard_normal((2, 1, 3, 4))
    K = rng.standard_normal((5, 3, 4))
    Y, A = attention(Q, K, K)
    assert Y.shape == (2, 5, 3, 4) and A.shape == (2, 5, 3, 3)


# ---------------------------------------------------------------- multi-head
def test_split_and_merge_heads_are_inverse():
    Z = np.arange(2 * 5 * 12.0).reshape(2, 5, 12)
    H = split_heads(Z, 3)
    assert H.shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(H[:, 1], Z[..., 4:8])
    np.testing.assert_array_equal(merge_heads(H), Z)


def test_multi_head_equals_heads_computed_one_by_one():
    rng = np.random.default_rng(7)
    n, d, h = 6, 8, 4
    X = rng.standard_normal((n, d))
    Wq, Wk, Wv, Wo = rng.standard_normal((4, d, d))
    Y, A = multi_head_attention(X, Wq, Wk, Wv, Wo, h)
    w = d // h
    heads = []
    for i in range(h):
        cols = slice(i * w, (i + 1) * w)
        Yi, Ai = attention(X @ Wq[:, cols], X @ Wk[:, cols], X @ Wv[:, cols])
        np.testing.assert_allclose(A[i], Ai, atol=1e-13)
        heads.append(Yi)
    np.testing.assert_allclose(Y, np.concatenate(heads, 1) @ Wo, atol=1e-12)


def test_multi_head_cross_attention_uses_the_context_for_keys():
    rng = np.random.default_rng(8)
    X, C = rng.standard_normal((3, 4)), rng.standard_normal((7, 5))
    Wq, Wo = rng.standard_normal((4, 6)), rng.standard_normal((6, 4))
    Wk, Wv = rng.standard_normal((5, 6)), rng.standard_normal((5, 6))
    Y, A = multi_head_attention(X, Wq, Wk, Wv, Wo, 2, context=C)
    assert Y.shape == (3, 4) and A.shape == (2, 3, 7)


def test_multi_head_per_head_bias():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((4, 6))
    W = rng.standard_normal((4, 6, 6))
    B = np.zeros((3, 4, 4))
    B[1] = 50.0 * np.eye(4)                     # head 1 looks at itself
    _, A = multi_head_attention(X, *W, h=3, bias=B)
    np.testing.assert_allclose(np.diag(A[1]), 1.0, atol=1e-12)


@given(st.permutations(range(7)))
def test_multi_head_is_permutation_equivariant(order):
    rng = np.random.default_rng(10)
    X = rng.standard_normal((7, 8))
    W = rng.standard_normal((4, 8, 8)) / 3
    perm = np.array(order)
    Y, A = multi_head_attention(X, *W, h=2)
    Y_p, A_p = multi_head_attention(X[perm], *W, h=2)
    np.testing.assert_allclose(Y_p, Y[perm], atol=1e-12)
    np.testing.assert_allclose(A_p, A[:, perm][:, :, perm], atol=1e-12)


# ---------------------------------------------------------------- bad input
_rng = np.random.default_rng(0)
Q3, K3, V3 = _rng.standard_normal((3, 4, 4))
X5 = _rng.standard_normal((5, 8))
W8 = _rng.standard_normal((8, 8))


@pytest.mark.parametrize("call, error, name", [
    # mismatched shapes
    (lambda: attention(Q3, K3[:, :3], V3), ValueError, "Q and K"),
    (lambda: attention(Q3, K3, V3[:3]), ValueError, "K and V"),
    (lambda: attention(Q3[0], K3, V3), ValueError, "Q"),
    (lambda: attention(np.ones((2, 3, 4)), np.ones((3, 3, 4)),
                       np.ones((3, 3, 4))), ValueError, "Q and K"),
    # wrong types
    (lambda: attention("Q", K3, V3), TypeError, "Q"),
    (lambda: attention(Q3.astype(complex), K3, V3), TypeError, "Q"),
    (lambda: attention(np.array([["a"]]), K3, V3), TypeError, "Q"),
    # non-finite input
    (lambda: attention(np.where(Q3 > 0, np.nan, Q3), K3, V3), ValueError,
     "Q"),
    (lambda: attention(Q3, K3, np.full_like(V3, np.inf)), ValueError, "V"),
    (lambda: softmax(np.array([0.0, np.nan])), ValueError, "S"),
    (lambda: softmax(np.float64(1.0)), ValueError, "S"),
    # masks, bias and scale
    (lambda: attention(Q3, K3, V3, mask=np.ones((4, 4))), TypeError, "mask"),
    (lambda: attention(Q3, K3, V3, mask=np.ones((3, 4), bool)), ValueError,
     "mask"),
    (lambda: attention(Q3, K3, V3, mask=np.arange(4)[:, None] != 2),
     ValueError, "mask"),
    (lambda: softmax(np.array([[-np.inf, -np.inf]])), ValueError, "S"),
    (lambda: attention(Q3, K3, V3, bias=np.ones((2, 2))), ValueError, "bias"),
    (lambda: attention(Q3, K3, V3, scale=-1.0), ValueError, "scale"),
    (lambda: attention(Q3, K3, V3, scale=np.nan), ValueError, "scale"),
    (lambda: attention(Q3, K3, V3, scale="1"), TypeError, "scale"),
    # heads
    (lambda: multi_head_attention(X5, W8, W8, W8, W8, 3), ValueError, "h"),
    (lambda: multi_head_attention(X5, W8, W8, W8, W8, 0), ValueError, "h"),
    (lambda: multi_head_attention(X5, W8, W8, W8, W8, 2.0), TypeError, "h"),
    (lambda: multi_head_attention(X5, W8[:5], W8, W8, W8, 2), ValueError,
     "W_q"),
    (lambda: multi_head_attention(X5, W8, W8[:, :4], W8, W8, 2), ValueError,
     "W_q and W_k"),
    (lambda: multi_head_attention(X5, W8, W8, W8, W8[:4], 2), ValueError,
     "W_o"),
    (lambda: multi_head_attention(X5, W8, W8, W8, W8, 2,
                                  context=np.ones((3, 5))), ValueError,
     "W_k"),
    (lambda: multi_head_attention(X5, W8, W8, W8, W8, 2,
                                  mask=np.zeros((5, 5), bool)), ValueError,
     "mask"),
    (lambda: split_heads(np.ones((3, 6)), 4), ValueError, "h"),
    (lambda: merge_heads(np.ones((3, 6))), ValueError, "Z"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=f"^{name}"):
        call()


def test_a_query_without_a_key_is_named_in_the_error():
    mask = np.arange(4)[:, None] != 2                  # query 2: no key
    with pytest.raises(ValueError, match="query 2"):
        attention(Q3, K3, V3, mask=mask)
