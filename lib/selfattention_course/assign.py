"""Student notebooks and the grader's manifest, made from the chapters.

The chapters are the single source of truth for the exercises. In each one,
an exercise is a markdown cell holding an ``{exercise}`` directive with a
label ``ex-<chapter>-<name>``; its solution is gated between a
``{solution-start}`` and a ``{solution-end}`` markdown cell and lives in code
cells tagged ``solution``, where the part a student writes sits between the
lines ``### BEGIN SOLUTION`` and ``### END SOLUTION``; a visible cell after the
gate calls the exercise's check. The exercise itself is declared once, as an
:class:`~selfattention_exercises.core.Exercise` in
:mod:`selfattention_exercises` (its kind, points, the names of its answers).

``selfattention-assign`` (``make assignments``) writes, for every chapter,

* ``assignments/student/<chapter>.ipynb``: the chapter with each solution
  region replaced by ``...  # your code here`` at the region's indentation,
  the ``solution-start``/``solution-end`` cells (and any solution prose
  between them) removed, every output cleared, a markdown answer cell for
  each exercise with a written part, and the chapter's label and exercise
  labels stored in the notebook metadata (``selfattention``) so the grader
  recognises a submission whatever its file name; then written as plain
  Jupyter, the way the launch notebooks are
  (:func:`selfattention_book.plain.plain_notebook`, solutions absent):
  cross-references and citations as links with the book's numbers, each
  exercise a heading "Exercise N.M: Kind: what (P points)" whose cell's
  metadata names its label, no MyST markup left;
* ``assignments/grader/manifest.json``: per chapter, the exercises in order
  with their kind, points, the names of their answers, where their
  declaration lives, and for a written part its prompt and its rubric (the
  prose of the solution).

An exercise title, when the chapter gives one (``Derive: the variance of
q·k (2 points)``), must agree with the declaration's kind and points.
Everything else (prose, figures' code, setup cells, the checks) is kept, so
a student notebook runs top to bottom; each check then reports "not
attempted". The output depends only on the chapters and the declarations:
running it twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import json
import pkgutil
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from selfattention_exercises.core import KINDS, Exercise

from .names import BEGIN, END, META, STUB, WRITTEN_STUB

if TYPE_CHECKING:
    from selfattention_book.plain import BookIndex

__all__ = ["AssignmentError", "find_exercises", "make_assignment",
           "make_all", "build", "exercise_table", "update_page",
           "strip_regions", "main"]

# A directive's fence, matched only from the start of a run of colons or
# backticks and never given back: a long run cannot cost quadratic time.
_FENCE = r"(?<![:`])(?::{3,}+|`{3,}+)"
EXERCISE_RE = re.compile(
    _FENCE + r"\{exercise\}(?P<title>[^\n]*)\n"
    r"(?:[ \t]*:[\w-]+:[^\n]*\n)*?[ \t]*:label:[ \t]*(?P<label>\S+)")
# A whole solution directive (gate opening, gate closing or a solution that
# holds only markdown), from its opening fence to its closing fence.
SOLUTION_BLOCK_RE = re.compile(
    r"^(?P<fence>:{3,}|`{3,})\{(?P<kind>solution-start|solution-end|solution)"
    r"\}[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*(?:\n|\Z)",
    re.M | re.S)
CHAPTER_RE = re.compile(r"^\((ch-[\w-]+)\)=\s*\n#\s+(.+)$", re.M)
TITLE_RE = re.compile(r"^\s*(?P<kind>\w+):\s*(?P<what>.*?)\s*"
                      r"(?:\((?P<points>[\d.]+) points?\))?\s*$")

STUDENT_NOTE = (
    "> **Student version.** The solutions of this chapter's exercises are "
    "removed. Write your code where a cell says `# your code here`, then run "
    "the check below it: it tells you what is right or the first thing to "
    "fix. Run the whole notebook top to bottom before you hand it in "
    "(exercises: {labels}; a check's feedback names its exercise by the "
    "label in brackets)."
)
WRITTEN_HEAD = "**Your answer to Exercise {number}** (`{label}`): {prompt}"


class AssignmentError(ValueError):
    """A chapter does not follow the exercise template."""


# ------------------------------------------------------------------ exercises
def find_exercises(modules=()) -> dict[str, tuple[str, str, Exercise]]:
    """Every declared exercise, by label: ``(module, name, Exercise)``.

    Searches the modules of :mod:`selfattention_exercises` and any extra
    ``modules`` (dotted names, e.g. an instructor's own exercises).
    """
    import selfattention_exercises as package

    names = [f"{package.__name__}.{info.name}" for info in
             sorted(pkgutil.iter_modules(package.__path__),
                    key=lambda m: m.name)
             if info.name not in package.CORE_MODULES]
    found: dict[str, tuple[str, str, Exercise]] = {}
    for name in [*names, *modules]:
        module = importlib.import_module(name)
        for attr in sorted(vars(module)):
            ex = getattr(module, attr)
            if not isinstance(ex, Exercise):
                continue
            if ex.label in found and found[ex.label][2] is not ex:
                raise AssignmentError(
                    f"two declarations of {ex.label}: {found[ex.label][0]}."
                    f"{found[ex.label][1]} and {name}.{attr}")
            found.setdefault(ex.label, (name, attr, ex))
    return found


# ------------------------------------------------------------------ parsing
def exercise_labels(nb) -> list[str]:
    """Labels of the notebook's exercises, in order: those of a markdown
    cell's metadata (``{"selfattention": {"exercises": [...]}}``, as in a
    student notebook, where the exercise is a plain heading), else those of
    the ``{exercise}`` directives in its text (a chapter). Any notebook may
    be given: metadata of another form is ignored."""
    labels: list[str] = []
    for cell in nb.cells:
        if cell.get("cell_type") != "markdown":
            continue
        meta = cell.get("metadata", {})
        meta = meta.get(META) if isinstance(meta, dict) else None
        marked = meta.get("exercises") if isinstance(meta, dict) else None
        if isinstance(marked, list):
            labels += [lab for lab in marked if isinstance(lab, str)]
        elif isinstance(cell.get("source"), str):
            labels += [m.group("label")
                       for m in EXERCISE_RE.finditer(cell.source)]
    return labels


def _directives(nb):
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            yield from EXERCISE_RE.finditer(cell.source)


def chapter_label(nb) -> tuple[str, str]:
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


def check_title(title: str, ex: Exercise, where: str) -> None:
    """A chapter's exercise title must agree with the declaration."""
    title = title.strip()
    if not title:
        return
    match = TITLE_RE.match(title)
    if not match or match.group("kind") not in KINDS:
        raise AssignmentError(
            f"{where}: the title of {ex.label} should read '<Kind>: <what> "
            f"(<N> points)' with a kind among {KINDS}, got {title!r}")
    if match.group("kind") != ex.kind:
        raise AssignmentError(f"{where}: {ex.label} is titled "
                              f"{match.group('kind')} but declared {ex.kind}")
    total = ex.points + ex.written_points        # code and written parts
    if match.group("points") is None or \
            float(match.group("points")) != total:
        raise AssignmentError(f"{where}: the title of {ex.label} should end "
                              f"with '({total:g} points)'")


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
class Item:
    """One exercise of a chapter, as the student notebook and grader see it."""

    label: str
    module: str
    name: str
    exercise: Exercise
    answer_cells: list[str] = field(default_factory=list)   # cell ids
    rubric: list[str] = field(default_factory=list)         # solution prose

    def manifest(self) -> dict:
        ex = self.exercise
        entry = {"label": self.label, "kind": ex.kind, "points": ex.points,
                 "answers": list(ex.answers),
                 "ref": f"{self.module}:{self.name}", "check": self.name,
                 "answer_cells": self.answer_cells, "what": ex.doc}
        if ex.written:
            entry["written"] = {"prompt": ex.written,
                                "points": ex.written_points,
                                "rubric": "\n\n".join(self.rubric).strip()}
        return entry


