"""Tests of selfattention.torch_bridge: the NumPy reference agrees with
PyTorch on random shapes and masks, once weights and masks are converted;
a pinned thread count is put back."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from selfattention import torch_bridge
from selfattention.attention import attention, multi_head_attention
from selfattention.torch_bridge import (mask_for_mha, mask_for_sdpa,
                                        multihead_from_weights)

TOL = 1e-10


def random_mask(rng, n_q, n_k):
    """A boolean mask (True = may attend) where every query keeps a key."""
    mask = rng.random((n_q, n_k)) < 0.5
    mask[np.arange(n_q), rng.integers(0, n_k, n_q)] = True
    return mask


@given(st.integers(0, 10**6), st.integers(1, 3), st.integers(1, 7),
       st.integers(1, 7), st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_sdpa_matches_attention(seed, batch, n_q, n_k, d_k, d_v, masked):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((batch, n_q, d_k))
    K = rng.standard_normal((batch, n_k, d_k))
    V = rng.standard_normal((batch, n_k, d_v))
    mask = random_mask(rng, n_q, n_k) if masked else None
    Y, _ = attention(Q, K, V, mask=mask)
    Y_t = F.scaled_dot_product_attention(
        torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V),
        attn_mask=None if mask is None else mask_for_sdpa(mask))
    assert np.abs(Y_t.numpy() - Y).max() < TOL


@given(st.integers(0, 10**6), st.sampled_from([(4, 1), (4, 2), (6, 3), (8, 4)]),
       st.integers(1, 9), st.booleans())
def test_multihead_module_matches_multi_head_attention(seed, dh, n, masked):
    d, h = dh
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((2, n, d))
    W = rng.standard_normal((4, d, d)) / np.sqrt(d)
    mask = random_mask(rng, n, n) if masked else None
    Y, A = multi_head_attention(X, *W, h=h, mask=mask)
    mha = multihead_from_weights(*W, h=h, bias=masked)   # biases zeroed
    x = torch.from_numpy(X)
    with torch.no_grad():
        Y_t, A_t = mha(x, x, x, average_attn_weights=False,
                       attn_mask=None if mask is None else mask_for_mha(mask))
    assert np.abs(Y_t.numpy() - Y).max() < TOL
    assert np.abs(A_t.numpy() - A).max() < TOL


def test_bias_free_module_has_4_d_squared_parameters():
    W = np.eye(16)
    mha = multihead_from_weights(W, W, W, W, h=4)
    assert sum(p.numel() for p in mha.parameters()) == 4 * 16 * 16


def test_an_unconverted_mask_attends_exactly_where_it_should_not():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1, 6, 4))
    mha = multihead_from_weights(*np.eye(4)[None].repeat(4, 0), h=2)
    mask = np.tril(np.ones((5, 6), bool))             # ours: True = may use
    x = torch.from_numpy(X)
    with torch.no_grad():
        _, A = mha(x[:, :5], x, x, attn_mask=torch.from_numpy(mask))
        _, A_ok = mha(x[:, :5], x, x, attn_mask=mask_for_mha(mask))
    assert (A[0][torch.from_numpy(mask)] == 0).all()     # the allowed keys
    assert (A_ok[0][torch.from_numpy(~mask)] == 0).all()


@pytest.mark.parametrize("call, error, name", [
    (lambda: mask_for_mha(np.ones((2, 2))), TypeError, "mask"),
    (lambda: mask_for_sdpa([[1, 0]]), TypeError, "mask"),
    (lambda: multihead_from_weights(*np.ones((4, 4, 4)), h=3), ValueError,
     "h"),
    (lambda: multihead_from_weights(np.ones((4, 2)), *np.ones((3, 4, 4)),
                                    h=2), ValueError, "W_q"),
    (lambda: multihead_from_weights(*np.ones((4, 4, 4)), h=2.0), TypeError,
     "h"),
    (lambda: multihead_from_weights(*np.ones((4, 4, 4)), h=2, bias=1),
     TypeError, "bias"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=f"^{name}"):
        call()


def test_torch_threads_are_put_back_even_after_an_error():
    import torch

    before = torch.get_num_threads()
    with torch_bridge.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(KeyError), torch_bridge.torch_threads(1):
        raise KeyError("x")
    assert torch.get_num_threads() == before
