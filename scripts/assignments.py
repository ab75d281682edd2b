"""Student notebooks and the grader's manifest, made from the chapters.

The chapters are the single source of truth for the exercises. In each one,
an exercise is a markdown cell holding an ``{exercise}`` directive with a
label ``ex-<chapter>-<name>``; its solution is gated between a
``{solution-start}`` and a ``{solution-end}`` markdown cell and lives in code
cells tagged ``solution``, where the part a student writes sits between the
lines ``### BEGIN SOLUTION`` and ``### END SOLUTION``; a visible cell after the
gate calls the exercise's check from :mod:`selfattention.exercises`.

``make assignments`` (this script) writes, for every chapter,

* ``assignments/student/<chapter>.ipynb``: the chapter with each solution
  region replaced by ``...  # your code here`` at the region's indentation,
  the ``solution-start``/``solution-end`` cells (and any solution prose
  between them) removed, every output cleared, and the chapter's label and
  exercise labels stored in the notebook metadata (``selfattention``) so the
  grader recognises a submission whatever its file name;
* ``assignments/grader/manifest.json``: per chapter, the exercises in order,
  their points (read from the ``@check`` decorators) and the source of the
  cell that calls each check, which the grader restores before running a
  submission.

Everything else (prose, figures' code, setup cells, the checks) is kept, so a
student notebook runs top to bottom; each check then reports "not attempted".
The output depends only on the chapters and the checks: running it twice
gives byte-identical files.

Usage: python scripts/assignments.py [--out assignments] [chapters/*.ipynb]
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import pkgutil
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "...  # your code here"
META = "selfattention"           # notebook and cell metadata key

_FENCE = r"(?::{3,}|`{3,})"
EXERCISE_RE = re.compile(
    _FENCE + r"\{exercise\}[^\n]*\n(?:[ \t]*:[\w-]+:[^\n]*\n)*?"
    r"[ \t]*:label:[ \t]*(\S+)")
# A whole solution directive (gate opening, gate closing or a solution that
# holds only markdown), from its opening fence to its closing fence.
SOLUTION_BLOCK_RE = re.compile(
    r"^(?P<fence>:{3,}|`{3,})\{(?P<kind>solution-start|solution-end|solution)"
    r"\}[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*(?:\n|\Z)",
    re.M | re.S)
CHAPTER_RE = re.compile(r"^\((ch-[\w-]+)\)=\s*\n#\s+(.+)$", re.M)

STUDENT_NOTE = (
    "> **Student version.** The solutions of this chapter's exercises are "
    "removed. Write your code where a cell says `# your code here`, then run "
    "the check below it: it tells you what is right or the first thing to "
    "fix. Run the whole notebook top to bottom before you hand it in "
    "(exercises: {labels})."
)


class AssignmentError(ValueError):
    """A chapter does not follow the exercise template."""


# ------------------------------------------------------------------ checks
@dataclass(frozen=True)
class Check:
    """A check function found in :mod:`selfattention.exercises`."""

    exercise: str
    module: str
    name: str
    points: float
    doc: str


def find_checks() -> dict[str, Check]:
    """Every ``@check``-decorated function, by exercise label."""
    import selfattention.exercises as package

    found: dict[str, Check] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__),
                       key=lambda m: m.name):
        if info.name == "core":
            continue
        name = f"{package.__name__}.{info.name}"
        module = importlib.import_module(name)
        for attr in sorted(vars(module)):
            fn = getattr(module, attr)
            label = getattr(fn, "exercise", None)
            if not callable(fn) or not isinstance(label, str):
                continue
            if getattr(fn, "__module__", name) != name:
                continue                      # imported from elsewhere
            if label in found:
                raise AssignmentError(
                    f"two checks for {label}: {found[label].module}."
                    f"{found[label].name} and {name}.{attr}")
            summary = (fn.__doc__ or "").strip().split("\n\n")[0]
            found[label] = Check(label, name, attr, float(fn.points),
                                 " ".join(summary.split()))
    return found


# ------------------------------------------------------------------ parsing
def exercise_labels(nb: nbformat.NotebookNode) -> list[str]:
    """Labels of the ``{exercise}`` directives, in order."""
    labels: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            labels += EXERCISE_RE.findall(cell.source)
    return labels


def chapter_label(nb: nbformat.NotebookNode) -> tuple[str, str]:
    """The chapter's label (``ch-...``) and title from its first heading."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = CHAPTER_RE.search(cell.source)
            if match:
                return match.group(1), match.group(2).strip()
    raise AssignmentError("no chapter label '(ch-...)=' above a '# ' title")


def calls(source: str, name: str) -> bool:
    """Whether ``source`` calls a function called ``name``."""
    return re.search(rf"(?<![\w]){re.escape(name)}\s*\(", source) is not None


