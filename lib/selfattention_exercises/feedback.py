"""The outcome of an exercise: its status, how each status reads
(:data:`MARKS`), and the :class:`Feedback` a check shows in the notebook and
the grader writes into a gradebook row."""

from __future__ import annotations

import html
import os
import sys
from dataclasses import dataclass

__all__ = ["Feedback", "MARKS", "CORRECT", "WRONG", "NOT_DONE", "FOR_REVIEW",
           "NOT_GRADED", "TO_BE_READ", "REFUSED", "GRADING_ENV"]

#: Set in the grader's kernels: the notebook's own checks then judge nothing.
GRADING_ENV = "SELFATTENTION_GRADING"


#: Status of an exercise in a notebook check or in the gradebook.
CORRECT = "correct"


WRONG = "wrong"


NOT_DONE = "not done"


FOR_REVIEW = "for review"          # the answer calls the library's reference


NOT_GRADED = "not graded"          # the grader could not read an answer


TO_BE_READ = "to be read"          # a written answer, for the instructor


REFUSED = "refused"                # a submitted file the grader won't open


#: How each status opens a message.
MARKS = {CORRECT: "Correct", WRONG: "Not yet", NOT_DONE: "Not attempted",
         FOR_REVIEW: "For review", NOT_GRADED: "Not graded",
         TO_BE_READ: "To be read", REFUSED: "Refused"}


@dataclass(frozen=True)
class Feedback:
    """The outcome of one exercise.

    Attributes
    ----------
    exercise : str
        The exercise's label in the book, e.g. ``"ex-definition-softmax"``.
    status : str
        One of the statuses of this module (:data:`MARKS` lists them).
    message : str
        What is right, or the first thing that is wrong.
    points : float
        Points earned (``max_points`` if correct, else 0).
    max_points : float
        Points the exercise is worth.
    code : str
        The diagnosis, stable across rewordings: the :class:`.Wrong`'s
        ``code`` for a wrong answer, else the status in one word
        (``"correct"``, ``"not-done"``, ``"for-review"``...).
    """

    exercise: str
    status: str
    message: str
    points: float
    max_points: float
    code: str = ""

    @property
    def passed(self) -> bool:
        return self.status == CORRECT

    def __str__(self) -> str:
        return f"[{self.exercise}] {MARKS[self.status]}: {self.message}"

    def _repr_html_(self) -> str:
        # JupyterLab and Notebook 7 show printed text in a <pre> styled
        # `word-break: break-all` (@jupyterlab/outputarea, style/base.css),
        # which wraps a long line in the middle of a word. A block of its
        # own wraps between words; the message may quote a student's
        # error text, so it is escaped.
        return ('<div class="sa-feedback" style="white-space: pre-wrap; '
                'overflow-wrap: break-word; word-break: normal; '
                'font-family: var(--jp-code-font-family, monospace); '
                'font-size: var(--jp-code-font-size, 13px)">'
                f"{html.escape(str(self))}</div>")

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))      # the plain form a notebook keeps


def _show(feedback: Feedback) -> None:
    """Display ``feedback`` in a notebook (as HTML, with its text as the
    plain form), print it anywhere else. In the grader's kernel it is
    printed: the executed notebook keeps text outputs only."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or os.environ.get(GRADING_ENV):
        print(feedback)
        return
    from IPython.display import display

    display(feedback)
