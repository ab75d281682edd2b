"""The exercises of the book, one module per chapter.

Each exercise is an :class:`~selfattention_exercises.core.Exercise`,
declared once: the check a student calls in the notebook
(``checks.check_softmax(my_softmax)``) and what the grader of
``selfattention_course`` runs on hidden cases. Their judges, case
generators and reference helpers are the grader's
(``selfattention_course.judges``, one module per chapter module here).
A check tries the answer on public cases and prints a specific message:
what is right, or the first thing that is wrong (a shape, a row that does
not sum to one, a missing ``√d_k``). It never raises in a notebook, so "Run
all" goes to the end even when an exercise is not done yet.

======================  ==========================================
module                  chapter
======================  ==========================================
``definition``          1 Definition
``scaling``             2 Scaling by √d_k
``multihead``           3 Multi-head attention
``masks``               4 Masks
``position``            5 Position and permutation equivariance
``cost``                7 Cost
``windows``             8 Windows and shifted windows
``nonlocal_block``      9 Non-local blocks
``matching``            10 Matching and motion
``misconceptions``      11 Misconceptions
======================  ==========================================
"""

from .core import Exercise, Feedback

__all__ = ["Exercise", "Feedback", "CORE_MODULES"]

#: The modules every exercise module builds on, in the order they import
#: each other: plain data, the tripwire, the feedback, the declaration.
#: No exercise is declared there, and none of their functions is a student
#: tool.
CORE_MODULES = ("plain", "tripwire", "feedback", "core")
