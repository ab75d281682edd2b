"""Grade a folder of submitted notebooks (``make grade SUBMISSIONS=folder``).

Layout: ``SUBMISSIONS/<student>/<any name>.ipynb``, one notebook per chapter
(a student may hand in several chapters). For each notebook the grader

1. finds its chapter from the metadata the student version carries, or else
   from the exercise labels in its text (so a renamed file, or the chapter
   itself, is still recognised);
2. puts back the chapter's own check cells (a student cannot change what is
   checked), copies the notebook into an empty folder and runs it top to
   bottom in a fresh kernel with nbclient: errors do not stop the run, each
   cell has a time limit, and a cell that exceeds it (an endless loop) or a
   kernel that dies stops that notebook only;
3. collects every check's result: the checks of
   :mod:`selfattention.exercises` append one JSON line per result to the file
   named by ``SELFATTENTION_RESULTS``, which is set for the kernel;
4. scores each exercise with its latest result. An exercise whose check never
   ran scores 0 and the feedback says why (the cell that timed out, the error
   that stopped the check, a removed check cell).

It writes ``<out>/gradebook.csv`` (student, chapter, exercise, points,
max_points, feedback), ``<out>/feedback/<student>.md`` and the executed
notebooks under ``<out>/executed/<student>/`` for a closer look. A broken
notebook is reported in its rows and never stops the run.

Usage: python scripts/grade.py SUBMISSIONS [--out gradebook]
       [--manifest assignments/grader/manifest.json] [--timeout 60] [--jobs 2]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assignments import EXERCISE_RE, META, ROOT, calls  # noqa: E402

KERNEL = "python3"
RESULTS_VAR = "SELFATTENTION_RESULTS"
MARKS = {"correct": "Correct", "wrong": "Not yet",
         "not done": "Not attempted"}


# ------------------------------------------------------------------ results
@dataclass
class Row:
    """One line of the gradebook."""

    student: str
    chapter: str
    exercise: str
    points: float
    max_points: float
    feedback: str


@dataclass
class Graded:
    """What grading one notebook produced."""

    student: str
    path: str
    chapter: str | None = None          # the chapter's file stem
    matched_by: str = ""
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    executed: str | None = None         # the executed notebook (JSON)

    @property
    def total(self) -> float:
        return sum(r.points for r in self.rows)


def load_manifest(path: Path) -> dict[str, dict]:
    """The manifest's chapters by file stem."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {ch["file"]: ch for ch in data["chapters"]}


# ------------------------------------------------------------------ matching
def identify(nb, chapters: dict[str, dict]) -> tuple[str | None, str]:
    """The chapter (file stem) a notebook belongs to, and how it was found.

    The student version stores its chapter in ``metadata.selfattention``;
    failing that (metadata lost, or the chapter itself handed in) the
    exercise labels in the markdown decide, then the check calls in the code.
    """
    meta = nb.metadata.get(META, {})
    for stem, ch in chapters.items():
        if meta.get("chapter") == ch["chapter"]:
            return stem, "notebook metadata"
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    labels = set(EXERCISE_RE.findall(text))
    best = max(chapters.values(), default=None, key=lambda ch: len(
        labels & {ex["label"] for ex in ch["exercises"]}))
    if best and labels & {ex["label"] for ex in best["exercises"]}:
        return best["file"], "exercise labels"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    best = max(chapters.values(), default=None, key=lambda ch: sum(
        calls(code, ex["check"].rsplit(".", 1)[1]) for ex in ch["exercises"]))
    if best and any(calls(code, ex["check"].rsplit(".", 1)[1])
                    for ex in best["exercises"]):
        return best["file"], "check calls"
    return None, ""