@dataclass
class Assignment:
    """One chapter turned into a student notebook plus its grading data."""

    stem: str
    label: str
    title: str
    items: list[Item]
    student: nbformat.NotebookNode
    #: The chapter's own code cells outside its solutions, as written in
    #: the chapter (the student version shows them as plain Jupyter does).
    book_code: list[str] = field(default_factory=list)

    def manifest(self) -> dict:
        from .review import cell_digest

        shown = [c.source for c in self.student.cells
                 if c.cell_type == "code"]
        return {"chapter": self.label, "title": self.title,
                "file": self.stem,
                "exercises": [item.manifest() for item in self.items],
                # The student version's code cells and the chapter's own
                # (a student may start from either, or from the launch
                # notebook, whose cells are the student version's): one left
                # unchanged is the book's code (selfattention_course.review).
                "book_cells": sorted({cell_digest(source) for source in
                                      shown + self.book_code})}


def _cell_id(cell, index: int) -> str:
    return cell.get("id") or f"cell-{index}"


def _options_removed(body: str) -> str:
    lines = body.split("\n")
    while lines and re.match(r"^\s*:[\w-]+:", lines[0]):
        lines.pop(0)
    return "\n".join(lines)


def _split_markdown(text: str, gate: str | None, items, where: str):
    """Separate what a student sees from solution text in one cell.

    Returns the gate still open after the cell, the text to keep, and the
    solution prose found, by exercise label.
    """
    kept: list[str] = []
    hidden: dict[str, list[str]] = {}
    pos = 0

    def keep(segment: str, owner: str | None) -> None:
        if owner is None:
            kept.append(segment)
        elif segment.strip():
            hidden.setdefault(owner, []).append(segment.strip())

    for block in SOLUTION_BLOCK_RE.finditer(text):
        keep(text[pos:block.start()], gate)
        kind, arg = block.group("kind"), block.group("arg").strip()
        if kind == "solution-start":
            if gate is not None or arg not in items:
                raise AssignmentError(
                    f"{where}: solution-start for {arg!r} (still open: "
                    f"{gate}; exercises: {list(items)})")
            gate = arg
        elif kind == "solution-end":
            if gate is None:
                raise AssignmentError(f"{where}: solution-end without start")
            gate = None
        else:
            keep(_options_removed(block.group("body")), arg)
        pos = block.end()
    keep(text[pos:], gate)
    if pos == 0:
        return gate, ("" if gate else text), hidden
    return gate, re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip("\n"), hidden


