"""What every exercise check shares: its result and how it is reported.

A check is a function decorated with :func:`check`. It receives the
student's answer and either returns normally (correct) or raises one of

* :class:`NotDone` - the answer is still the starter (``None``, ``...``, or a
  function whose body was left as ``pass``);
* :class:`Wrong` - the answer is wrong; its message says what to fix.

The decorator turns the outcome into a :class:`Feedback`, prints it (and
returns nothing, so a check as a cell's last line shows one message), records
it in :func:`results`, and, when the environment variable
``SELFATTENTION_RESULTS`` names a file, appends it there as one JSON line
(that is how the grader collects scores from an executed notebook).
Exceptions raised by the student's own code are caught and reported, and so is
an answer of a type the check cannot read: a check never raises.

Small helpers turn an answer into what a check compares, with the same
wording in every chapter: :func:`answered` (a value exercise's starter),
:func:`int_pair`, :func:`returned_array`, :func:`returned_arrays` and
:func:`expect_shape`.
"""

from __future__ import annotations

import functools
import json
import os
import traceback
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Feedback", "NotDone", "Wrong", "check", "results", "call",
           "answered", "int_pair", "returned_array", "returned_arrays",
           "expect_shape"]

_RESULTS: dict[str, "Feedback"] = {}


@dataclass(frozen=True)
class Feedback:
    """The outcome of one check.

    Attributes
    ----------
    exercise : str
        The exercise's label in the book, e.g. ``"ex-definition-softmax"``.
    status : str
        ``"correct"``, ``"wrong"`` or ``"not done"``.
    message : str
        What is right, or the first thing that is wrong.
    points : float
        Points earned (``max_points`` if correct, else 0).
    max_points : float
        Points the exercise is worth.
    """

    exercise: str
    status: str
    message: str
    points: float
    max_points: float

    @property
    def passed(self) -> bool:
        return self.status == "correct"

    def __str__(self) -> str:
        mark = {"correct": "Correct", "wrong": "Not yet",
                "not done": "Not attempted"}[self.status]
        return f"[{self.exercise}] {mark}: {self.message}"


class NotDone(Exception):
    """The answer is still the starter code."""


class Wrong(Exception):
    """The answer is wrong; the message says what to fix."""


def results() -> dict[str, Feedback]:
    """The latest feedback for every exercise checked in this session."""
    return dict(_RESULTS)


def call(fn, *args, what: str = "your function"):
    """Call student code; turn its crash into :class:`Wrong` with the reason.

    ``NotImplementedError`` counts as not done.
    """
    if fn is None or fn is Ellipsis:
        raise NotDone("the answer is still empty; write it in the cell above")
    if not callable(fn):
        raise Wrong(f"{what} should be a function, got {type(fn).__name__}")
    try:
        out = fn(*args)
    except NotImplementedError:
        raise NotDone("the function still raises NotImplementedError") from None
    except Exception as err:  # the student's bug, reported not raised
        frame = traceback.extract_tb(err.__traceback__)[-1]
        raise Wrong(
            f"{what} raised {type(err).__name__}: {err} "
            f"(line {frame.lineno}: {frame.line})"
        ) from None
    if out is None:
        raise NotDone(f"{what} returned None; fill in its body")
    return out


def answered(value, expected: str, name: str = "answer"):
    """Return ``value``, or raise :class:`NotDone` while it is the starter.

    A value exercise starts from ``answer = None`` (or ``...``); the message
    asks to set ``name`` to ``expected``, e.g. ``"a pair (row, col)"``.
    """
    if value is None or value is Ellipsis:
        raise NotDone(f"`{name}` is still empty; set it to {expected}")
    return value


def int_pair(value, wrong: str) -> tuple[int, int]:
    """``value`` as a pair of ints, or :class:`Wrong` saying ``wrong``.

    The message is ``wrong`` followed by ``", got <repr of value>"``, e.g.
    ``int_pair(answer, "answer should be a pair (row, col)")``.
    """
    try:
        a, b = (int(v) for v in value)
    except (TypeError, ValueError):
        raise Wrong(f"{wrong}, got {value!r}") from None
    return a, b


def returned_array(out, what: str, kind: str = "an array of numbers"):
    """What ``what`` returned, as a float array, or :class:`Wrong`.

    The message reads "``what`` should return ``kind``, got <type>".
    """
    try:
        return np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise Wrong(f"{what} should return {kind}, got "
                    f"{type(out).__name__}") from None


def returned_arrays(out, count: int, wrong: str, dtype=float) -> tuple:
    """The ``count`` arrays a student function returns as a tuple.

    Raises :class:`Wrong` with the message ``wrong`` unless ``out`` is a
    tuple of ``count`` items; each becomes an array of ``dtype`` (``None``
    keeps the dtype that NumPy infers).
    """
    if not (isinstance(out, tuple) and len(out) == count):
        raise Wrong(wrong)
    return tuple(np.asarray(a, dtype=dtype) for a in out)


def expect_shape(arr, name: str, want: tuple, legend: str,
                 why: str = "") -> None:
    """Raise :class:`Wrong` unless ``arr`` has the shape ``want``.

    The message reads "``name`` has shape <shape>, expected ``legend`` =
    ``want``", followed by ``": why"`` if ``why`` is given; ``legend`` names
    the sizes, e.g. ``"(n_q, n_k)"``.
    """
    if arr.shape != want:
        raise Wrong(f"{name} has shape {arr.shape}, expected {legend} = "
                    f"{want}" + (f": {why}" if why else ""))


def check(exercise: str, points: float = 1.0, success: str = ""):
    """Decorator that makes a function into a reported exercise check."""

    def wrap(body):
        @functools.wraps(body)
        def run(*args, **kwargs) -> None:
            try:
                note = body(*args, **kwargs)
                fb = Feedback(exercise, "correct", note or success, points,
                              points)
            except NotDone as err:
                fb = Feedback(exercise, "not done", str(err), 0.0, points)
            except Wrong as err:
                fb = Feedback(exercise, "wrong", str(err), 0.0, points)
            except Exception as err:  # an answer of a type the check can't read
                fb = Feedback(
                    exercise, "wrong",
                    f"the answer could not be checked ({type(err).__name__}: "
                    f"{err}); look at its type and shape", 0.0, points)
            _record(fb)
            print(fb)

        run.exercise = exercise
        run.points = points
        return run

    return wrap


def _record(fb: Feedback) -> None:
    _RESULTS[fb.exercise] = fb
    path = os.environ.get("SELFATTENTION_RESULTS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(fb)) + "\n")
