"""Argument checks at the library's public boundary (not part of the API).

A public function of the library is the maths, written bare, with a
declaration above it of what each argument must be::

    @boundary(Q=floats(min_ndim=2), K=floats(min_ndim=2),
              scale=optional(positive()), checks=(same_width,))
    def attention(Q, K, V, scale=None):
        ...

:func:`boundary` binds a call to the signature, turns each declared argument
into what the maths expects (an array of floats, an ``int``) or raises, runs
the relational ``checks`` on the converted arguments, and only then calls the
function. The rule is the same everywhere: the wrong **type** raises
``TypeError``, the wrong **value** (shape, sign, range, a mismatch between two
arguments) raises ``ValueError``, and the message names the argument, what was
expected and what arrived, in the style of scikit-learn.

Checks run once, where a caller enters the library. While a public function
runs, the public functions it calls skip their checks (a thread-local depth
counter): their arguments were made by the library itself, so nothing is
checked twice and the maths of one function simply calls the maths of
another. ``fn.__wrapped__`` is the bare function; the chapters show its
source (``scripts/sync_code.py``).

That makes one rule for the library's own calls: they pass arguments in the
form the maths receives (arrays, not lists; a grid as a pair, not an int).
With the environment variable ``SELFATTENTION_STRICT_CALLS=1`` (the test
suite sets it) every internal call is converted and checked as well, and an
argument that conversion would change, or a failed check, is reported as
the library's own error, naming the function.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import os
import threading

import numpy as np

__all__ = ["boundary", "Constraint", "floats", "bools", "ints", "integer",
           "positive_int", "number", "positive", "one_of", "pair", "grid",
           "sequence", "optional", "generator", "instance", "function",
           "tiles"]

_state = threading.local()             # depth: public calls under way


def boundary(checks=(), runs_user_code: bool = False, **constraints):
    """Declare the arguments of a public function; check them on entry.

    Parameters
    ----------
    checks : sequence of callables
        Relational checks, each called with the dict of converted arguments
        (by parameter name, defaults filled in); each raises ``ValueError``
        (or ``TypeError``) or returns None.
    runs_user_code : bool
        The function calls code it was given (a callable to time, a module
        to count). Public functions called from there are checked as usual.
    **constraints : Constraint
        One per parameter to convert and check, by parameter name.
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        unknown = sorted(set(constraints) - set(sig.parameters))
        if unknown:
            raise TypeError(f"{fn.__qualname__} has no parameter(s) "
                            f"{unknown} to constrain")
        enters = 0 if runs_user_code else 1       # user code is checked

        @functools.wraps(fn)
        def public(*args, **kwargs):
            if getattr(_state, "depth", 0):       # called by the library
                if os.environ.get("SELFATTENTION_STRICT_CALLS") == "1":
                    _internal_call(fn, sig, constraints, checks, args, kwargs)
                return fn(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            values = bound.arguments
            for name, constraint in constraints.items():
                values[name] = constraint(values[name], name)
            for check in checks:
                check(values)
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


def _internal_call(fn, sig, constraints, checks, args, kwargs) -> None:
    """Strict mode: an internal call must already be in canonical form."""
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    where = f"{fn.__module__}.{fn.__qualname__}"
    try:
        for name, constraint in constraints.items():
            converted = constraint(values[name], name)
            if not _same(converted, values[name]):
                raise AssertionError(
                    f"the library called {where} with {name} not in the "
                    f"form its maths receives ({type(values[name]).__name__}"
                    f"); convert it at the caller's boundary")
            values[name] = converted
        for check in checks:
            check(values)
    except (TypeError, ValueError) as err:
        raise AssertionError(f"the library called {where} with arguments "
                             f"its own checks refuse: {err}") from err


class Constraint:
    """What one argument must be: a conversion that raises when it cannot.

    ``convert(value, name)`` returns the value the maths receives; the
    ``expected`` text completes "``name`` must be ...".
    """

    def __init__(self, convert, expected: str):
        self.convert = convert
        self.expected = expected

    def __call__(self, value, name: str):
        return self.convert(value, name)

    def __repr__(self) -> str:
        return f"Constraint({self.expected!r})"


def _got(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


# ------------------------------------------------------------------ arrays
def floats(ndim: int | None = None, min_ndim: int = 0,
           neg_inf: bool = False) -> Constraint:
    """A real array, returned as floats (float32 stays, the rest -> float64).

    ``ndim`` fixes the number of axes, ``min_ndim`` bounds it from below;
    values must be finite (``neg_inf=True`` also admits ``-inf``, a masked
    score).
    """
    expected = "an array of real numbers" + (
        f" with {ndim} dimension(s)" if ndim is not None else
        f" with at least {min_ndim} dimension(s)" if min_ndim else "")

    def convert(value, name):
        if value is None or isinstance(value, (str, bytes)):
            raise TypeError(f"{name} must be {expected}, got {_got(value)}")
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be {expected}: {err}") from None
        if arr.dtype != bool and not (np.issubdtype(arr.dtype, np.integer)
                                      or np.issubdtype(arr.dtype, np.floating)):
            raise TypeError(f"{name} must be {expected}, got dtype "
                            f"{arr.dtype}")
        if arr.dtype not in (np.float32, np.float64):
            arr = arr.astype(np.float64)          # bools, integers, float16
        if (ndim is not None and arr.ndim != ndim) or arr.ndim < min_ndim:
            raise ValueError(f"{name} must be {expected}, got shape "
                             f"{arr.shape}")
        bad = np.isnan(arr) | np.isposinf(arr) if neg_inf else ~np.isfinite(arr)
        if bad.any():
            allowed = "" if not neg_inf else " (-inf is allowed)"
            raise ValueError(f"{name} must be finite{allowed}, got "
                             f"{int(bad.sum())} NaN or infinite value(s)")
        return arr

    return Constraint(convert, expected)


def bools(ndim: int | None = None) -> Constraint:
    """A boolean array; integer 0/1 arrays are refused (``TypeError``)."""
    expected = ("a boolean array (True = this query may use this key)"
                if ndim is None else f"a {ndim}-D boolean array")

    def convert(value, name):
        arr = np.asarray(value)
        if arr.dtype != bool:
            raise TypeError(f"{name} must be {expected}, got dtype "
                            f"{arr.dtype}")
        if ndim is not None and arr.ndim != ndim:
            raise ValueError(f"{name} must be {expected}, got shape "
                             f"{arr.shape}")
        return arr

    return Constraint(convert, expected)


def ints(ndim: int | None = None) -> Constraint:
    """An array of integers (``bool`` refused), returned as ``int64``."""
    expected = "an array of integers" + (
        f" with {ndim} dimension(s)" if ndim is not None else "")

    def convert(value, name):
        arr = np.asarray(value)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{name} must be {expected}, got "
                            f"{_got(value)}")
        if ndim is not None and arr.ndim != ndim:
            raise ValueError(f"{name} must be {expected}, got shape "
                             f"{arr.shape}")
        return arr.astype(np.int64, copy=False)

    return Constraint(convert, expected)


# ------------------------------------------------------------------ scalars
def integer(low: int | None = None, high: int | None = None,
            what: str = "an integer") -> Constraint:
    """An integer (``bool`` refused) in ``low … high``, returned as ``int``."""
    bounds = ("" if low is None and high is None else
              f" >= {low}" if high is None else
              f" <= {high}" if low is None else f" in {low}..{high}")

    def convert(value, name):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be {what}{bounds}, got "
                            f"{_got(value)}")
        value = int(value)
        if (low is not None and value < low) or (high is not None
                                                 and value > high):
            raise ValueError(f"{name} must be {what}{bounds}, got {value}")
        return value

    return Constraint(convert, what + bounds)