def _written_cell(ex: Exercise, number: str):
    cell = nbformat.v4.new_markdown_cell(
        WRITTEN_HEAD.format(number=number, label=ex.label, prompt=ex.written)
        + "\n\n" + WRITTEN_STUB)
    cell.id = f"written-{ex.label}"
    cell.metadata[META] = {"written": ex.label}
    return cell


def make_assignment(path: Path, exercises: dict,
                    index: BookIndex | None = None) -> Assignment:
    """Build the student notebook and grading data of one chapter.

    The student version is then written as plain Jupyter by
    :func:`~selfattention_book.plain.plain_notebook` with ``index`` (by
    default the index of the book ``path`` lies in), solutions absent.
    """
    # The book's tooling, only where a checkout builds student notebooks:
    # the graders Gradescope runs import this module without it.
    from selfattention_book.plain import BookIndex, plain_notebook

    nb = nbformat.read(path, as_version=4)
    where = path.name
    book = index if index is not None else BookIndex.around(path)
    doc = book.doc(path)
    book.include(nb, doc)
    label, title = chapter_label(nb)
    labels = exercise_labels(nb)
    if len(set(labels)) != len(labels):
        raise AssignmentError(f"{where}: an exercise label appears twice")
    missing = [lab for lab in labels if lab not in exercises]
    if missing:
        raise AssignmentError(
            f"{where}: no Exercise declared in selfattention_exercises for "
            f"{missing}")
    items = {lab: Item(lab, *exercises[lab]) for lab in labels}
    numbers = {lab: book.target(lab, where).number for lab in labels}
    for match in _directives(nb):
        check_title(match.group("title"), items[match.group("label")]
                    .exercise, where)

    student = copy.deepcopy(nb)
    cells = []
    gate: str | None = None          # label of the open solution gate
    last_exercise: str | None = None
    for index, cell in enumerate(nb.cells):
        cell = copy.deepcopy(cell)
        here = f"{where}, cell {index}"
        tags = list(cell.metadata.get("tags", []))
        if cell.cell_type == "markdown":
            gate, text, hidden = _split_markdown(cell.source, gate, items,
                                                 here)
            for owner, prose in hidden.items():
                items[owner].rubric += prose
            for found in EXERCISE_RE.finditer(text):
                last_exercise = found.group("label")
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
            items[owner].answer_cells.append(_cell_id(cell, index))
        elif BEGIN in cell.source or END in cell.source:
            raise AssignmentError(f"{here}: solution markers in a cell that is"
                                  f" not tagged 'solution'")
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
    for item in items.values():
        if not item.answer_cells:
            raise AssignmentError(f"{where}: {item.label} has no solution "
                                  f"cell")
        if item.exercise.written:
            last = max(i for i, c in enumerate(cells)
                       if _cell_id(c, -1) == item.answer_cells[-1])
            cells.insert(last + 1, _written_cell(item.exercise,
                                                 numbers[item.label]))

    note = nbformat.v4.new_markdown_cell(
        STUDENT_NOTE.format(labels=", ".join(
            f"{numbers[lab]} `{lab}`" for lab in labels)))
    note.id = "student-version-note"
    cells.insert(1, note)
    student.cells = cells
    student.metadata = {
        key: nb.metadata[key] for key in ("kernelspec", "language_info")
        if key in nb.metadata}
    try:
        student = plain_notebook(student, book, doc, solutions="absent")
    except KeyError as err:               # an unknown label or citation
        raise AssignmentError(f"{where}: {err.args[0]}") from None
    student.metadata[META] = {"chapter": label, "file": path.stem,
                              "exercises": labels}
    nbformat.validate(student)
    book_code = [c.source for c in nb.cells if c.cell_type == "code"
                 and "solution" not in c.metadata.get("tags", [])]
    return Assignment(path.stem, label, title, [items[lab] for lab in labels],
                      student, book_code)