def check_cells(nb, chapter: dict) -> dict[str, int]:
    """Index of the cell that runs each exercise's check.

    Cells marked in the metadata come first; otherwise the first code cell
    that calls the check function after the exercise's answer cell.
    """
    found: dict[str, int] = {}
    for i, cell in enumerate(nb.cells):
        label = cell.metadata.get(META, {}).get("check")
        if cell.cell_type == "code" and label and label not in found:
            found[label] = i
    for ex in chapter["exercises"]:
        if ex["label"] in found:
            continue
        name = ex["check"].rsplit(".", 1)[1]
        answers = [i for i, c in enumerate(nb.cells)
                   if c.get("id") in ex["answer_cells"]
                   or c.metadata.get(META, {}).get("answer") == ex["label"]]
        start = max(answers, default=-1) + 1
        for i in range(start, len(nb.cells)):
            cell = nb.cells[i]
            if cell.cell_type == "code" and calls(cell.source, name):
                found[ex["label"]] = i
                break
    return found


def first_line(source: str) -> str:
    lines = [ln.strip() for ln in source.splitlines() if ln.strip()]
    text = lines[0] if lines else "(empty)"
    return text if len(text) <= 60 else text[:57] + "..."


def describe(nb, index: int) -> str:
    return f"cell {index + 1} (`{first_line(nb.cells[index].source)}`)"


def errors(nb) -> list[tuple[int, str]]:
    """(cell index, "Name: value") for every cell that raised."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.output_type == "error":
                value = str(out.get("evalue", "")).strip().splitlines()
                found.append((i, f"{out.ename}: {value[0] if value else ''}"
                              .rstrip(": ")))
    return found


# ------------------------------------------------------------------ running
def run(nb, timeout: float, kernel: str = KERNEL):
    """Execute ``nb`` in place in an empty folder; return its check results.

    Returns the list of results the checks recorded (dicts of
    :class:`selfattention.exercises.core.Feedback`), and ``None`` if the run
    reached the end, else ``(why, index of the cell where it stopped)``.
    """
    reached = {"cell": None}

    def on_start(cell, cell_index):
        reached["cell"] = cell_index

    with tempfile.TemporaryDirectory(prefix="selfattention-grade-") as tmp:
        results = Path(tmp) / "results.jsonl"
        work = Path(tmp) / "work"
        work.mkdir()
        env = dict(os.environ)
        env[RESULTS_VAR] = str(results)
        client = NotebookClient(
            nb, timeout=timeout, kernel_name=kernel, allow_errors=True,
            interrupt_on_timeout=False, record_timing=False,
            on_cell_start=on_start,
            resources={"metadata": {"path": str(work)}})
        stopped = None
        try:
            # the kernel's own log (not the notebook's output) is discarded
            client.execute(env=env, stderr=subprocess.DEVNULL)
        except CellTimeoutError:
            stopped = (f"was still running after {timeout:g} s and was "
                       f"stopped (an endless loop?)")
        except DeadKernelError:
            stopped = "made the kernel die (it crashed or exited)"
        except Exception as err:             # report, never stop the run
            stopped = f"failed to run: {type(err).__name__}: {err}"
        lines = []
        if results.exists():
            for line in results.read_text(encoding="utf-8").splitlines():
                try:
                    lines.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return lines, (stopped, reached["cell"]) if stopped else None


def grade_notebook(student: str, path: Path, chapters: dict[str, dict],
                   timeout: float, kernel: str = KERNEL) -> Graded:
    """Identify, run and score one submitted notebook."""
    graded = Graded(student, str(path))
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:                 # not JSON, not a notebook
        graded.problems.append(f"{path.name} could not be read as a notebook "
                               f"({type(err).__name__}: {err})")
        return graded
    stem, how = identify(nb, chapters)
    if stem is None:
        graded.problems.append(f"{path.name} is not one of the chapters' "
                               f"notebooks (no known exercise label in it)")
        return graded
    graded.chapter, graded.matched_by = stem, how
    chapter = chapters[stem]

    where = check_cells(nb, chapter)
    for ex in chapter["exercises"]:          # the chapter's checks, unedited
        if ex["label"] in where:
            nb.cells[where[ex["label"]]].source = ex["check_source"]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    results, stop = run(nb, timeout, kernel)
    if stop:
        graded.problems.append(f"{where_stopped(nb, stop)} {stop[0]}; the "
                               f"cells after it did not run.")
    errs = errors(nb)

    latest = {}
    for res in results:
        latest[res.get("exercise")] = res
    for ex in chapter["exercises"]:
        label, top = ex["label"], float(ex["points"])
        res = latest.get(label)
        if res is not None:
            status = res.get("status", "wrong")
            points = float(res.get("points", 0.0)) if status == "correct" \
                else 0.0
            text = f"{MARKS.get(status, status)}: {res.get('message', '')}"
        else:
            points, text = 0.0, "Not graded: " + why_missing(
                nb, label, where.get(label), stop, errs, ex["check_source"])
        graded.rows.append(Row(student, stem, label, min(points, top), top,
                               text))
    graded.executed = nbformat.writes(nb)
    return graded


def where_stopped(nb, stop) -> str:
    if stop[1] is None:
        return "Starting the kernel"
    text = describe(nb, stop[1])
    return text[0].upper() + text[1:]


def why_missing(nb, label, index, stop, errs, source) -> str:
    """Why an exercise's check produced no result."""
    if index is None:
        return (f"the cell that runs its check is missing; put back "
                f"`{source}` below your answer")
    if stop and (stop[1] is None or index >= stop[1]):
        if stop[1] == index:
            return f"its check {stop[0]}"
        where = ("starting the kernel" if stop[1] is None
                 else describe(nb, stop[1]))
        return f"the run never reached its check: {where} {stop[0]}"
    mine = [e for i, e in errs if i == index]
    if mine:
        earlier = [f"{describe(nb, i)} raised {e}" for i, e in errs
                   if i < index]
        hint = f" (earlier, {earlier[0]})" if earlier else ""
        return f"its check could not run: {mine[0]}{hint}"
    return "its check ran but reported nothing"