def positive_int() -> Constraint:
    """An integer ``>= 1``."""
    return integer(1, what="a positive integer")


def number(low: float | None = None, strict: bool = False,
           what: str | None = None) -> Constraint:
    """A real, finite scalar (``bool`` refused), above ``low`` if given.

    ``strict`` makes the bound exclusive. The value is returned unchanged,
    so a float32 scale keeps float32 arithmetic float32.
    """
    sign = ">" if strict else ">="
    what = what or "a finite real number" + (
        "" if low is None else f" {sign} {low:g}")

    def convert(value, name):
        if isinstance(value, bool) or not isinstance(
                value, (numbers.Real, np.floating, np.integer)):
            raise TypeError(f"{name} must be {what}, got {_got(value)}")
        if not np.isfinite(value) or (low is not None and (
                value <= low if strict else value < low)):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return value

    return Constraint(convert, what)


def positive() -> Constraint:
    """A finite real number ``> 0``."""
    return number(0, strict=True, what="a positive finite number")


def one_of(*choices) -> Constraint:
    """One of ``choices`` (compared with ``==``)."""
    what = "one of " + ", ".join(repr(c) for c in choices)

    def convert(value, name):
        if not any(value == c for c in choices):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return value

    return Constraint(convert, what)


def pair(item: Constraint, names: tuple[str, str] = ("H", "W")) -> Constraint:
    """A pair such as a grid ``(H, W)``; each item checked by ``item``."""
    what = f"a pair ({names[0]}, {names[1]})"

    def convert(value, name):
        if isinstance(value, (str, bytes, np.ndarray)) or not hasattr(
                value, "__len__") or len(value) != 2:
            raise TypeError(f"{name} must be {what}, got {_got(value)}")
        return tuple(item(v, f"{name}[{k}]") for k, v in enumerate(value))

    return Constraint(convert, what)


