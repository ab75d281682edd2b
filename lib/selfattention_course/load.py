"""Whether a run was cut short by its neighbours: the machine-load
heuristics behind a second grading (:meth:`Grader.grade_all
<selfattention_course.grade.Grader.grade_all>` with ``--jobs`` above one).

A notebook whose kernel died, or whose time limit stopped a kernel that got
less than half a processor, may have been starved by the runs graded beside
it (:func:`cut_short`); it is graded again alone when those runs kept the
processors busy meanwhile (:func:`starved_by_neighbours`). A notebook that
spins in an endless loop gets a whole processor and no second run.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .grade import Graded

__all__ = ["cores", "neighbours_load", "starved_by_neighbours", "cut_short"]


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def neighbours_load(g: Graded, graded: list[Graded]) -> float | None:
    """Processors the other runs used on average while ``g`` ran.

    Each neighbour's processor time is spread evenly over its own run and
    counted for the part that overlaps ``g``'s. None when ``g``'s run was
    not timed.
    """
    if g.started is None or g.ended is None or g.ended <= g.started:
        return None
    used = 0.0
    for other in graded:
        if other is g or other.started is None or other.ended is None \
                or other.cpu is None or other.ended <= other.started:
            continue
        overlap = min(g.ended, other.ended) - max(g.started, other.started)
        if overlap > 0:
            used += other.cpu * overlap / (other.ended - other.started)
    return used / (g.ended - g.started)


def starved_by_neighbours(g: Graded, graded: list[Graded],
                          cores: int) -> bool:
    """Whether the runs beside ``g`` left it less than half a processor."""
    load = neighbours_load(g, graded)
    return load is not None and load >= cores - 0.5


def cut_short(why_none, report: dict) -> bool:
    """Whether another job could have caused the end of this run: the
    kernel died, or a time limit stopped a kernel that got less than half
    a processor while it ran into it (a notebook that spins in an endless
    loop gets a whole one, and deserves no second run)."""
    if why_none:
        return True
    stopped = report.get("stopped")
    stopped = stopped if isinstance(stopped, dict) else {}
    harvest = report.get("harvest")
    harvest = harvest if isinstance(harvest, dict) else {}
    shares = report.get("shares")
    shares = shares if isinstance(shares, dict) else {}
    why = stopped.get("why")
    if why in ("dead kernel", "start") or "dead" in harvest.values():
        return True
    starved = [stopped.get("share")] if why == "timeout" else []
    starved += [shares.get(key) for key, status in harvest.items()
                if status == "timeout"]
    if why == "deadline" or "deadline" in harvest.values():
        cpu, wall = report.get("cpu"), report.get("seconds")
        ok = isinstance(cpu, (int, float)) and \
            isinstance(wall, (int, float)) and wall > 0
        starved.append(cpu / wall if ok else None)
    return any(not isinstance(share, (int, float)) or share < 0.5
               for share in starved)
