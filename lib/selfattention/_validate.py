"""Argument checks at the library's public boundary (not part of the API).

``@boundary`` converts each declared argument (wrong type: ``TypeError``,
wrong value: ``ValueError``, naming the argument, what was expected and what
came), runs the relational ``checks``, then calls the bare maths. Calls made
by the library itself are not checked unless ``SELFATTENTION_STRICT_CALLS=1``
(the tests): they must pass what the maths receives.
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
    maths receives or raises; ``expected`` completes "name must be ..."."""

    def __init__(self, convert, expected: str):
        self.convert, self.expected = convert, expected

    def __call__(self, value, name: str):
        return self.convert(value, name)


def _got(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


def _wrong(error, name: str, expected: str, got) -> Exception:
    return error(f"{name} must be {expected}, got {got}")


def _is(test, what: str, error=TypeError) -> Constraint:
    """The value itself, if ``test(value)`` holds."""

    def convert(value, name):
        if not test(value):
            raise _wrong(error, name, what, _got(value))
        return value
    return Constraint(convert, what)


# ------------------------------------------------------------------ arrays
def _array(kinds: str, what: str, ndim=None, min_ndim=0,
           then=lambda arr, name: arr) -> Constraint:
    """An array of a dtype kind in ``kinds`` with fitting axes, then passed
    through ``then``."""
    what += (f" with {ndim} dimension(s)" if ndim is not None else
             f" with at least {min_ndim} dimension(s)" if min_ndim else "")

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
    return Constraint(convert, what)


def floats(ndim: int | None = None, min_ndim: int = 0,
           neg_inf: bool = False) -> Constraint:
    """A finite real array as floats (float32 stays, the rest -> float64);
    ``neg_inf`` also admits ``-inf``, a masked score."""

    def finite(arr, name):
        if arr.dtype not in (np.float32, np.float64):
            arr = arr.astype(np.float64)          # bools, integers, float16
        bad = np.isnan(arr) | np.isposinf(arr) if neg_inf else ~np.isfinite(arr)
        if bad.any():
            raise ValueError(f"{name} must be finite"
                             f"{' (-inf is allowed)' if neg_inf else ''}, got "
                             f"{int(bad.sum())} NaN or infinite value(s)")
        return arr
    return _array("biuf", "an array of real numbers", ndim, min_ndim, finite)


def bools(ndim: int | None = None) -> Constraint:
    """A boolean array; integer 0/1 arrays are refused (``TypeError``)."""
    return _array("b", "a boolean array (True = may attend)", ndim)


def ints(ndim: int | None = None) -> Constraint:
    """An array of integers (``bool`` refused), returned as ``int64``."""
    return _array("iu", "an array of integers", ndim,
                  then=lambda arr, name: arr.astype(np.int64, copy=False))


# ------------------------------------------------------------------ scalars
def _scalar(types, cast, what, low=None, high=None, strict=False):
    """A finite scalar of ``types`` (``bool`` refused) within the bounds."""
    what += ("" if low is None and high is None else f" <= {high}" if low is
             None else f" in {low}..{high}" if high is not None else
             f" {'>' if strict else '>='} {low}")

    def convert(value, name):
        if isinstance(value, bool) or not isinstance(value, types):
            raise _wrong(TypeError, name, what, _got(value))
        if not -math.inf < value < math.inf or (low is not None and (
                value <= low if strict else value < low)) or (
                high is not None and value > high):
            raise _wrong(ValueError, name, what, repr(value))
        return cast(value)
    return Constraint(convert, what)


def integer(low: int | None = None, high: int | None = None,
            what: str = "an integer") -> Constraint:
    """An integer in ``low … high``, returned as ``int``."""
    return _scalar(numbers.Integral, int, what, low, high)


def number(low: float | None = None, strict: bool = False,
           what: str = "a finite real number") -> Constraint:
    """A real number above ``low`` (exclusive if ``strict``), returned
    unchanged: a float32 scale keeps float32 maths float32."""
    return _scalar(numbers.Real, lambda v: v, what, low, strict=strict)


positive_int = functools.partial(integer, 1)
positive = functools.partial(number, 0, strict=True)


def one_of(*choices) -> Constraint:
    """One of ``choices`` (compared with ``==``)."""
    return _is(lambda v: any(v == c for c in choices),
               "one of " + ", ".join(map(repr, choices)), ValueError)


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
    return Constraint(convert, what)


def pair(item: Constraint, names: tuple[str, str] = ("H", "W")) -> Constraint:
    """A pair such as a grid ``(H, W)``, returned as a tuple."""
    return _items(item, f"a pair ({names[0]}, {names[1]})", 2)


def sequence(item: Constraint) -> Constraint:
    """A sequence of items that ``item`` accepts, returned as a list."""
    return _items(item, f"a sequence of items, each {item.expected}")


grid = functools.partial(pair, positive_int(), ("H", "W"))   # a patch grid


def optional(inner: Constraint) -> Constraint:
    """``None``, or what ``inner`` accepts."""
    return Constraint(lambda v, name: None if v is None else inner(v, name),
                      f"None or {inner.expected}")


def instance(cls, what: str | None = None) -> Constraint:
    """An instance of ``cls``."""
    return _is(lambda v: isinstance(v, cls), what or f"a {cls.__name__}")


generator = functools.partial(
    instance, np.random.Generator,
    "a numpy.random.Generator (np.random.default_rng(seed))")
function = functools.partial(_is, callable, "callable")


# ------------------------------------------------------------------ relations
def divides(name: str, sizes, what: str):
    """A check: argument ``name`` divides each of ``sizes(args)``, the sizes
    of ``what``."""

    def check(args) -> None:
        k, n = args[name], tuple(sizes(args))
        if any(s % k for s in n):
            raise ValueError(f"{name}={k} must divide {what}, got {n}")
    return check


def tiles(grid: str = "grid", M: str = "M"):
    """A check: windows of ``M × M`` patches tile the grid exactly."""
    return divides(M, lambda args: args[grid], f"both sides of the {grid}")