# ------------------------------------------------------------------ folder
def submissions(folder: Path) -> list[tuple[str, Path]]:
    """(student, notebook) pairs, sorted; checkpoints are skipped."""
    pairs = []
    for student in sorted(p for p in folder.iterdir() if p.is_dir()):
        for path in sorted(student.rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in path.parts:
                pairs.append((student.name, path))
    return pairs


def _grade_one(args) -> Graded:
    return grade_notebook(*args)


def grade_folder(folder: Path, manifest: Path, out: Path, timeout: float = 60,
                 jobs: int = 1, only: list[str] | None = None,
                 kernel: str = KERNEL, echo=print) -> list[Row]:
    """Grade every notebook under ``folder``; write the gradebook to ``out``."""
    chapters = load_manifest(manifest)
    pairs = submissions(folder)
    for loose in sorted(folder.glob("*.ipynb")):
        echo(f"skipped {loose.name}: put each student's notebooks in a "
             f"folder of their own, {folder}/<student>/")
    tasks = [(s, p, chapters, timeout, kernel) for s, p in pairs]
    if jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            graded = list(pool.map(_grade_one, tasks))
    else:
        graded = [_grade_one(t) for t in tasks]

    students = sorted({s for s, _ in pairs})
    wanted = only or sorted({g.chapter for g in graded if g.chapter})
    unknown = [c for c in wanted if c not in chapters]
    if unknown:
        raise SystemExit(f"unknown chapters {unknown}; "
                         f"known: {sorted(chapters)}")
    rows: list[Row] = []
    notes: dict[str, list[str]] = {s: [] for s in students}
    counted: dict[tuple[str, str], Graded] = {}
    for g in graded:
        echo(f"{g.student:16s} {Path(g.path).name:32s} -> "
             f"{g.chapter or '?':18s} {g.total:g} points"
             + (f"  [{g.problems[0]}]" if g.problems else ""))
        if g.chapter is None:
            notes[g.student] += g.problems
            continue
        key = (g.student, g.chapter)
        if key in counted:
            keep, drop = sorted([counted[key], g], key=lambda x: -x.total)
            notes[g.student].append(
                f"Two notebooks for {g.chapter}: {Path(keep.path).name} "
                f"({keep.total:g} points) counts, not "
                f"{Path(drop.path).name} ({drop.total:g} points).")
            counted[key] = keep
        else:
            counted[key] = g
    for student in students:
        for stem in wanted:
            g = counted.get((student, stem))
            if g is None:
                rows += [Row(student, stem, ex["label"], 0.0,
                             float(ex["points"]),
                             "Not graded: no notebook of this chapter was "
                             "handed in")
                         for ex in chapters[stem]["exercises"]]
            else:
                rows += g.rows
        rows += [Row(student, "", "", 0.0, 0.0, problem)
                 for g in graded if g.student == student and g.chapter is None
                 for problem in g.problems]
    write_outputs(out, rows, counted, notes, chapters, students)
    return rows


def write_outputs(out, rows, counted, notes, chapters, students) -> None:
    out.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "chapter", "exercise", "points",
                     "max_points", "feedback"])
    for r in rows:
        writer.writerow([r.student, r.chapter, r.exercise, f"{r.points:g}",
                         f"{r.max_points:g}", r.feedback])
    (out / "gradebook.csv").write_text(buffer.getvalue(), encoding="utf-8")

    for student in students:
        lines = [f"# Feedback for {student}", ""]
        mine = [r for r in rows if r.student == student and r.chapter]
        for stem in dict.fromkeys(r.chapter for r in mine):
            ch_rows = [r for r in mine if r.chapter == stem]
            got = sum(r.points for r in ch_rows)
            top = sum(r.max_points for r in ch_rows)
            title = chapters[stem]["title"]
            lines += [f"## {title} ({stem}): {got:g} / {top:g} points", ""]
            g = counted.get((student, stem))
            if g is not None:
                lines += [f"Notebook: `{Path(g.path).name}` (recognised by "
                          f"its {g.matched_by}).", ""]
            for r in ch_rows:
                lines.append(f"- **{r.exercise}** ({r.points:g} / "
                             f"{r.max_points:g}): {r.feedback}")
            if g is not None and g.problems:
                lines += ["", "While running your notebook:"]
                lines += [f"- {p}" for p in g.problems]
            lines.append("")
        if notes[student]:
            lines += ["## Other notes", ""]
            lines += [f"- {n}" for n in notes[student]] + [""]
        path = out / "feedback" / f"{student}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines), encoding="utf-8")
    for (student, stem), g in counted.items():
        if g.executed:
            path = out / "executed" / student / f"{stem}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(g.executed + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("submissions", type=Path,
                        help="folder of <student>/<any name>.ipynb")
    parser.add_argument("--out", type=Path, default=ROOT / "gradebook",
                        help="where the gradebook goes (default gradebook/)")
    parser.add_argument("--manifest", type=Path,
                        default=ROOT / "assignments" / "grader" /
                        "manifest.json",
                        help="written by `make assignments` (default "
                             "assignments/grader/manifest.json)")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds each cell may run (default 60)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks run at the same time (default 1)")
    parser.add_argument("--kernel", default=KERNEL,
                        help="Jupyter kernel to run the notebooks with "
                             "(default python3: this Python's own)")
    parser.add_argument("--chapters", nargs="*",
                        help="chapter files to grade, e.g. 01_definition "
                             "(default: every chapter handed in)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"no folder {args.submissions}")
    if not args.manifest.exists():
        parser.error(f"no manifest {args.manifest}: run `make assignments`")
    rows = grade_folder(args.submissions, args.manifest, args.out,
                        args.timeout, args.jobs, args.chapters,
                        args.kernel)
    print(f"{len(rows)} gradebook rows in {args.out / 'gradebook.csv'}, "
          f"feedback in {args.out / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
