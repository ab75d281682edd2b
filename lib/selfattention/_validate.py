"""Argument checks at the library's public boundary (not part of the API):
``@boundary`` converts each declared argument, runs the checks between them,
then the maths; ``tests/unit/test_bad_input.py`` reads the declarations.
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
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        reads = [[p.name for p in inspect.signature(c).parameters.values()
                  if p.name in sig.parameters or p.default is p.empty]
                 for c in checks]                  # others keep defaults
        unknown = sorted((set(constraints).union(*reads))
                         - set(sig.parameters))
        if unknown:
            raise TypeError(f"{fn.__qualname__} has no parameter(s) "
                            f"{unknown} to check")
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
            for check, names in zip(checks, reads):
                check(**{n: values[n] for n in names})
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
    """What one argument must be: ``convert(value, name)`` returns what the
    maths receives or raises ``TypeError`` / ``ValueError`` with a message
    that starts with ``name``; ``expected`` completes "name must be ...";
    ``valid()`` makes a value it accepts, ``invalid()`` a list of values it
    refuses, each with its error (for the tests)."""

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


def _is(test, what: str, error=TypeError, valid=None,
        invalid=()) -> Constraint:
    """The value itself, if ``test(value)`` holds."""

    def convert(value, name):
        if not test(value):
            raise error(f"{name} must be {what}, got {_got(value)}")
        return value
    return Constraint(convert, what, valid,
                      lambda: [(v, error) for v in invalid])


# ------------------------------------------------------------------ arrays
def _array(kinds: str, what: str, ndim=None, min_ndim=0, then=None,
           example=np.ones, refused=()) -> Constraint:
    """An array of a dtype kind in ``kinds`` with fitting axes, then passed
    through ``then(arr, name)``; ``example(shape)`` makes arrays of the
    right kind, ``refused`` adds (value, error) pairs the tests try."""
    if ndim is not None:
        what += f" with {ndim} dimension(s)"
    elif min_ndim:
        what += f" with at least {min_ndim} dimension(s)"
    shape = (2,) * (min_ndim if ndim is None else ndim)

    def convert(value, name):
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):           # a ragged nested list
            arr = np.asarray(None)
        if arr.dtype.kind not in kinds:
            raise TypeError(f"{name} must be {what}, got {_got(value)}")
        if (ndim is not None and arr.ndim != ndim) or arr.ndim < min_ndim:
            raise ValueError(f"{name} must be {what}, got shape {arr.shape}")
        return arr if then is None else then(arr, name)

    def invalid():
        axes = ([(2,) * (ndim + 1)] if ndim is not None else
                [(2,) * (min_ndim - 1)] if min_ndim else [])
        return ([(np.full(shape, "text"), TypeError)]
                + [(example(s), ValueError) for s in axes] + list(refused))
    return Constraint(convert, what, lambda: example(shape), invalid)


def floats(ndim: int | None = None, min_ndim: int = 0, neg_inf: bool = False,
           nan: bool = False) -> Constraint:
    """A finite real array as floats (float32 stays, the rest -> float64);
    ``neg_inf`` also admits ``-inf``, a masked score, and ``nan`` NaN, an
    unknown value."""

    def finite(arr, name):
        if arr.dtype not in (np.float32, np.float64):
            arr = arr.astype(np.float64)          # bools, integers, float16
        bad = ~(np.isfinite(arr) | (neg_inf & np.isneginf(arr))
                | (nan & np.isnan(arr)))
        if bad.any():
            allowed = " (-inf is allowed)" if neg_inf else \
                " (NaN is allowed)" if nan else ""
            raise ValueError(f"{name} must be finite{allowed}, got "
                             f"{int(bad.sum())} NaN or infinite value(s)")
        return arr

    shape = (2,) * (min_ndim if ndim is None else ndim)
    return _array("biuf", "an array of real numbers", ndim, min_ndim, finite,
                  refused=[(1j, TypeError), (np.full(
                      shape, np.inf if nan else np.nan), ValueError)])


def bools(ndim: int | None = None) -> Constraint:
    """A boolean array; integer 0/1 arrays are refused (``TypeError``)."""
    return _array("b", "a boolean array (True = may attend)", ndim,
                  example=lambda shape: np.ones(shape, bool),
                  refused=[(np.ones((2, 2), int), TypeError)])


def ints(ndim: int | None = None) -> Constraint:
    """An array of integers (``bool`` refused), returned as ``int64``."""
    one = max(1, ndim or 1) * (1,)
    return _array("iu", "an array of integers", ndim,
                  then=lambda arr, name: arr.astype(np.int64, copy=False),
                  example=lambda shape: np.ones(shape, np.int64),
                  refused=[(np.full(one, 1.5), TypeError),
                           (np.ones(one, bool), TypeError)])


# ------------------------------------------------------------------ scalars
def _scalar(types, cast, what, low=None, high=None, strict=False,
            step=1) -> Constraint:
    """A finite scalar of ``types`` (``bool`` refused) within the bounds,
    both excluded if ``strict``; ``step`` is the distance just past a
    bound (1 for integers, whose bounds read ``low..high``)."""
    lt, ge = ("<", ">") if strict else ("<=", ">=")
    if low is not None and high is not None:
        what += (f" in {low}..{high}" if step == 1 else
                 f" in ({low}, {high})" if strict else f" in [{low}, {high}]")
    elif low is not None or high is not None:
        what += f" {ge} {low}" if high is None else f" {lt} {high}"

    def outside(v):
        return not (-math.inf < v < math.inf) or (
            low is not None and (v <= low if strict else v < low)) or (
            high is not None and (v >= high if strict else v > high))

    def convert(value, name):
        if isinstance(value, bool) or not isinstance(value, types):
            raise TypeError(f"{name} must be {what}, got {_got(value)}")
        if outside(value):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return cast(value)

    def valid():
        if low is not None and high is not None and strict:
            return cast((low + high) / 2)
        if low is not None:
            return cast(low + step if strict else low)
        return cast(1 if high is None else high - step if strict else high)

    def invalid():
        wrong = [("1", TypeError), (True, TypeError),
                 (1.5, TypeError) if types is numbers.Integral
                 else (math.nan, ValueError)]
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
            raise TypeError(f"{name} must be {what}, got {_got(value)}")
        items = [item(v, f"{name}[{k}]") for k, v in enumerate(value)]
        return items if size is None else tuple(items)

    def valid():
        items = [item.valid() for _ in range(size or 1)]
        return items if size is None else tuple(items)

    def invalid():
        wrong = [("ab", TypeError), ({"a": 1}, TypeError)]
        if size is not None:
            wrong.append((tuple(item.valid() for _ in range(size + 1)),
                          TypeError))
        return wrong + [([bad] + [item.valid()] * ((size or 1) - 1), error)
                        for bad, error in item.invalid()]
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


def optional(inner: Constraint) -> Constraint:
    """``None``, or what ``inner`` accepts."""
    return Constraint(lambda v, name: None if v is None else inner(v, name),
                      f"None or {inner.expected}", lambda: None,
                      inner.invalid)


def instance(cls, what: str | None = None, valid=None) -> Constraint:
    """An instance of ``cls``; the tests make one without its
    ``__init__``, all that an ``isinstance`` test needs."""
    return _is(lambda v: isinstance(v, cls), what or f"a {cls.__name__}",
               valid=valid or (lambda: False if cls is bool
                               else cls.__new__(cls)),
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


# ------------------------------------------ helpers of the modules' checks
def require(condition, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition`` holds."""
    if not condition:
        raise ValueError(message)


def agree(a: str, x, i: int, b: str, y, j: int, what: str) -> None:
    """Axis ``i`` of the array ``x`` (argument ``a``) equals axis ``j`` of
    ``y`` (argument ``b``)."""
    require(x.shape[i] == y.shape[j],
            f"{a} and {b} must {what}, got {a} of shape {x.shape} and {b} "
            f"of shape {y.shape}")


def divides(name: str, k: int, sizes, what: str) -> None:
    """The argument ``name`` = ``k`` divides each of ``sizes``."""
    require(not any(s % k for s in sizes),
            f"{name}={k} must divide {what}, got {tuple(sizes)}")


def same_shape(**arrays) -> None:
    """Arrays, by argument name, of one shape."""
    (a, x), *rest = arrays.items()
    for b, y in rest:
        require(x.shape == y.shape, f"{a} and {b} must have the same shape, "
                                    f"got {x.shape} and {y.shape}")


def one_per_image(X, **values) -> None:
    """Each array of ``values`` (by argument name), if given, has one row
    per image of ``X``."""
    for name, v in values.items():
        require(v is None or v.shape[:1] == (len(X),),
                f"{name} must have one row per image of X ({len(X)}), got "
                f"shape {None if v is None else v.shape}")
