"""Declared argument checks at the public boundary (selfattention._validate)."""

import numpy as np
import pytest

from selfattention._validate import (boundary, bools, divides, floats,
                                     generator, grid_shape, integer, ints,
                                     number, one_of, one_per_image, optional,
                                     pair, positive, positive_int, same_shape,
                                     sequence)
from selfattention.attention import (attention, heads_fit, masks_fit,
                                     multi_head_attention)
from selfattention.masks import tiles


# ------------------------------------------------------------ constraints
@pytest.mark.parametrize("constraint, value, error", [
    (floats(), "text", TypeError), (floats(), None, TypeError),
    (floats(), np.array(["a"]), TypeError), (floats(), 1j, TypeError),
    (floats(min_ndim=2), np.ones(3), ValueError),
    (floats(ndim=1), np.ones((2, 2)), ValueError),
    (floats(), [0.0, np.nan], ValueError), (floats(), [np.inf], ValueError),
    (floats(), [-np.inf], ValueError),
    (bools(), np.ones(3), TypeError), (bools(ndim=2), np.ones(3, bool),
                                       ValueError),
    (integer(), 2.0, TypeError), (integer(), True, TypeError),
    (integer(), "3", TypeError), (integer(0), -1, ValueError),
    (integer(high=3), 4, ValueError), (positive_int(), 0, ValueError),
    (number(), "1", TypeError), (number(), True, TypeError),
    (number(), np.nan, ValueError), (positive(), 0.0, ValueError),
    (positive(), -1, ValueError), (positive(), np.array([0.5]), TypeError),
    (one_of("a", "b"), "c", ValueError),
    (pair(positive_int()), 3, TypeError), (pair(positive_int()), (1, 2, 3),
                                           TypeError),
    (pair(positive_int()), (2, 0), ValueError),
    (generator(), 0, TypeError),
    (generator(), np.random.RandomState(0), TypeError),
    (ints(), [1.5], TypeError), (ints(), [True], TypeError),
    (ints(ndim=1), [[1]], ValueError),
    (grid_shape(), (2, 3.0), TypeError),
    (grid_shape(), (2, -1), ValueError),
    (sequence(positive_int()), 3, TypeError),
    (sequence(positive_int()), "ab", TypeError),
    (sequence(positive_int()), [1, 0], ValueError),
])
def test_wrong_type_is_a_type_error_wrong_value_a_value_error(
        constraint, value, error):
    with pytest.raises(error, match="^arg"):       # the message names it
        constraint(value, "arg")


@pytest.mark.parametrize("constraint, inside, outside", [
    (number(0, 1), [0, 0.5, 1, np.float32(1.0)], [-0.5, 1.5, 1.0001, np.inf]),
    (number(0, 1, strict=True), [1e-9, 0.5, 0.999], [0, 1, -1, 2]),
    (number(high=2), [-5, 2], [2.5, np.nan]),
    (number(high=2, strict=True), [-5, 1.999], [2, 3]),
    (number(0), [0, 1e9], [-1e-9, np.inf]),
])
def test_number_keeps_to_its_bounds(constraint, inside, outside):
    for value in inside:
        assert constraint(value, "x") == value
    for value in outside:
        with pytest.raises(ValueError, match="^x"):
            constraint(value, "x")


@pytest.mark.parametrize("constraint, just_past", [
    (number(0, 1), [-0.5, 1.5]), (number(0, 1, strict=True), [0, 1]),
    (number(high=1), [1.5]), (integer(2, 5), [1, 6]),
])
def test_scalar_bounds_are_data_the_bad_input_test_tries(constraint,
                                                         just_past):
    refused = [value for value, _ in constraint.invalid()]
    assert all(value in refused for value in just_past)
    constraint(constraint.valid(), "x")
    for value, error in constraint.invalid():
        with pytest.raises(error, match="^x"):
            constraint(value, "x")


