"""A finding of the source review: where, what, and how it reads in a
gradebook row."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One reason to send an answer for review.

    ``kind`` is ``"reference"`` (the exercise's reference or a shortcut),
    ``"judge"`` (a copy of a function the grader computes the answer
    with), ``"checks" (the checks' own code), ``"dynamic"`` or ``"hook"``;
    ``cell`` counts code and text cells from 1, ``line`` counts lines of the
    cell from 1; ``text`` is that line.
    """

    kind: str
    cell: int
    line: int
    text: str
    what: str

    def quote(self) -> str:
        text = self.text.strip()
        text = text if len(text) <= 100 else text[:97] + "..."
        return f"cell {self.cell}, line {self.line}: `{text}` {self.what}"


def cell_digest(source: str) -> str:
    """The digest by which an unchanged cell of the student version is
    recognised (the manifest lists those of each chapter)."""
    return hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()


def explain(findings: list[Finding]) -> str:
    """The feedback of an answer sent for review: the first finding quoted,
    and how many more there are."""
    first = findings[0]
    more = len(findings) - 1
    return (f"{first.quote()}. Auto-points go only to answers that do the "
            f"work in plain code; the instructor reviews this one"
            + (f" ({more} more place(s) flagged)" if more else ""))


def diagnosis(findings: list[Finding]) -> str:
    """The gradebook's code of an answer sent for review from its source:
    ``review-`` and the kind of the finding that :func:`explain` quotes
    (``review-reference``, ``review-judge``, ``review-checks``,
    ``review-dynamic``, ``review-hook``). The notebook's own check, which
    sees only what the kernel reports, says ``for-review``."""
    return f"review-{findings[0].kind}"