def sequence(item: Constraint) -> Constraint:
    """A sequence (not a string) whose items ``item`` accepts, as a list."""
    what = f"a sequence of items, each {item.expected}"

    def convert(value, name):
        if isinstance(value, (str, bytes, dict)) or not hasattr(value,
                                                                "__iter__"):
            raise TypeError(f"{name} must be {what}, got {_got(value)}")
        return [item(v, f"{name}[{k}]") for k, v in enumerate(value)]

    return Constraint(convert, what)


def grid() -> Constraint:
    """A patch grid ``(H, W)``: a pair of positive integers."""
    return pair(positive_int(), ("H", "W"))


def optional(inner: Constraint) -> Constraint:
    """``None``, or what ``inner`` accepts."""
    return Constraint(lambda v, name: None if v is None else inner(v, name),
                      f"None or {inner.expected}")


def instance(cls, what: str | None = None) -> Constraint:
    """An instance of ``cls`` (``TypeError`` otherwise)."""
    what = what or f"a {cls.__name__}"

    def convert(value, name):
        if not isinstance(value, cls):
            raise TypeError(f"{name} must be {what}, got "
                            f"{type(value).__name__}")
        return value

    return Constraint(convert, what)


def generator() -> Constraint:
    """A ``numpy.random.Generator``; seeds and ``RandomState`` are refused."""
    return instance(np.random.Generator,
                    "a numpy.random.Generator (np.random.default_rng(seed))")


def function() -> Constraint:
    """Anything callable."""

    def convert(value, name):
        if not callable(value):
            raise TypeError(f"{name} must be callable, got "
                            f"{type(value).__name__}")
        return value

    return Constraint(convert, "callable")


# ------------------------------------------------------------------ relations
def broadcasts_to(shape: tuple, target: tuple) -> bool:
    """True if an array of ``shape`` broadcasts to exactly ``target``."""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def tiles(grid: str = "grid", M: str = "M"):
    """A check: windows of ``M × M`` patches tile the grid exactly."""

    def check(args) -> None:
        (H, W), side = args[grid], args[M]
        if H % side or W % side:
            raise ValueError(
                f"{M}={side} must divide both sides of the {H}x{W} {grid} "
                f"so that {side}x{side} windows tile it (pad the grid or "
                f"choose another {M})")

    return check
