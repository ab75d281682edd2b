"""How long grading takes: a synthetic class, and the cost of isolation.

``python -m selfattention_course.bench`` (part of ``make bench``)

1. grades the same few chapter-1 notebooks one at a time without isolation
   and in the sandbox, and prints the median time per notebook of each and
   their difference (the cost of isolation);
2. grades a synthetic class (100 students by default), each handing in
   the notebook of :ref:`ch-definition` (the solutions, the student
   version, or a solution with one mistake), ``--jobs`` at a time, and
   prints the wall time.

The budgets are 0.5 s of isolation per notebook and 5 minutes for a class
of 100 on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from .assign import build
from .cli import grade_folder
from .grade import Grader
from .intake import collect
from .sandbox import Bubblewrap, Limits, Unisolated, choose_backend

ISOLATION_BUDGET = 0.5
CLASS_BUDGET = 300.0


def _variants(chapter: Path, student: Path) -> list:
    right = nbformat.read(chapter, as_version=4)
    wrong = nbformat.read(chapter, as_version=4)
    stable = "np.exp(S - S.max(axis=-1, keepdims=True))"
    cells = [c for c in wrong.cells
             if "def my_tempered_attention" in c.source and stable in c.source]
    if not cells:
        raise SystemExit(f"{chapter.name}: no solution of "
                         f"my_tempered_attention to break")
    for cell in cells:                  # overflows at small temperatures
        cell.source = cell.source.replace(stable, "np.exp(S)")
    return [right, nbformat.read(student, as_version=4), wrong]


def synthetic_class(folder: Path, chapter: Path, student: Path,
                    size: int) -> None:
    """``size`` students, each with one chapter-1 notebook."""
    variants = _variants(chapter, student)
    for i in range(size):
        (folder / f"student{i:03d}").mkdir(parents=True)
        nbformat.write(variants[i % len(variants)],
                       folder / f"student{i:03d}" / "homework.ipynb")


def _start_cost(backend, tmp: Path, repeat: int = 20) -> float:
    """Extra seconds to start Python (and nbclient) in the sandbox."""
    job = tmp / "empty-job"
    job.mkdir(mode=0o755)
    command = backend.command(job, 0, Limits())
    code = ["-I", "-c", "import nbclient"]
    inside = command[:command.index("-I")] + code
    outside = [sys.executable, *code]
    paired = []
    for i in range(repeat):
        times = {}
        for name in (("in", "out") if i % 2 else ("out", "in")):
            start = time.perf_counter()
            subprocess.run(inside if name == "in" else outside, check=True,
                           capture_output=True)
            times[name] = time.perf_counter() - start
        paired.append(times["in"] - times["out"])
    return statistics.median(paired)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m selfattention_course."
                                          "bench", description=__doc__
                                     .split("\n")[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10,
                        help="notebooks timed for the cost of isolation")
    parser.add_argument("--chapter", type=Path,
                        default=Path("chapters/01_definition.ipynb"))
    args = parser.parse_args(argv)
    backend = choose_backend("auto")
    limits = Limits(cell_seconds=120, notebook_seconds=600)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        build([args.chapter], tmp / "assignments")
        manifest = tmp / "assignments" / "grader" / "manifest.json"
        student = tmp / "assignments" / "student" / args.chapter.name
        few = tmp / "few"
        synthetic_class(few, args.chapter, student, 1)
        (sub,) = collect(few)
        graders = {name: Grader(manifest, chosen, limits)
                   for name, chosen in (("none", Unisolated()),
                                        ("sandbox", backend))}
        times: dict[str, list[float]] = {"none": [], "sandbox": []}
        base = tmp / "jobs"
        base.mkdir()
        for i in range(args.repeat):          # alternate, to share the noise
            order = ["none", "sandbox"][::1 if i % 2 else -1]
            for name in order:
                times[name].append(graders[name].grade_one(sub, 0, base)
                                   .seconds)
        paired = [b - a for a, b in zip(times["none"], times["sandbox"])]
        cost = statistics.median(paired)
        print(f"one notebook of {args.chapter.stem}, one at a time, median "
              f"of {args.repeat} alternating runs:")
        print(f"  without isolation   "
              f"{statistics.median(times['none']):6.2f} s")
        print(f"  {backend.describe():18s}  "
              f"{statistics.median(times['sandbox']):6.2f} s")
        print(f"  cost of isolation   {cost:+6.2f} s   (median of the "
              f"paired differences; budget {ISOLATION_BUDGET} s)")
        if isinstance(backend, Bubblewrap):
            start_cost = _start_cost(backend, tmp)
            print(f"  starting a process in the sandbox adds {start_cost:+.3f} "
                  f"s (median of 20 paired starts)")
        group = tmp / "class"
        synthetic_class(group, args.chapter, student, args.students)
        start = time.monotonic()
        rows, graded = grade_folder(group, manifest, tmp / "book",
                                    backend=backend, limits=limits,
                                    jobs=args.jobs, echo=lambda *a: None)
        wall = time.monotonic() - start
        load = os.getloadavg()
        info = json.loads((tmp / "book" / "run.json").read_text())
        code = [[r for r in g.rows if not r.exercise.endswith("(written)")]
                for g in graded]          # written parts wait for a reader
        full = sum(all(r.points == r.max_points for r in rs) for rs in code)
        print(f"a class of {args.students} students x {args.chapter.stem}, "
              f"{args.jobs} jobs on {os.cpu_count()} cores: {wall:.0f} s "
              f"(budget {CLASS_BUDGET:.0f} s); {len(rows)} rows, {full} "
              f"notebooks with full marks on the code; "
              f"{info['graded_again_alone']} graded again alone; load "
              f"average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
              f"(1, 5, 15 min) at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
