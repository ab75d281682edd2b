"""The command line of the grader (``selfattention-grade``; ``make grade
SUBMISSIONS=folder``) and the grading of a class: :func:`grade_folder`
grades every notebook of a folder (:class:`~selfattention_course.grade.
Grader`), :func:`assemble` turns the graded notebooks into the gradebook's
rows, and :func:`main` reads the options (see
:mod:`selfattention_course.grade` for what grading does).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import gradebook
from .grade import Graded, Grader
from .gradebook import Row, status_code
from .intake import IntakeError, collect, mixed_scripts
from .names import MARKS, NOT_DONE, NOT_GRADED, REFUSED
from .notebook import MAX_NOTEBOOK
from .sandbox import (EXPOSED, Limits, NoSandbox, cgroup_support,
                      choose_backend)

__all__ = ["assemble", "grade_folder", "main", "NothingGraded"]


def assemble(graded: list[Graded], chapters: dict, only=None):
    """Rows of the gradebook, notes per student and the written answers."""
    students = sorted({g.student for g in graded})
    wanted = only or sorted({g.chapter for g in graded if g.chapter})
    rows: list[Row] = []
    notes: dict[str, list[str]] = {s: [] for s in students}
    counted: dict[tuple[str, str], Graded] = {}
    for g in graded:
        if g.chapter is None:
            continue
        key = (g.student, g.chapter)
        if key in counted:
            # The lower counts: handing in variants must not pay.
            keep, drop = sorted([counted[key], g], key=lambda x: x.total)
            notes[g.student].append(
                f"Two notebooks for {g.chapter}: {keep.name} "
                f"({keep.total:g} points) counts, not {drop.name} "
                f"({drop.total:g} points); the lower counts, so hand in "
                f"one notebook per chapter.")
            counted[key] = keep
        else:
            counted[key] = g
    for g in counted.values():
        g.counted = True
    for student in students:
        for stem in wanted:
            g = counted.get((student, stem))
            if g is None:
                for ex in chapters[stem]["exercises"]:
                    rows.append(Row(student, stem, ex["label"], 0.0,
                                    float(ex["points"]),
                                    f"{MARKS[NOT_GRADED]}: no notebook of "
                                    f"this chapter was handed in",
                                    code="no-notebook", status=NOT_GRADED))
            else:
                rows += g.rows
        for g in graded:
            if g.student == student and g.chapter is None:
                status = REFUSED if g.refused else NOT_GRADED
                rows += [Row(student, "", "", 0.0, 0.0,
                             f"{MARKS[status]}: {p}",
                             code=getattr(p, "code", status_code(status)),
                             status=status)
                         for p in g.problems]
    for student in students:
        scripts = mixed_scripts(student)
        if not scripts:
            continue
        flag = (f" [name check: this student's name mixes "
                f"{' and '.join(w.title() for w in scripts)} letters, so it "
                f"can look like another name; compare it with your roster]")
        for row in rows:
            if row.student == student:
                if row.for_student is None:
                    row.for_student = row.feedback
                row.feedback += flag
                row.flags += ("mixed-scripts",)
    written: dict[str, list] = {}
    for stem in wanted:
        for ex in chapters[stem]["exercises"]:
            if not ex.get("written"):
                continue
            answers = [(s, counted[(s, stem)].written.get(ex["label"], ""))
                       for s in students if (s, stem) in counted]
            written.setdefault(stem, []).append(
                (ex["label"], ex["written"]["prompt"],
                 ex["written"]["rubric"], answers))
    return rows, students, notes, written


def grade_folder(folder: Path, manifest: Path, out: Path, *, backend=None,
                 limits: Limits | None = None, jobs: int = 1, only=None,
                 seed: int | None = None, echo=print, python_path=(),
                 figures: bool = False, regrade_budget: int | None = None):
    """Grade every notebook under ``folder`` into the gradebook ``out``.

    Returns ``(rows, graded)``; raises :class:`NothingGraded` (and leaves
    ``out`` as it was) when no notebook could be graded.
    """
    limits = limits or Limits()
    backend = backend or choose_backend("auto", python_path)
    grader = Grader(manifest, backend, limits, seed, jobs, echo, python_path,
                    figures, regrade_budget)
    unknown = [c for c in (only or []) if c not in grader.chapters]
    if unknown:
        raise NothingGraded(f"unknown chapters {unknown}; known: "
                            f"{sorted(grader.chapters)}")
    submissions = collect(folder, MAX_NOTEBOOK)
    started = time.monotonic()
    graded = grader.grade_all(submissions)
    if not any(g.chapter for g in graded):
        reasons = [f"{g.student}: {p}" for g in graded for p in g.problems]
        raise NothingGraded("no notebook could be graded" + (
            ": " + "; ".join(reasons[:10]) if reasons else
            f": {folder} holds no notebook"))
    rows, students, notes, written = assemble(graded, grader.chapters, only)
    titles = {stem: ch["title"] for stem, ch in grader.chapters.items()}
    info = {"seed": grader.seed, "backend": backend.describe(),
            "limits": limits.as_dict(), "jobs": jobs,
            "notebooks": len(graded),
            "graded": sum(bool(g.chapter) for g in graded),
            "graded_again_alone": grader.regraded,
            "regrade_budget": grader.budget(len(submissions)),
            "starved_over_budget": grader.not_regraded,
            "cgroups": _cgroup_note(backend),
            "seconds": round(time.monotonic() - started, 2),
            # What --written needs to merge scoresheets into this gradebook.
            "titles": titles,
            "written_parts": {stem: {ex["label"]: ex["written"]["points"]
                                     for ex in ch["exercises"]
                                     if ex.get("written")}
                              for stem, ch in grader.chapters.items()
                              if stem in {r.chapter for r in rows}}}
    gradebook.write(out, rows, students, graded, notes, titles, written,
                    info)
    return rows, graded


def _cgroup_note(backend) -> str:
    """How the jobs' memory and processes are capped, in one line."""
    if getattr(backend, "engine", None):
        return f"{backend.engine}'s own (--memory, --pids-limit)"
    version, where = cgroup_support()
    if version:
        return f"cgroup {version} ({where}): memory and processes per job"
    return (f"none: {where}; each process keeps its own limits (address "
            f"space, processes of its user id) but a job as a whole is not "
            f"capped")