def strip_regions(source: str, where: str = "cell") -> str:
    """Replace every solution region by ``...  # your code here``.

    The stub takes the indentation of the ``### BEGIN SOLUTION`` line, so a
    function body stays a valid (empty) body.
    """
    out: list[str] = []
    inside = False
    for number, line in enumerate(source.split("\n"), start=1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise AssignmentError(f"{where}, line {number}: nested {BEGIN}")
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + STUB)
        elif marker == END:
            if not inside:
                raise AssignmentError(f"{where}, line {number}: {END} "
                                      f"without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise AssignmentError(f"{where}: {BEGIN} is never closed")
    return "\n".join(out)


@dataclass
class Exercise:
    label: str
    check: Check
    check_source: str = ""
    answer_cells: list[str] = field(default_factory=list)   # cell ids


@dataclass
class Assignment:
    """One chapter turned into a student notebook plus its grading data."""

    stem: str
    label: str
    title: str
    exercises: list[Exercise]
    student: nbformat.NotebookNode

    def manifest(self) -> dict:
        return {
            "chapter": self.label,
            "title": self.title,
            "file": self.stem,
            "exercises": [
                {"label": ex.label, "points": ex.check.points,
                 "check": f"{ex.check.module}.{ex.check.name}",
                 "check_source": ex.check_source,
                 "answer_cells": ex.answer_cells,
                 "what": ex.check.doc}
                for ex in self.exercises],
        }


def _cell_id(cell, index: int) -> str:
    return cell.get("id") or f"cell-{index}"


def _strip_markdown(text: str, gate: str | None, exercises, where: str):
    """Remove solution directives, and text inside an open gate, from a cell.

    Returns the gate still open after the cell and the text to keep.
    """
    kept: list[str] = []
    pos = 0
    for block in SOLUTION_BLOCK_RE.finditer(text):
        if gate is None:
            kept.append(text[pos:block.start()])
        kind, arg = block.group("kind"), block.group("arg").strip()
        if kind == "solution-start":
            if gate is not None or arg not in exercises:
                raise AssignmentError(
                    f"{where}: solution-start for {arg!r} (still open: "
                    f"{gate}; exercises: {list(exercises)})")
            gate = arg
        elif kind == "solution-end":
            if gate is None:
                raise AssignmentError(f"{where}: solution-end without start")
            gate = None
        pos = block.end()
    if pos == 0:
        return gate, ("" if gate else text)
    if gate is None:
        kept.append(text[pos:])
    return gate, re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip("\n")


def make_assignment(path: Path, checks: dict[str, Check]) -> Assignment:
    """Build the student notebook and grading data of one chapter."""
    nb = nbformat.read(path, as_version=4)
    where = path.name
    label, title = chapter_label(nb)
    labels = exercise_labels(nb)
    if len(set(labels)) != len(labels):
        raise AssignmentError(f"{where}: an exercise label appears twice")
    missing = [lab for lab in labels if lab not in checks]
    if missing:
        raise AssignmentError(
            f"{where}: no @check in selfattention.exercises for {missing}")
    exercises = {lab: Exercise(lab, checks[lab]) for lab in labels}

    student = copy.deepcopy(nb)
    cells = []
    gate: str | None = None          # label of the open solution gate
    last_exercise: str | None = None
    seen: list[Exercise] = []        # exercises met so far, in order
    for index, cell in enumerate(nb.cells):
        cell = copy.deepcopy(cell)
        here = f"{where}, cell {index}"
        tags = list(cell.metadata.get("tags", []))
        if cell.cell_type == "markdown":
            gate, text = _strip_markdown(cell.source, gate, exercises, here)
            for found in EXERCISE_RE.findall(text):
                last_exercise = found
                seen.append(exercises[found])
            if text.strip():
                if text != cell.source:
                    cell.source = text
                cells.append(cell)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        solution = "solution" in tags
        if gate and not solution:
            raise AssignmentError(f"{here}: code inside the solution of {gate}"
                                  f" is not tagged 'solution'")
        if solution:
            if BEGIN not in cell.source:
                raise AssignmentError(f"{here}: cell tagged 'solution' has no "
                                      f"'{BEGIN}' region")
            owner = gate or last_exercise
            if owner is None:
                raise AssignmentError(f"{here}: solution before any exercise")
            cell.source = strip_regions(cell.source, here)
            tags.remove("solution")
            cell.metadata[META] = {"answer": owner}
            exercises[owner].answer_cells.append(_cell_id(cell, index))
        elif BEGIN in cell.source or END in cell.source:
            raise AssignmentError(f"{here}: solution markers in a cell that is"
                                  f" not tagged 'solution'")
        elif not gate:
            for ex in seen:          # the first open exercise this cell checks
                if not ex.check_source and calls(cell.source, ex.check.name):
                    ex.check_source = cell.source
                    cell.metadata[META] = {"check": ex.label}
                    break
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
        cell.outputs = []
        cell.execution_count = None
        for key in ("execution", "collapsed", "scrolled"):
            cell.metadata.pop(key, None)
        cells.append(cell)
    if gate:
        raise AssignmentError(f"{where}: solution of {gate} is never closed")
    for ex in exercises.values():
        if not ex.answer_cells:
            raise AssignmentError(f"{where}: {ex.label} has no solution cell")
        if not ex.check_source:
            raise AssignmentError(
                f"{where}: no cell after {ex.label}'s solution calls "
                f"{ex.check.name}(...)")

    note = nbformat.v4.new_markdown_cell(
        STUDENT_NOTE.format(labels=", ".join(f"`{lab}`" for lab in labels)))
    note.id = "student-version-note"
    cells.insert(1, note)
    student.cells = cells
    student.metadata = {
        key: nb.metadata[key] for key in ("kernelspec", "language_info")
        if key in nb.metadata}
    student.metadata[META] = {"chapter": label, "file": path.stem,
                              "exercises": labels}
    nbformat.validate(student)
    return Assignment(path.stem, label, title,
                      [exercises[lab] for lab in labels], student)


# ------------------------------------------------------------------ output
def dump(data) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def build(chapters: list[Path], out: Path,
          prune: bool = False) -> list[Assignment]:
    """Write the student notebooks and the manifest; return the assignments.

    With ``prune``, student notebooks of chapters that no longer exist are
    removed from ``out``.
    """
    checks = find_checks()
    made = [make_assignment(path, checks) for path in sorted(chapters)]
    for a in made:
        write_if_changed(out / "student" / f"{a.stem}.ipynb",
                         nbformat.writes(a.student) + "\n")
    if prune:
        keep = {f"{a.stem}.ipynb" for a in made}
        for old in (out / "student").glob("*.ipynb"):
            if old.name not in keep:
                old.unlink()
    manifest = {"chapters": [a.manifest() for a in made]}
    write_if_changed(out / "grader" / "manifest.json", dump(manifest))
    return made


def exercise_table(assignments: list[Assignment]) -> str:
    """A MyST table of every exercise (the page for instructors shows it)."""
    rows = ["| Exercise | Label | Points | What the check tests |",
            "| --- | --- | --- | --- |"]
    for a in assignments:
        for ex in a.exercises:
            what = re.sub(r"^Exercise [\d.]+:\s*", "", ex.check.doc)
            rows.append(f"| {{numref}}`{ex.label}` | `{ex.label}` | "
                        f"{ex.check.points:g} | {what.replace('|', '/')} |")
    return "\n".join(rows)


TABLE_START = "<!-- exercise table: start -->"
TABLE_END = "<!-- exercise table: end -->"


def update_page(page: Path, table: str) -> None:
    """Replace the table between the markers of ``page``."""
    text = page.read_text(encoding="utf-8")
    head, sep, rest = text.partition(TABLE_START)
    _, sep2, tail = rest.partition(TABLE_END)
    if not (sep and sep2):
        raise AssignmentError(f"{page}: markers {TABLE_START} / {TABLE_END} "
                              f"not found")
    write_if_changed(page, f"{head}{TABLE_START}\n{table}\n{TABLE_END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter notebooks (default: chapters/*.ipynb)")
    parser.add_argument("--out", type=Path, default=ROOT / "assignments",
                        help="output folder (default: assignments/)")
    parser.add_argument("--table", action="store_true",
                        help="print the exercise table of the page for "
                             "instructors instead of writing files")
    parser.add_argument("--verify", action="store_true",
                        help="also run every student notebook (a few "
                             "seconds each) and report any error")
    parser.add_argument("--update-page", type=Path, metavar="PAGE",
                        help="rewrite the exercise table between the "
                             "markers of PAGE (appendices/instructors.md) "
                             "instead of writing files")
    args = parser.parse_args(argv)
    chapters = args.chapters or sorted((ROOT / "chapters").glob("*.ipynb"))
    try:
        if args.table or args.update_page:
            checks = find_checks()
            table = exercise_table([make_assignment(p, checks)
                                    for p in sorted(chapters)])
            if args.update_page:
                update_page(args.update_page, table)
            else:
                print(table)
            return 0
        made = build(chapters, args.out, prune=not args.chapters)
    except AssignmentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for a in made:
        points = sum(ex.check.points for ex in a.exercises)
        print(f"{a.stem:22s} {len(a.exercises)} exercises, {points:g} points")
    print(f"student notebooks in {args.out / 'student'}, "
          f"grading data in {args.out / 'grader'}")
    return verify(made) if args.verify else 0


def verify(made: list[Assignment], timeout: float = 120) -> int:
    """Run each student notebook; 1 if any raised or a check did not run."""
    from grade import errors, run      # the grader's runner, same kernel

    failed = 0
    for a in made:
        nb = copy.deepcopy(a.student)
        results, stop = run(nb, timeout)
        reported = {r["exercise"]: r["status"] for r in results}
        problems = [f"cell {i + 1} raised {e}" for i, e in errors(nb)]
        if stop:
            problems.append(f"cell {stop[1] + 1 if stop[1] is not None else '?'}"
                            f" {stop[0]}")
        problems += [f"{ex.label}: {reported.get(ex.label, 'no result')}"
                     for ex in a.exercises
                     if reported.get(ex.label) != "not done"]
        print(f"{a.stem:22s} " + ("; ".join(problems) if problems else
                                  "runs to the end, every check: not done"))
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
