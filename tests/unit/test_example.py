"""The running example replays the document's numbers (chapters 1-4)."""

import numpy as np
import pytest

from selfattention import masks
from selfattention.attention import attention, multi_head_attention
from selfattention.example import MhaWeights, running_example


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
    assert isinstance(ex.mha, MhaWeights) and ex.h == 4
    assert sum(W.size for W in ex.mha) == 1024
    Y, A = multi_head_attention(ex.X, *ex.mha, h=ex.h)
    assert Y.shape == (64, 16) and A.shape == (4, 64, 64)
    Y_p, _ = multi_head_attention(ex.X[ex.perm], *ex.mha, h=ex.h)
    np.testing.assert_allclose(Y_p, Y[ex.perm], rtol=0, atol=1e-12)
    mask = masks.window_mask(ex.grid, 4)
    _, A_w = multi_head_attention(ex.X, *ex.mha, h=ex.h, mask=mask)
    assert A_w[:, ex.query, ~mask[ex.query]].sum() == 0.0


def test_tied_projections_make_scores_the_patch_dot_products():
    ex = running_example()
    Q, K = ex.X @ ex.W_q, ex.X @ ex.W_k
    np.testing.assert_allclose(Q @ K.T / 4, ex.X @ ex.X.T, atol=1e-12)


def test_running_example_leaves_the_stream_where_the_digits_table_starts():
    a, b = running_example().rng, running_example().rng
    assert a.standard_normal() == b.standard_normal()
    ref = np.random.default_rng(0)
    ref.standard_normal(32 * 32 + 16 * 16 + 16 * 16 + 4 * 16 * 16)
    ref.permutation(64)
    assert running_example().rng.standard_normal() == pytest.approx(
        ref.standard_normal(), abs=0)


@pytest.mark.parametrize("seed, error", [(-1, ValueError),
                                         (1.5, TypeError)])
def test_bad_seed_names_the_argument(seed, error):
    with pytest.raises(error, match="^seed"):
        running_example(seed)