def test_floats_promotes_integers_and_bools_and_keeps_float32():
    assert floats()(np.ones(3, int), "x").dtype == np.float64
    assert floats()(np.ones(3, bool), "x").dtype == np.float64
    assert floats()(np.ones(3, np.float32), "x").dtype == np.float32
    assert floats(neg_inf=True)([-np.inf, 0.0], "x")[0] == -np.inf


def test_scalars_come_back_as_the_values_the_maths_wants():
    assert type(integer()(np.int64(-3), "x")) is int
    s = np.float32(0.25)
    assert positive()(s, "x") is s
    assert pair(positive_int())([2, np.int64(3)], "grid") == (2, 3)
    assert optional(positive_int())(None, "x") is None
    assert ints()([1, 2], "x").dtype == np.int64
    assert grid_shape()([4, np.int64(6)], "grid") == (4, 6)
    assert sequence(positive_int())((2, np.int64(3)), "d") == [2, 3]
    rng = np.random.default_rng(0)
    assert generator()(rng, "rng") is rng


# ------------------------------------------------------------ the boundary
def test_boundary_converts_checks_and_calls_the_bare_function():
    seen = []

    def at_least_two(x):
        if x.size < 2:
            raise ValueError("x needs two entries")

    @boundary(x=floats(), n=positive_int(), checks=(at_least_two,))
    def f(x, n=1):
        seen.append((x.dtype, n))
        return x.sum() * n

    assert f([1, 2], n=np.int64(2)) == 6
    assert seen == [(np.float64, 2)]
    with pytest.raises(ValueError, match="two entries"):
        f([1.0])
    with pytest.raises(TypeError, match="^n must be"):
        f([1.0, 2.0], 1.5)
    assert f.__wrapped__(np.array([1, 2]), 3) == 9   # the bare maths


def test_nested_public_calls_are_not_checked_again(monkeypatch):
    monkeypatch.delenv("SELFATTENTION_STRICT_CALLS")
    calls = []

    def counted(x):
        calls.append(1)

    @boundary(x=floats(), checks=(counted,))
    def inner(x):
        return x + 1

    @boundary(x=floats(), checks=(counted,))
    def outer(x):
        return inner(inner(x))

    outer([1.0])
    assert len(calls) == 1                 # only where the caller came in
    inner([1.0])
    assert len(calls) == 2                 # a direct call is checked


def test_code_given_by_the_caller_is_checked_as_usual():
    @boundary(x=floats())
    def inner(x):
        return x

    @boundary(runs_user_code=True)
    def run(fn):
        return fn()

    with pytest.raises(TypeError):
        run(lambda: inner("not numbers"))


def test_declaring_an_unknown_parameter_fails_at_import_time():
    with pytest.raises(TypeError, match="no parameter"):
        @boundary(y=floats())
        def f(x):
            return x


def test_library_calls_check_their_arguments_once():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 8))
    W = rng.standard_normal((8, 8))
    Y, A = multi_head_attention(X, W, W, W, W, h=2)
    assert Y.shape == (5, 8) and A.shape == (2, 5, 5)
    with pytest.raises(ValueError, match="W_q"):
        multi_head_attention(X, W[:7], W, W, W, h=2)
    with pytest.raises(ValueError, match="mask"):
        attention(X, X, X, mask=np.arange(5)[:, None] == np.arange(5) + 9)


@pytest.mark.parametrize("shape, ok", [
    ((4, 5), True), ((1, 5), True), ((), True), ((2, 1, 5), True),
    ((3, 5), False),                    # does not broadcast at all
    ((3, 2, 4, 5), False),              # broadcasts, but to a larger shape
])
def test_fits_scores_accepts_what_broadcasts_to_the_scores(shape, ok):
    args = {"Q": np.ones((2, 4, 3)), "K": np.ones((5, 3)),
            "bias": np.ones(shape)}             # scores: (2, 4, 5)
    if ok:
        masks_fit(**args)
    else:
        with pytest.raises(ValueError, match="^bias"):
            masks_fit(**args)


