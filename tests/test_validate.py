"""The input checks that several modules share (selfattention._validate)."""

import numpy as np
import pytest

from selfattention._validate import check_qkv, positive_scale
from selfattention.attention import attention
from selfattention.blockwise import blockwise_attention


def test_check_qkv_promotes_integers_and_keeps_float32():
    Q, K, V = check_qkv(np.ones((2, 3), int), np.ones((4, 3), np.float32),
                        [[1.0, 2.0]] * 4)
    assert (Q.dtype, K.dtype, V.dtype) == (np.float64, np.float32,
                                           np.float64)
    assert (Q.shape, K.shape, V.shape) == ((2, 3), (4, 3), (4, 2))


@pytest.mark.parametrize("shapes, words", [
    (((2, 3), (4, 2), (4, 2)), ["Q and K", "d_k", "(2, 3)", "(4, 2)"]),
    (((2, 3), (4, 3), (5, 2)), ["K and V", "n_k", "(4, 3)", "(5, 2)"]),
    (((3,), (4, 3), (4, 2)), ["Q", "at least 2"]),
])
def test_attention_and_blockwise_reject_shapes_with_one_message(shapes,
                                                                words):
    args = [np.ones(s) for s in shapes]
    messages = []
    for fn in (check_qkv, attention, blockwise_attention):
        with pytest.raises(ValueError) as err:
            fn(*args)
        messages.append(str(err.value))
    assert messages[0] == messages[1] == messages[2]
    assert all(w in messages[0] for w in words), messages[0]


def test_positive_scale_returns_the_value_itself():
    s = np.float32(0.25)
    assert positive_scale(s) is s
    assert positive_scale(3) == 3


@pytest.mark.parametrize("bad", [0, -1.0, np.inf, np.nan, True,
                                 np.array([0.5])])
def test_positive_scale_rejects(bad):
    with pytest.raises(ValueError, match="scale must be a positive finite"):
        positive_scale(bad)
    Q = np.ones((2, 3))
    with pytest.raises(ValueError, match="scale must be a positive finite"):
        attention(Q, Q, Q, scale=bad)
    with pytest.raises(ValueError, match="scale must be a positive finite"):
        blockwise_attention(Q, Q, Q, scale=bad)
