"""The input checks that several modules share (selfattention._validate)."""

import numpy as np
import pytest

from selfattention._validate import (broadcasts_to, check_qkv,
                                     every_query_has_a_key, generator,
                                     integer, positive_int, positive_scale)
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


@pytest.mark.parametrize("bad", [True, 2.0, "3", None, np.float64(1.0)])
def test_integer_refuses_bools_and_non_integers(bad):
    with pytest.raises(TypeError) as err:
        integer(bad, "shift", "an integer number of patches")
    assert str(err.value) == (f"shift must be an integer number of patches, "
                              f"got {type(bad).__name__}")
    with pytest.raises(TypeError, match="n must be a positive integer, got"):
        positive_int(bad, "n")


def test_integer_accepts_numpy_integers():
    assert integer(np.int64(-3), "x") == -3
    assert type(integer(np.int32(4), "x")) is int


def test_a_query_without_keys_is_named_with_its_index():
    mask = np.ones((2, 3, 4), bool)
    every_query_has_a_key(mask, "NaN there")                 # no error
    mask[1, 2] = False
    with pytest.raises(ValueError) as err:
        every_query_has_a_key(mask, "NaN there")
    assert str(err.value) == (
        "mask leaves query 2 (index (1, 2)) with no key to attend to: every "
        "entry of its row is False, so its softmax is undefined (PyTorch "
        "returns NaN there)")
    Q = np.ones((2, 3, 4))
    for fn, tail in ((attention, "NaN or zeros there, depending on the "
                                 "function)"),
                     (blockwise_attention, "NaN there)")):
        with pytest.raises(ValueError) as err:
            fn(Q, Q, Q, mask=mask[..., :3])
        assert str(err.value).startswith("mask leaves query 2 (index (1, 2))")
        assert str(err.value).endswith("(PyTorch returns " + tail)


@pytest.mark.parametrize("bad", [0, None, np.random.RandomState(0)])
def test_generator_asks_for_default_rng(bad):
    with pytest.raises(TypeError) as err:
        generator(bad)
    assert str(err.value) == (
        "rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
        f"got {type(bad).__name__}")


def test_generator_returns_the_generator_itself():
    rng = np.random.default_rng(0)
    assert generator(rng) is rng


@pytest.mark.parametrize("shape, target, ok", [
    ((4, 5), (2, 4, 5), True), ((1, 5), (4, 5), True), ((), (4, 5), True),
    ((3, 5), (4, 5), False),            # does not broadcast at all
    ((2, 4, 5), (4, 5), False),         # broadcasts, but to a larger shape
])
def test_broadcasts_to(shape, target, ok):
    assert broadcasts_to(shape, target) is ok