@pytest.mark.parametrize("H, W, M, ok", [(8, 8, 4, True), (56, 56, 7, True),
                                         (6, 9, 3, True), (8, 8, 3, False),
                                         (6, 4, 4, False)])
def test_tiles_accepts_exactly_the_windows_that_tile_the_grid(H, W, M, ok):
    if ok:
        tiles((H, W), M)
    else:
        with pytest.raises(ValueError, match="^M"):
            tiles((H, W), M)


def test_strict_mode_reports_an_internal_call_in_the_wrong_form(
        monkeypatch):
    monkeypatch.setenv("SELFATTENTION_STRICT_CALLS", "1")

    @boundary(x=floats())
    def total(x):
        return x.sum()

    @boundary(n=positive_int())
    def ones_wrong(n):
        return total([1.0] * n)            # a list where the maths wants
                                           # an array
    @boundary(n=positive_int())
    def ones_right(n):
        return total(np.ones(n))

    assert total([1.0, 2.0]) == 3.0        # at the boundary a list is fine
    assert ones_right(3) == 3.0
    with pytest.raises(AssertionError, match="total"):
        ones_wrong(3)
    monkeypatch.delenv("SELFATTENTION_STRICT_CALLS")
    with pytest.raises(AttributeError):     # what a user would meet
        ones_wrong(3)


# ------------------------------------------------------------ relations
def test_a_check_reads_the_arguments_it_names_and_keeps_its_defaults():
    seen = []

    def ordered(low, high=10, unit="px"):     # unit: no argument of f
        seen.append((low, high, unit))
        if low > high:
            raise ValueError("low must not exceed high")

    @boundary(low=integer(), checks=(ordered,))
    def f(low, other=5, high=10):
        return low

    assert f(1) == 1 and f(2, high=3) == 2
    assert seen == [(1, 10, "px"), (2, 3, "px")]
    with pytest.raises(ValueError, match="^low must not exceed"):
        f(4, high=3)


def test_a_check_naming_an_unknown_argument_fails_at_import_time():
    with pytest.raises(TypeError, match="no parameter"):
        @boundary(checks=(lambda x, y: None,))
        def f(x):
            return x


def test_a_shared_check_names_the_callers_arguments():
    W = np.ones((4, 4))
    with pytest.raises(ValueError, match="^W_q and x must agree"):
        heads_fit(np.ones((2, 2, 3)), W, W, W, W, 2, tokens="x")


def test_the_declaration_stays_readable_on_the_function():
    def small(n):
        if n > 10:
            raise ValueError("n must be at most 10")

    @boundary(x=floats(), n=positive_int(), checks=(small,))
    def f(x, n):
        return x

    assert set(f.constraints) == {"x", "n"}
    assert f.checks == (small,)
    assert f.constraints["n"].expected == "an integer >= 1"


def test_same_shape_passes_one_shape_and_refuses_two():
    same_shape(a=np.ones((2, 3)), b=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="^a and b"):
        same_shape(a=np.ones((2, 3)), b=np.ones((3, 2)))
    same_shape(left=np.ones(4), right=np.ones(4))
    with pytest.raises(ValueError, match="^left and right"):
        same_shape(left=np.ones(4), right=np.ones(5))


def test_one_per_image_passes_one_row_each_or_none_and_refuses_others():
    X = np.ones((3, 2, 2))
    one_per_image(X, y=np.zeros(3), scores=None)
    with pytest.raises(ValueError, match="^y"):
        one_per_image(X, y=np.zeros(4))


@pytest.mark.parametrize("d, h, ok", [(32, 4, True), (32, 1, True),
                                      (32, 32, True), (32, 3, False),
                                      (6, 4, False)])
def test_divides_accepts_exactly_the_divisors(d, h, ok):
    if ok:
        divides("h", h, (d,), "the token width d")
    else:
        with pytest.raises(ValueError, match="^h"):
            divides("h", h, (d,), "the token width d")