class NothingGraded(RuntimeError):
    """The run graded no notebook; nothing was written."""


def verify_students(folder: Path, manifest: Path, backend, limits: Limits,
                    jobs: int = 1, echo=print) -> int:
    """Grade the student notebooks themselves: 0 if every one runs to the
    end with no error and every exercise not done."""
    grader = Grader(manifest, backend, limits, None, jobs, lambda *a: None)
    failed = 0
    for g in grader.grade_all(collect(folder, MAX_NOTEBOOK)):
        problems = list(g.problems) + [
            f"{r.exercise}: {r.feedback}" for r in g.rows
            if r.status != NOT_DONE
            and r.max_points > 0]        # (none without auto-points runs)
        echo(f"{g.name:26s} " + ("; ".join(problems) if problems else
                                 "runs to the end, every exercise not done"))
        failed += bool(problems) or g.chapter is None
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="selfattention-grade",
        description="Grade a folder of submitted notebooks, each in a "
                    "sandbox.")
    parser.add_argument("submissions", type=Path, nargs="?",
                        help="folder of <student>/<any name>.ipynb (or of "
                             "<student>.ipynb)")
    parser.add_argument("--out", type=Path, default=Path("gradebook"),
                        help="the gradebook folder (default gradebook/)")
    parser.add_argument("--manifest", type=Path,
                        default=Path("assignments/grader/manifest.json"),
                        help="written by `make assignments`")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds each cell may run (default 60)")
    parser.add_argument("--notebook-timeout", type=float, default=600,
                        help="seconds a whole notebook may take, harvest "
                             "included (default 600)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks graded at the same time (default 1)")
    parser.add_argument("--chapters", nargs="*",
                        help="chapter files to grade, e.g. 01_definition "
                             "(default: every chapter handed in)")
    parser.add_argument("--sandbox", default="auto",
                        choices=["auto", "bwrap", "docker", "podman",
                                 "none"],
                        help="isolation of each notebook (default auto: "
                             "bubblewrap, else docker or podman); 'none' "
                             "runs students' code as you, with your files "
                             "and the network, and needs --exposing")
    parser.add_argument("--exposing", default="",
                        metavar=",".join(EXPOSED),
                        help="with --sandbox none only: say that you accept "
                             "what it exposes to every notebook, by naming "
                             "all of it: " + ",".join(EXPOSED))
    parser.add_argument("--regrade-budget", type=int, default=None,
                        metavar="N",
                        help="with --jobs > 1: at most N notebooks that a "
                             "neighbour starved are graded again alone "
                             "(default: one in ten, at least one)")
    parser.add_argument("--image", default="selfattention-grader",
                        help="container image of the docker/podman backend")
    parser.add_argument("--python-path", nargs="*", default=[],
                        metavar="DIR",
                        help="folders of extra exercise modules, made "
                             "visible (read-only) to the notebooks")
    parser.add_argument("--memory", type=float, default=3.0,
                        help="GB of memory per process (default 3)")
    parser.add_argument("--job-memory", type=float, default=3.0,
                        help="GB of memory for each notebook's job as a "
                             "whole, /tmp included (default 3; needs a "
                             "writable cgroup hierarchy)")
    parser.add_argument("--figures", action="store_true",
                        help="keep the figures in the executed notebooks "
                             "(slower)")
    parser.add_argument("--seed", type=int,
                        help="seed of the hidden cases (default: a secret "
                             "one, recorded in run.json)")
    parser.add_argument("--written", type=Path, metavar="SCORES",
                        help="merge the filled scoresheets SCORES/<chapter>"
                             ".csv (copied from the gradebook's scores/) "
                             "into the gradebook; without SUBMISSIONS, into "
                             "the gradebook --out as it is")
    parser.add_argument("--verify", action="store_true",
                        help="instead of grading, check that the student "
                             "notebooks (default assignments/student) run "
                             "to the end with every exercise not done")
    args = parser.parse_args(argv)
    if args.written and args.submissions is None and not args.verify:
        return _merge_written(args.out, args.written)
    if not args.manifest.exists():
        parser.error(f"no manifest {args.manifest}: run `make assignments`")
    if args.sandbox == "none":
        named = {w.strip() for w in args.exposing.split(",") if w.strip()}
        if named != set(EXPOSED):
            print("error: --sandbox none runs every student's code as you, "
                  "with no isolation: it can read your files (the "
                  "solutions among them), reach the network and read or "
                  "change the other submissions. If you accept that, add "
                  f"--exposing {','.join(EXPOSED)}", file=sys.stderr)
            return 2
    elif args.exposing:
        parser.error("--exposing goes with --sandbox none only")
    for path in args.python_path:
        sys.path.insert(0, str(Path(path).resolve()))
    limits = Limits(cell_seconds=args.timeout,
                    notebook_seconds=args.notebook_timeout,
                    memory_bytes=int(args.memory * 2 ** 30),
                    job_memory_bytes=int(args.job_memory * 2 ** 30))
    try:
        backend = choose_backend(args.sandbox, args.python_path, args.image)
    except NoSandbox as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.sandbox == "none":
        print("warning: --sandbox none: students' code runs as you, with "
              "your files, the other submissions and the network",
              file=sys.stderr)
    note = _cgroup_note(backend)
    if note.startswith("none"):
        print(f"warning: no control group per job: {note[6:]}",
              file=sys.stderr)
    if args.verify:
        folder = args.submissions or args.manifest.parent.parent / "student"
        return verify_students(folder, args.manifest, backend, limits,
                               args.jobs)
    if args.submissions is None:
        parser.error("give the folder of submissions")
    try:
        rows, graded = grade_folder(
            args.submissions, args.manifest, args.out, backend=backend,
            limits=limits, jobs=args.jobs, only=args.chapters,
            seed=args.seed, python_path=args.python_path,
            figures=args.figures, regrade_budget=args.regrade_budget)
    except (IntakeError, NothingGraded) as err:
        print(f"error: {err}; the gradebook was not changed",
              file=sys.stderr)
        return 1
    print(f"{len(rows)} gradebook rows in {args.out / 'gradebook.csv'} "
          f"(for Canvas: canvas.csv, for Moodle: moodle.csv), feedback in "
          f"{args.out / 'feedback'} (sandbox: {backend.describe()})")
    if args.written:
        return _merge_written(args.out, args.written)
    return 0


def _merge_written(out: Path, scores: Path) -> int:
    """``--written``: merge scoresheets into the gradebook ``out``."""
    from .written import SCORED, ScoresheetError, merge

    try:
        rows = merge(out, scores)
    except (ScoresheetError, OSError) as err:
        print(f"error: {err}\nThe gradebook {out} was not changed.",
              file=sys.stderr)
        return 1
    scored = sum(r.code == SCORED for r in rows)
    print(f"{scored} written parts scored in {out / 'gradebook.csv'}, "
          f"canvas.csv and moodle.csv")
    return 0
