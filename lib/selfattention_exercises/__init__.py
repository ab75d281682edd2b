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
``definition``          :ref:`ch-definition`
``scaling``             :ref:`ch-scaling`
``multihead``           :ref:`ch-multihead`
``masks``               :ref:`ch-masks`
``position``            :ref:`ch-position`
``transformer``         :ref:`ch-transformer`
``photographs``         :ref:`ch-photographs`
``cost``                :ref:`ch-cost`
``windows``             :ref:`ch-windows`
``nonlocal_block``      :ref:`ch-nonlocal`
``matching``            :ref:`ch-matching`
``misconceptions``      :ref:`ch-misconceptions`
======================  ==========================================
"""

from .core import Exercise, Feedback

__all__ = ["Exercise", "Feedback", "CORE_MODULES"]

#: The modules every exercise module builds on, in the order they import
#: each other: plain data, the tripwire, the feedback, the declaration.
#: No exercise is declared there, and none of their functions is a student
#: tool.
CORE_MODULES = ("plain", "tripwire", "feedback", "core")
