"""Plain data: what may cross from a student's kernel to the grader, and
what a judge receives, in the notebook and in the grader alike.

``None``, bools, ints, floats, strings, tuples and lists of plain data, and
NumPy arrays of bools, numbers or strings, within fixed sizes
(:func:`to_plain`); anything else becomes an :class:`Opaque` marker that
only carries its type's name. :func:`holds_nan` finds the NaN that no
judge may be fooled by.
"""

from __future__ import annotations

import math

import numpy as np


# Bounds of plain data: what one output may hold.
MAX_ARRAY_ITEMS = 4_000_000


MAX_STR = 10_000


MAX_ITEMS = 10_000


MAX_DEPTH = 8


class Opaque:
    """Stands for a value that is not plain data; keeps its type's name."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = str(type_name)[:80]

    def __eq__(self, other) -> bool:
        return isinstance(other, Opaque) and other.type_name == self.type_name

    def __hash__(self) -> int:
        return hash(("Opaque", self.type_name))

    def __repr__(self) -> str:
        return f"Opaque({self.type_name!r})"


class Missing:
    """An answer name that the notebook never defined."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Missing({self.name!r})"


_ARRAY_KINDS = "biufU"


_INT64 = 2 ** 63


def type_name(value) -> str:
    """The type name a message shows for ``value`` (or what it stood for)."""
    if isinstance(value, Opaque):
        return value.type_name
    return type(value).__name__


def to_plain(value, _depth: int = 0):
    """``value`` as plain data; anything else becomes :class:`Opaque`.

    Types are matched exactly (a subclass of ``tuple`` or of ``ndarray`` is
    not plain), so converting never runs a method of the value itself.
    ``...`` (a value answer's starter) becomes ``None``. Python ints beyond
    64 bits become floats; strings, sequences and arrays beyond fixed sizes
    become :class:`Opaque`.
    """
    kind = type(value)
    if value is None or kind is bool or kind is float:
        return value
    if value is Ellipsis:                 # the starter of a value answer
        return None
    if kind is Opaque:
        return value
    if kind is int:
        return value if -_INT64 <= value < _INT64 else _big_int(value)
    if kind is str:
        return value if len(value) <= MAX_STR else Opaque("str (too long)")
    if isinstance(value, np.generic) and kind is not np.object_:
        if value.dtype.kind in _ARRAY_KINDS:
            return to_plain(value.item(), _depth)
        return Opaque(kind.__name__)
    if kind is np.ndarray:
        if value.dtype.kind not in _ARRAY_KINDS:
            return Opaque(f"ndarray of {value.dtype.name}")
        if value.size > MAX_ARRAY_ITEMS:
            return Opaque("ndarray (too large)")
        return np.array(value, dtype=value.dtype.newbyteorder("="))
    if kind is tuple or kind is list:
        if _depth >= MAX_DEPTH or len(value) > MAX_ITEMS:
            return Opaque(f"{kind.__name__} (too large)")
        items = [to_plain(v, _depth + 1) for v in value]
        return tuple(items) if kind is tuple else items
    return Opaque(kind.__name__)


def _nan_text(text: str) -> bool:
    return text.strip().lower().lstrip("+-") == "nan"


def holds_nan(value, words: bool = True, _depth: int = 0) -> bool:
    """Whether plain data holds a NaN, or (``words``) a string that reads
    as one.

    A correct output never does; a judge that compares with ``abs(a - b) >
    tol`` would let NaN through, so :meth:`.Exercise.assess` rejects it
    whatever the judge says.
    """
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        return words and _nan_text(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            return bool(np.isnan(value).any())
        if words and value.dtype.kind == "U" and value.size:
            return any(_nan_text(str(v)) for v in np.unique(value))
        return False
    if isinstance(value, (tuple, list)) and _depth <= MAX_DEPTH:
        return any(holds_nan(v, words, _depth + 1) for v in value)
    return False


def _big_int(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
