"""Every kind of bad input gets a clear error that names the argument."""

import numpy as np
import pytest

from selfattention.attention import attention, multi_head_attention, softmax
from selfattention.masks import causal_mask, padding_mask, window_mask
from selfattention.data import two_squares
from selfattention.patches import patchify

rng = np.random.default_rng(0)
Q, K, V = rng.standard_normal((3, 4, 4))
X = rng.standard_normal((5, 8))
W = rng.standard_normal((8, 8))


@pytest.mark.parametrize("call, error, words", [
    # mismatched shapes
    (lambda: attention(Q, K[:, :3], V), ValueError,
     ["Q and K", "last dimension", "(4, 4)", "(4, 3)"]),
    (lambda: attention(Q, K, V[:3]), ValueError, ["K and V", "n_k", "(3, 4)"]),
    (lambda: attention(Q[0], K, V), ValueError, ["Q", "at least 2"]),
    (lambda: attention(np.ones((2, 3, 4)), np.ones((3, 3, 4)),
                       np.ones((3, 3, 4))), ValueError, ["batch", "Q", "K"]),
    # wrong types
    (lambda: attention("Q", K, V), TypeError, ["Q", "array of real numbers"]),
    (lambda: attention(Q.astype(complex), K, V), TypeError, ["Q", "real"]),
    (lambda: attention(np.array([["a"]]), K, V), TypeError, ["Q", "dtype"]),
    # non-finite input
    (lambda: attention(np.where(Q > 0, np.nan, Q), K, V), ValueError,
     ["Q", "finite"]),
    (lambda: attention(Q, K, np.full_like(V, np.inf)), ValueError,
     ["V", "finite"]),
    (lambda: softmax(np.array([0.0, np.nan])), ValueError, ["NaN"]),
    # masks of the wrong dtype or shape, and a query with no key
    (lambda: attention(Q, K, V, mask=np.ones((4, 4))), TypeError,
     ["mask", "boolean", "float64"]),
    (lambda: attention(Q, K, V, mask=np.ones((3, 4), bool)), ValueError,
     ["mask", "broadcast", "(3, 4)", "(4, 4)"]),
    (lambda: attention(Q, K, V, mask=np.arange(4)[:, None] != 2),
     ValueError, ["query 2", "no key", "NaN"]),
    (lambda: softmax(np.array([[-np.inf, -np.inf]])), ValueError, ["all -inf"]),
    (lambda: attention(Q, K, V, bias=np.ones((2, 2))), ValueError,
     ["bias", "(2, 2)"]),
    (lambda: attention(Q, K, V, scale=-1.0), ValueError, ["scale", "positive"]),
    (lambda: attention(Q, K, V, scale=np.nan), ValueError, ["scale"]),
    # a head count that does not divide the width
    (lambda: multi_head_attention(X, W, W, W, W, 3), ValueError,
     ["h=3", "divide", "8"]),
    (lambda: multi_head_attention(X, W, W, W, W, 0), ValueError, ["h", "positive"]),
    (lambda: multi_head_attention(X, W, W, W, W, 2.0), TypeError, ["h", "integer"]),
    (lambda: multi_head_attention(X, W[:5], W, W, W, 2), ValueError,
     ["W_q", "one row per feature of X"]),
    (lambda: multi_head_attention(X, W, W[:, :4], W, W, 2), ValueError,
     ["W_q and W_k", "columns"]),
    (lambda: multi_head_attention(X, W, W, W, W[:4], 2), ValueError,
     ["W_o", "rows"]),
    (lambda: multi_head_attention(X, W, W, W, W, 2, context=np.ones((3, 5))),
     ValueError, ["W_k", "context"]),
    # masks and patches
    (lambda: window_mask((8, 8), 3), ValueError, ["tile", "8x8"]),
    (lambda: window_mask((8, 8), (4, 4)), TypeError, ["M"]),
    (lambda: causal_mask(0), ValueError, ["n", "positive"]),
    (lambda: padding_mask([0, 3], 4), ValueError, ["lengths", "1..4"]),
    (lambda: padding_mask([1.5], 4), TypeError, ["lengths", "integers"]),
    (lambda: patchify(np.ones((10, 10)), 4), ValueError, ["p=4", "10x10"]),
    (lambda: two_squares(0), TypeError, ["rng", "Generator"]),
])
def test_bad_input_is_named_in_the_error(call, error, words):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"
