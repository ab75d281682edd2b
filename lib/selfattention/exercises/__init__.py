"""Checks that students call in the exercises, one module per chapter.

A check takes the student's answer (usually a function), tries it on cases
it builds itself, and prints a specific message: what is right, or the first
thing that is wrong (a shape, a row that does not sum to one, a missing
``√d_k``). It never raises in a notebook, so "Run all" goes to the end even
when an exercise is not done yet.

Every check prints a :class:`Feedback` and records it; the grader reads the
same results
(see :mod:`selfattention.exercises.core` and the page for instructors).

======================  ==========================================
module                  chapter
======================  ==========================================
``definition``          1 Definition
``scaling``             2 Scaling by √d_k
``multihead``           3 Multi-head attention
``masks``               4 Masks
``position``            5 Position and permutation equivariance
``cost``                6 Cost
``windows``             7 Windows and shifted windows
``nonlocal_block``      8 Non-local blocks
``matching``            9 Matching and motion
``misconceptions``      10 Misconceptions
======================  ==========================================
"""

from .core import Feedback, results

__all__ = ["Feedback", "results"]
