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
Exceptions raised by the student's own code are caught and reported.
"""

from __future__ import annotations

import functools
import json
import os
import traceback
from dataclasses import asdict, dataclass

__all__ = ["Feedback", "NotDone", "Wrong", "check", "results", "call"]

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
