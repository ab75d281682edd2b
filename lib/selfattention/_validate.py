"""Argument checks at the library's public boundary (not part of the API).

Each public function declares what its arguments must be, as data:

    @boundary(Q=floats(min_ndim=2), h=positive_int(), checks=(...,))

``@boundary`` converts each declared argument (wrong type: ``TypeError``,
wrong value: ``ValueError``, naming the argument, what was expected and what
came), runs the relational ``checks`` (written in :mod:`._relations`), then
calls the bare maths. The declaration stays readable on the function as
``fn.constraints`` (name -> :class:`Constraint`) and ``fn.checks``; each
constraint also says which values it accepts and which it refuses, from
which one test (``tests/unit/test_bad_input.py``) tries every public function of
the library with every kind of bad argument.

Calls made by the library itself are not checked unless
``SELFATTENTION_STRICT_CALLS=1`` (the tests): they must pass what the maths
receives.
"""

import functools
import inspect
import math
import numbers
import os
import threading

import numpy as np

_state = threading.local()             # depth: public calls under way


def boundary(checks=(), runs_user_code: bool = False, **constraints):
    """Declare a public function's arguments; convert and check them on entry.

    ``checks`` get the dict of converted arguments; ``runs_user_code`` marks
    a function running code it was given, whose calls are checked as usual.
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        unknown = sorted(set(constraints) - set(sig.parameters))
        if unknown:
            raise TypeError(f"{fn.__qualname__} has no parameter(s) "
                            f"{unknown} to constrain")
        enters = 0 if runs_user_code else 1       # user code is checked
        where = f"{fn.__module__}.{fn.__qualname__}"

        def convert(args, kwargs, strict=False):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            values = bound.arguments
            for name, constraint in constraints.items():
                given = values[name]
                values[name] = constraint(given, name)
                if strict and not _same(values[name], given):
                    raise AssertionError(f"the library called {where} with "
                                         f"{name} not in the form its maths "
                                         f"receives: convert it before")
            for check in checks:
                check(values)
            return bound

        @functools.wraps(fn)
        def public(*args, **kwargs):
            if getattr(_state, "depth", 0):       # called by the library
                if os.environ.get("SELFATTENTION_STRICT_CALLS") == "1":
                    try:
                        convert(args, kwargs, strict=True)
                    except (TypeError, ValueError) as err:
                        raise AssertionError(
                            f"the library called {where} with arguments its "
                            f"own checks refuse: {err}") from err
                return fn(*args, **kwargs)
            bound = convert(args, kwargs)
            _state.depth = getattr(_state, "depth", 0) + enters
            try:
                return fn(*bound.args, **bound.kwargs)
            finally:
                _state.depth -= enters

        public.constraints = dict(constraints)    # the declaration, as data
        public.checks = tuple(checks)
        return public
    return wrap


def _same(converted, given) -> bool:
    """Whether conversion left ``given`` as it was (same type and value)."""
    if isinstance(given, np.ndarray):
        return converted is given
    if type(converted) is not type(given):
        return False
    if isinstance(given, tuple):
        return len(given) == len(converted) and all(
            _same(c, g) for c, g in zip(converted, given))
    return converted is given or converted == given


class Constraint:
    """What one argument must be.

    Parameters
    ----------
    convert : callable ``(value, name) -> value``
        Returns what the maths receives, or raises ``TypeError`` (wrong
        type) or ``ValueError`` (wrong value) with a message that starts
        with ``name``.
    expected : str
        Completes "name must be ...".
    valid : callable ``() -> value``, optional
        A value that ``convert`` accepts (for the tests).
    invalid : callable ``() -> list of (value, error class)``, optional
        Values that ``convert`` refuses, each with the error it raises.
    """

    def __init__(self, convert, expected: str, valid=None, invalid=None):
        self.convert, self.expected = convert, expected
        self.valid = valid
        self.invalid = invalid or (lambda: [])

    def __call__(self, value, name: str):
        return self.convert(value, name)

    def __repr__(self) -> str:
        return f"<Constraint: {self.expected}>"


def _got(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


def _wrong(error, name: str, expected: str, got) -> Exception:
    return error(f"{name} must be {expected}, got {got}")


def _is(test, what: str, error=TypeError, valid=None,
        invalid=()) -> Constraint:
    """The value itself, if ``test(value)`` holds."""

    def convert(value, name):
        if not test(value):
            raise _wrong(error, name, what, _got(value))
        return value
    return Constraint(convert, what, valid,
                      lambda: [(v, error) for v in invalid])


# ------------------------------------------------------------------ arrays
def _axes_text(ndim, min_ndim) -> str:
    if ndim is not None:
        return f" with {ndim} dimension(s)"
    if min_ndim:
        return f" with at least {min_ndim} dimension(s)"
    return ""


def _wrong_axes(ndim, min_ndim) -> list:
    """Shapes with the wrong number of axes (empty if any number fits)."""
    if ndim is not None:
        return [(2,) * (ndim + 1)]
    if min_ndim:
        return [(2,) * (min_ndim - 1)]
    return []


def _array(kinds: str, what: str, ndim=None, min_ndim=0,
           then=lambda arr, name: arr, example=np.ones) -> Constraint:
    """An array of a dtype kind in ``kinds`` with fitting axes, then passed
    through ``then``; ``example(shape)`` makes arrays of the right kind."""
    what += _axes_text(ndim, min_ndim)
    shape = (2,) * (min_ndim if ndim is None else ndim)

    def convert(value, name):
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):           # a ragged nested list
            arr = np.asarray(None)
        if arr.dtype.kind not in kinds:
            raise _wrong(TypeError, name, what, _got(value))
        if (ndim is not None and arr.ndim != ndim) or arr.ndim < min_ndim:
            raise _wrong(ValueError, name, what, f"shape {arr.shape}")
        return then(arr, name)

    def invalid():
        return [(np.full(shape, "text"), TypeError)] + [
            (example(s), ValueError) for s in _wrong_axes(ndim, min_ndim)]
    return Constraint(convert, what, lambda: example(shape), invalid)


def floats(ndim: int | None = None, min_ndim: int = 0,
           neg_inf: bool = False) -> Constraint:
    """A finite real array as floats (float32 stays, the rest -> float64);
    ``neg_inf`` also admits ``-inf``, a masked score."""

    def finite(arr, name):
        if arr.dtype not in (np.float32, np.float64):
            arr = arr.astype(np.float64)          # bools, integers, float16
        if neg_inf:
            bad = np.isnan(arr) | np.isposinf(arr)
            allowed = " (-inf is allowed)"
        else:
            bad = ~np.isfinite(arr)
            allowed = ""
        if bad.any():
            raise ValueError(f"{name} must be finite{allowed}, got "
                             f"{int(bad.sum())} NaN or infinite value(s)")
        return arr

    constraint = _array("biuf", "an array of real numbers", ndim, min_ndim,
                        finite)
    wrong_kind_and_axes = constraint.invalid
    shape = (2,) * (min_ndim if ndim is None else ndim)

    def invalid():
        not_finite = np.full(shape, np.nan)
        return wrong_kind_and_axes() + [(1j, TypeError),
                                        (not_finite, ValueError)]
    constraint.invalid = invalid
    return constraint


def bools(ndim: int | None = None) -> Constraint:
    """A boolean array; integer 0/1 arrays are refused (``TypeError``)."""
    constraint = _array("b", "a boolean array (True = may attend)", ndim,
                        example=lambda shape: np.ones(shape, bool))
    wrong_kind_and_axes = constraint.invalid
    constraint.invalid = lambda: wrong_kind_and_axes() + [
        (np.ones((2, 2), int), TypeError)]
    return constraint


def ints(ndim: int | None = None) -> Constraint:
    """An array of integers (``bool`` refused), returned as ``int64``."""
    constraint = _array("iu", "an array of integers", ndim,
                        then=lambda arr, name: arr.astype(np.int64,
                                                          copy=False),
                        example=lambda shape: np.ones(shape, np.int64))
    wrong_kind_and_axes = constraint.invalid
    constraint.invalid = lambda: wrong_kind_and_axes() + [
        (np.full(max(1, ndim or 1) * (1,), 1.5), TypeError),
        (np.ones(max(1, ndim or 1) * (1,), bool), TypeError)]
    return constraint


# ------------------------------------------------------------------ scalars
def _bounds_text(low, high, strict: bool, interval: bool) -> str:
    """The bounds of a scalar, as they complete "... must be a number";
    ``interval``: real bounds, written ``[low, high]`` or ``(low, high)``."""
    if low is None and high is None:
        return ""
    if low is None:
        return f" < {high}" if strict else f" <= {high}"
    if high is None:
        return f" > {low}" if strict else f" >= {low}"
    if not interval:
        return f" in {low}..{high}"
    if strict:
        return f" in ({low}, {high})"
    return f" in [{low}, {high}]"


def _outside(value, low, high, strict: bool) -> bool:
    if not -math.inf < value < math.inf:
        return True
    if low is not None and strict and value <= low:
        return True
    if low is not None and not strict and value < low:
        return True
    if high is not None and strict and value >= high:
        return True
    if high is not None and not strict and value > high:
        return True
    return False


def _scalar(types, cast, what, low=None, high=None, strict=False,
            step=1) -> Constraint:
    """A finite scalar of ``types`` (``bool`` refused) within the bounds,
    both excluded if ``strict``; ``step`` is the distance just past a
    bound (1 for integers)."""
    what += _bounds_text(low, high, strict, interval=step != 1)

    def convert(value, name):
        if isinstance(value, bool) or not isinstance(value, types):
            raise _wrong(TypeError, name, what, _got(value))
        if _outside(value, low, high, strict):
            raise _wrong(ValueError, name, what, repr(value))
        return cast(value)

    def valid():
        if low is not None and high is not None and strict:
            return cast((low + high) / 2)
        if low is not None:
            return cast(low + step if strict else low)
        if high is not None:
            return cast(high - step if strict else high)
        return cast(1)

    def invalid():
        wrong = [("1", TypeError), (True, TypeError)]
        if types is numbers.Integral:
            wrong.append((1.5, TypeError))
        else:
            wrong.append((math.nan, ValueError))
        if low is not None:
            wrong.append((low if strict else low - step, ValueError))
        if high is not None:
            wrong.append((high if strict else high + step, ValueError))
        return wrong
    return Constraint(convert, what, valid, invalid)


def integer(low: int | None = None, high: int | None = None,
            what: str = "an integer") -> Constraint:
    """An integer in ``low … high``, returned as ``int``."""
    return _scalar(numbers.Integral, int, what, low, high)


def number(low: float | None = None, high: float | None = None,
           strict: bool = False,
           what: str = "a finite real number") -> Constraint:
    """A real number in ``[low, high]`` (``(low, high)`` if ``strict``;
    either bound may be left open with ``None``), returned unchanged: a
    float32 scale keeps float32 maths float32."""
    return _scalar(numbers.Real, lambda v: v, what, low, high, strict,
                   step=0.5)


positive_int = functools.partial(integer, 1)
positive = functools.partial(number, 0, strict=True)


def one_of(*choices) -> Constraint:
    """One of ``choices`` (compared with ``==``)."""
    return _is(lambda v: any(v == c for c in choices),
               "one of " + ", ".join(map(repr, choices)), ValueError,
               valid=lambda: choices[0],
               invalid=["none of " + "/".join(map(str, choices))])


# ------------------------------------------------------------------ groups
def _items(item: Constraint, what: str, size: int | None = None):
    """A sequence (not a string or an array) whose items ``item`` accepts,
    as a list, or as a tuple of exactly ``size`` items."""

    def convert(value, name):
        if isinstance(value, (str, bytes, dict, np.ndarray)) or not hasattr(
                value, "__len__") or size not in (None, len(value)):
            raise _wrong(TypeError, name, what, _got(value))
        items = [item(v, f"{name}[{k}]") for k, v in enumerate(value)]
        return items if size is None else tuple(items)

    def valid():
        items = [item.valid() for _ in range(size or 1)]
        return items if size is None else tuple(items)

    def invalid():
        count = size or 1
        wrong = [("ab", TypeError), ({"a": 1}, TypeError)]
        if size is not None:
            wrong.append((tuple(item.valid() for _ in range(size + 1)),
                          TypeError))
        for bad, error in item.invalid():
            wrong.append(([bad] + [item.valid()] * (count - 1), error))
        return wrong
    return Constraint(convert, what, valid, invalid)


def pair(item: Constraint, names: tuple[str, str] = ("H", "W")) -> Constraint:
    """A pair such as a grid ``(H, W)``, returned as a tuple."""
    return _items(item, f"a pair ({names[0]}, {names[1]})", 2)


def sequence(item: Constraint) -> Constraint:
    """A sequence of items that ``item`` accepts, returned as a list."""
    return _items(item, f"a sequence of items, each {item.expected}")


def grid_shape() -> Constraint:
    """A patch grid ``(H, W)`` of positive sides, returned as a tuple."""
    return pair(positive_int(), ("H", "W"))


#: The name the library's modules used first for :func:`grid_shape`.
grid = grid_shape


def optional(inner: Constraint) -> Constraint:
    """``None``, or what ``inner`` accepts."""
    return Constraint(lambda v, name: None if v is None else inner(v, name),
                      f"None or {inner.expected}", lambda: None,
                      inner.invalid)


def _an_instance(cls):
    """An instance of ``cls`` made without running its ``__init__``: all
    that an ``isinstance`` test needs."""
    if cls is bool:
        return False
    return cls.__new__(cls)


def instance(cls, what: str | None = None, valid=None) -> Constraint:
    """An instance of ``cls``."""
    return _is(lambda v: isinstance(v, cls), what or f"a {cls.__name__}",
               valid=valid or (lambda: _an_instance(cls)),
               invalid=["text"] if cls is not str else [0])


def generator() -> Constraint:
    """A NumPy random generator, as ``np.random.default_rng(seed)`` gives."""
    return _is(lambda v: isinstance(v, np.random.Generator),
               "a numpy.random.Generator (np.random.default_rng(seed))",
               valid=lambda: np.random.default_rng(0),
               invalid=[0, np.random.RandomState(0)])


def function() -> Constraint:
    """Something callable."""
    return _is(callable, "callable", valid=lambda: len, invalid=[3])
