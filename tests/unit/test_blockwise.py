"""Tests of selfattention.blockwise: blocks give dense attention's output."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from selfattention.attention import attention, softmax
from selfattention.blockwise import (blockwise_attention, online_softmax_update,
                                     tiled_attention, tiled_attention_backward)

TOL = {np.float64: dict(rtol=1e-10, atol=1e-10),
       np.float32: dict(rtol=2e-4, atol=2e-5)}


@st.composite
def problems(draw):
    """Random shapes, batch axes, dtype, a block size and a mask."""
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n_q, n_k = draw(st.integers(1, 20)), draw(st.integers(1, 20))
    d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    elements = st.floats(-4, 4, allow_nan=False, width=32)
    Q = draw(hnp.arrays(dtype, lead + (n_q, d_k), elements=elements))
    K = draw(hnp.arrays(dtype, lead + (n_k, d_k), elements=elements))
    V = draw(hnp.arrays(dtype, (n_k, d_v), elements=elements))  # broadcast
    mask = None
    if draw(st.booleans()):
        mask = draw(hnp.arrays(bool, (n_q, n_k)))
        keep = draw(hnp.arrays(np.int64, (n_q,),
                               elements=st.integers(0, n_k - 1)))
        mask[np.arange(n_q), keep] = True
    return Q, K, V, mask, draw(st.integers(1, 25)), dtype


@given(problems())
def test_the_loop_over_key_blocks_equals_dense_attention(problem):
    Q, K, V, mask, block, dtype = problem
    Y_ref, _ = attention(Q, K, V, mask=mask)
    Y = blockwise_attention(Q, K, V, mask=mask, block=block)
    assert Y.dtype == dtype
    assert Y.shape == Y_ref.shape
    np.testing.assert_allclose(Y, Y_ref, **TOL[dtype])


def run(Q, K, V, block_k=256, **kwargs):
    return blockwise_attention(Q, K, V, block=block_k, **kwargs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_huge_scores_do_not_overflow(dtype):
    rng = np.random.default_rng(0)
    Q = (100 * rng.standard_normal((30, 4))).astype(dtype)
    K = (100 * rng.standard_normal((50, 4))).astype(dtype)
    V = rng.standard_normal((50, 3)).astype(dtype)
    Y = run(Q, K, V, block_k=6)
    assert np.all(np.isfinite(Y))
    np.testing.assert_allclose(Y, attention(Q, K, V)[0], **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scores_that_grow_along_the_keys_force_rescaling(dtype):
    # The first key block has small scores, later ones much larger: the
    # running maximum must be raised, and the old sums rescaled, on the way.
    rng = np.random.default_rng(5)
    Q = rng.standard_normal((40, 4)).astype(dtype)
    K = (rng.standard_normal((90, 4))
         * np.linspace(0.1, 40, 90)[:, None]).astype(dtype)
    V = rng.standard_normal((90, 3)).astype(dtype)
    Y = run(Q, K, V, block_k=8)
    np.testing.assert_allclose(Y, attention(Q, K, V)[0], **TOL[dtype])


def test_a_block_far_above_the_first_one_is_rescaled():
    Q = np.array([[1.0]], dtype=np.float32)
    K = np.array([[0.0], [30.0], [1.0]], dtype=np.float32)   # e^30 > 2^32
    V = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    Y = run(Q, K, V, scale=1.0, block_k=1)
    np.testing.assert_allclose(Y, attention(Q, K, V, scale=1.0)[0],
                               rtol=1e-6)


def test_sums_that_would_overflow_across_blocks_stay_finite():
    # Every block alone is safe, but twelve of them overflow float32 unless
    # the sums are kept relative to the true maximum.
    Q = np.array([[1.0]], dtype=np.float32)
    K = np.array([[0.0]] + [[22.0]] * 12, dtype=np.float32)
    V = np.full((13, 1), 1e28, dtype=np.float32)
    Y = run(Q, K, V, scale=1.0, block_k=1)
    assert np.all(np.isfinite(Y))
    np.testing.assert_allclose(Y, 1e28, rtol=1e-5)


def test_mask_whose_first_blocks_are_empty_for_a_query():
    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((6, 3)) for _ in range(3))
    mask = np.zeros((6, 6), bool)
    mask[:, -1] = True             # only the last key, in the last block
    Y = run(5 * Q, 5 * K, V, mask=mask, block_k=2)
    np.testing.assert_allclose(Y, np.broadcast_to(V[-1], (6, 3)))


def test_very_negative_scores_after_empty_blocks_keep_their_weight():
    Q = np.array([[1.0]])
    K = np.array([[0.0], [-2000.0], [-2001.0]])
    V = np.array([[9.0], [1.0], [2.0]])
    mask = np.array([[False, True, True]])
    Y = run(Q, K, V, mask=mask, block_k=1)
    np.testing.assert_allclose(Y, attention(Q, K, V, mask=mask)[0])


def test_scale_and_mixed_precision():
    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((5, 4)) for _ in range(3))
    Y = run(Q.astype(np.float32), K, V, scale=0.3, block_k=2)
    assert Y.dtype == np.float64
    np.testing.assert_allclose(Y, attention(Q.astype(np.float32), K, V,
                                            scale=0.3)[0], rtol=1e-6)


def test_online_update_over_blocks_equals_the_softmax():
    rng = np.random.default_rng(3)
    S = 10 * rng.standard_normal((2, 4, 12))            # a batch of two
    V = rng.standard_normal((12, 2))
    m, l, acc = np.full((2, 4), -np.inf), np.zeros((2, 4)), np.zeros((2, 4,
                                                                      2))
    for k0 in range(0, 12, 5):
        m, l, acc = online_softmax_update(m, l, acc, S[..., k0:k0 + 5],
                                          V[k0:k0 + 5])
    np.testing.assert_allclose(m, S.max(axis=-1))
    np.testing.assert_allclose(acc / l[..., None], softmax(S) @ V)


def test_memory_stays_far_below_the_score_matrix():
    n, bound = 2048, 2048 * 256 * 4 * 6       # a few n_q x block buffers
    rng = np.random.default_rng(4)
    Q, K, V = (rng.standard_normal((n, 16)).astype(np.float32)
               for _ in range(3))
    tracemalloc.start()
    run(Q, K, V)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < bound < n * n * 4


ARGS = (np.ones((4, 3)), np.ones((5, 3)), np.ones((5, 2)))


@pytest.mark.parametrize("mask", [np.ones((4, 4), bool),       # 4 keys
                                  np.zeros((4, 5), bool)])     # none at all
def test_a_mask_that_does_not_fit_the_scores_is_refused(mask):
    with pytest.raises(ValueError, match="^mask"):
        blockwise_attention(*ARGS, mask=mask)


@pytest.mark.parametrize("shapes, error, name", [
    (((4, 3), (5, 2), (5, 2)), ValueError, "Q and K"),
    (((4, 3), (5, 3), (6, 2)), ValueError, "K and V"),
    (((2, 4, 3), (3, 5, 3), (5, 2)), ValueError, "Q and K"),
    (((3,), (5, 3), (5, 2)), ValueError, "Q"),
])
def test_bad_shapes_name_the_arguments(shapes, error, name):
    Q, K, V = (np.ones(s) for s in shapes)
    with pytest.raises(error, match=f"^{name}"):
        blockwise_attention(Q, K, V)


@pytest.mark.parametrize("shapes, name", [
    (((3,), (4,), (3, 2), (3, 5), (5, 2)), "m, l"),
    (((3,), (3,), (3, 2), (3, 5), (4, 2)), "V"),
    (((3,), (3,), (3, 2), (3, 5), (5, 3)), "V"),
])
def test_online_update_names_what_does_not_fit(shapes, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        online_softmax_update(*(np.zeros(s) for s in shapes))


# ------------------------------------------------------ tiles of queries
@st.composite
def tiled_problems(draw):
    """One head: shapes, tile sizes and float64 inputs, scores up to ~30."""
    n_q, n_k = draw(st.integers(1, 30)), draw(st.integers(1, 30))
    d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    elements = st.floats(-4, 4, allow_nan=False)
    Q, K = (draw(hnp.arrays(np.float64, (n, d_k), elements=elements))
            for n in (n_q, n_k))
    V = draw(hnp.arrays(np.float64, (n_k, d_v), elements=elements))
    dY = draw(hnp.arrays(np.float64, (n_q, d_v), elements=elements))
    return Q, K, V, dY, draw(st.integers(1, 31)), draw(st.integers(1, 31))


@given(tiled_problems())
def test_tiles_of_queries_and_keys_give_dense_attention(problem):
    Q, K, V, _, b_q, b_k = problem
    Y, lse = tiled_attention(Q, K, V, block_q=b_q, block_k=b_k)
    want, _ = attention(Q, K, V)
    np.testing.assert_allclose(Y, want, rtol=1e-10, atol=1e-10)
    S = Q @ K.T / np.sqrt(Q.shape[1])
    top = S.max(axis=1)
    np.testing.assert_allclose(
        lse, top + np.log(np.exp(S - top[:, None]).sum(axis=1)),
        rtol=1e-12, atol=1e-12)


@settings(max_examples=25)
@given(tiled_problems())
def test_the_recomputing_backward_pass_agrees_with_torch_autograd(problem):
    torch = pytest.importorskip("torch")
    Q, K, V, dY, b_q, b_k = problem
    Y, lse = tiled_attention(Q, K, V, block_q=b_q, block_k=b_k)
    grads = tiled_attention_backward(Q, K, V, Y, dY, lse, block_q=b_q,
                                     block_k=b_k)
    q, k, v = (torch.tensor(x, requires_grad=True) for x in (Q, K, V))
    torch.nn.functional.scaled_dot_product_attention(q, k, v).backward(
        torch.tensor(dY))
    for mine, theirs in zip(grads, (q, k, v)):
        np.testing.assert_allclose(mine, theirs.grad.numpy(), rtol=1e-9,
                                   atol=1e-9)


def test_the_backward_pass_keeps_no_matrix_of_weights():
    rng = np.random.default_rng(1)
    n, d, b = 2048, 8, 64
    Q, K, V, dY = (rng.standard_normal((n, d)) for _ in range(4))
    Y, lse = tiled_attention(Q, K, V, block_q=b, block_k=b)
    tracemalloc.start()
    try:
        tiled_attention_backward(Q, K, V, Y, dY, lse, block_q=b, block_k=b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * n * n / 20       # far below one n x n float64 matrix


def test_the_backward_pass_refuses_outputs_of_another_shape():
    Q = K = V = np.ones((4, 3))
    with pytest.raises(ValueError, match="lse"):
        tiled_attention_backward(Q, K, V, np.ones((4, 3)), np.ones((4, 3)),
                                 np.ones(5))
    with pytest.raises(ValueError, match="dY"):
        tiled_attention_backward(Q, K, V, np.ones((4, 3)), np.ones((3, 3)),
                                 np.ones(4))