def make_all(chapters: list[Path], exercises: dict) -> list[Assignment]:
    """:func:`make_assignment` of each chapter, in name order, with one
    index per book."""
    from selfattention_book.plain import BookIndex, book_root

    indexes: dict = {}
    made = []
    for path in sorted(chapters):
        root = book_root(path)
        if root not in indexes:
            indexes[root] = BookIndex(root)
        made.append(make_assignment(path, exercises, indexes[root]))
    return made


# ------------------------------------------------------------------ output
def dump(data) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def build(chapters: list[Path], out: Path, prune: bool = False,
          modules=()) -> list[Assignment]:
    """Write the student notebooks and the manifest; return the assignments.

    With ``prune``, student notebooks of chapters that no longer exist are
    removed from ``out``.
    """
    exercises = find_exercises(modules)
    made = make_all(chapters, exercises)
    for a in made:
        write_if_changed(out / "student" / f"{a.stem}.ipynb",
                         nbformat.writes(a.student) + "\n")
    if prune:
        keep = {f"{a.stem}.ipynb" for a in made}
        for old in (out / "student").glob("*.ipynb"):
            if old.name not in keep:
                old.unlink()
    manifest = {"chapters": [a.manifest() for a in made],
                "modules": list(modules)}
    write_if_changed(out / "grader" / "manifest.json", dump(manifest))
    return made


def exercise_table(assignments: list[Assignment]) -> str:
    """MyST tables of every exercise, one per chapter under the chapter's
    name (the page for instructors shows them): each exercise's number and
    label, kind, points and what its check tests."""
    blocks = []
    for a in assignments:
        rows = [f"**{{numref}}`Chapter %s <{a.label}>`: {a.title}**",
                "", "| Exercise | Kind | Points | What the check tests |",
                "| --- | --- | --- | --- |"]
        for item in a.items:
            ex = item.exercise
            what = re.sub(r"^Exercise [\d.]+:\s*", "", ex.doc)
            if ex.written:
                what += f" *Written:* {ex.written}"
            rows.append(f"| {{numref}}`{ex.label}` `{ex.label}` | "
                        f"{ex.kind} | {ex.points + ex.written_points:g} | "
                        f"{what.replace('|', '/')} |")
        blocks.append("\n".join(rows))
    return "\n\n".join(blocks)


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
    parser = argparse.ArgumentParser(
        prog="selfattention-assign",
        description="Make student notebooks and the grader's manifest from "
                    "the chapters.")
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter notebooks (default: chapters/*.ipynb)")
    parser.add_argument("--out", type=Path, default=Path("assignments"),
                        help="output folder (default: assignments/)")
    parser.add_argument("--exercises", nargs="*", default=[],
                        metavar="MODULE",
                        help="extra modules that declare exercises")
    parser.add_argument("--table", action="store_true",
                        help="print the exercise table of the page for "
                             "instructors instead of writing files")
    parser.add_argument("--update-page", type=Path, metavar="PAGE",
                        help="rewrite the exercise table between the "
                             "markers of PAGE "
                             "(appendices/instructors/exercises.md) "
                             "instead of writing files")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("selfattention_book") is None:
        parser.error("this command runs in a checkout of the book (make "
                     "install there; it writes the student notebooks with "
                     "the book's own tooling, which the package leaves out)")
    chapters = args.chapters or sorted(Path("chapters").glob("*.ipynb"))
    if not chapters:
        parser.error("no chapter notebooks given or found in chapters/")
    try:
        if args.table or args.update_page:
            exercises = find_exercises(args.exercises)
            table = exercise_table(make_all(chapters, exercises))
            if args.update_page:
                update_page(args.update_page, table)
            else:
                print(table)
            return 0
        made = build(chapters, args.out, prune=not args.chapters,
                     modules=args.exercises)
    except AssignmentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for a in made:
        points = sum(i.exercise.points for i in a.items)
        print(f"{a.stem:22s} {len(a.items)} exercises, {points:g} points")
    print(f"student notebooks in {args.out / 'student'}, "
          f"grading data in {args.out / 'grader'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
