"""The helpers that exercise checks share, and the messages they produce."""

import numpy as np
import pytest

from selfattention.attention import attention
from selfattention.exercises import (cost, definition, masks, misconceptions,
                                     nonlocal_block, results, windows)
from selfattention.exercises.core import (NotDone, Wrong, answered,
                                          expect_shape, int_pair,
                                          returned_array, returned_arrays)


@pytest.mark.parametrize("starter", [None, ...])
def test_answered_reports_the_starter_as_not_done(starter):
    with pytest.raises(NotDone) as err:
        answered(starter, "a pair (row, col)", "pos")
    assert str(err.value) == "`pos` is still empty; set it to a pair (row, col)"
    assert answered(0, "a number") == 0          # a falsy answer is an answer


def test_int_pair():
    assert int_pair(["3", 4.0], "x") == (3, 4)
    for bad in (5, (1, 2, 3), ("a", 1), None):
        with pytest.raises(Wrong) as err:
            int_pair(bad, "answer should be a pair (a, b)")
        assert str(err.value) == f"answer should be a pair (a, b), got {bad!r}"


def test_returned_array():
    assert returned_array([[1, 2]], "f").dtype == np.float64
    with pytest.raises(Wrong) as err:
        returned_array({"a": 1}, "f", "an array of weights")
    assert str(err.value) == "f should return an array of weights, got dict"


def test_returned_arrays():
    Y, A = returned_arrays(([1, 2], [[1]]), 2, "msg")
    assert Y.dtype == A.dtype == np.float64 and A.shape == (1, 1)
    (a,) = returned_arrays(([1, 2],), 1, "msg", dtype=None)
    assert a.dtype.kind == "i"
    for bad in ([1, 2], (1, 2, 3), np.ones(2)):
        with pytest.raises(Wrong, match="^msg$"):
            returned_arrays(bad, 2, "msg")


def test_expect_shape():
    expect_shape(np.ones((2, 3)), "A", (2, 3), "(n, m)")
    with pytest.raises(Wrong) as err:
        expect_shape(np.ones((3, 2)), "A", (2, 3), "(n, m)", "one row each")
    assert str(err.value) == ("A has shape (3, 2), expected (n, m) = (2, 3): "
                              "one row each")
    with pytest.raises(Wrong) as err:
        expect_shape(np.ones(2), "Y", (2, 3), "(n, d)")
    assert str(err.value) == "Y has shape (2,), expected (n, d) = (2, 3)"


# The checks that use the helpers keep their exact messages.
def message(label):
    return results()[label].message


def test_messages_of_checks_built_on_the_helpers():
    definition.check_cross_attention(None)
    assert message("ex-definition-cross") == (
        "`answer` is still empty; set it to a pair (row, col)")
    definition.check_cross_attention("ab")
    assert message("ex-definition-cross") == (
        "answer should be a pair (row, col), got 'ab'")
    definition.check_attention(lambda Q, K, V: attention(Q, K, V)[1])
    assert message("ex-definition-attention") == (
        "my_attention should return a pair (Y, A): outputs and weights")
    definition.check_attention(lambda Q, K, V: attention(Q, K, V)[::-1])
    assert message("ex-definition-attention") == (
        "A has shape (3, 2), expected (n_q, n_k) = (3, 5): one row per "
        "query, one column per key")
    masks.check_masked_attention(
        lambda Q, K, V, m: (attention(Q, K, V, m)[0].T,
                            attention(Q, K, V, m)[1]))
    assert message("ex-masks-apply") == (
        "Y has shape (2, 4), expected (n_q, d_v) = (4, 2)")
    nonlocal_block.check_dot_product(lambda x, a, b, c: (x, x))
    assert message("ex-nonlocal-dotproduct") == (
        "F has shape (6, 5), expected (N, N) = (6, 6): one weight per pair "
        "of positions")
    cost.check_count((1, 2, 3))
    assert message("ex-cost-count") == (
        "answer should be a pair (n_tokens, n_bytes), got (1, 2, 3)")
    windows.check_window_counts(lambda H, W, M: "no")
    assert message("ex-windows-count") == (
        "my_counts should return a pair (cyclic, padded) of ints, got 'no'")
    misconceptions.check_masked_softmax(lambda S, m: {1: 2})
    assert message("ex-misconceptions-mask") == (
        "masked_softmax should return an array of weights, got dict")
    misconceptions.check_same_output(..., [0.2] * 5)
    assert message("ex-misconceptions-same-output") == (
        "`a` is still empty; set it to five weights")
