"""Writing a gradebook folder that nothing submitted can subvert.

Every run writes a fresh folder next to the target and then swaps it in
(``renameat2(RENAME_EXCHANGE)`` where the kernel offers it, two renames
otherwise), so a failed run leaves the previous gradebook untouched and no
file of an earlier run survives. Text that a student controls (file names,
messages that quote an answer, written answers) is neutralised where it
lands: CSV cells cannot start a formula, Markdown cannot render links,
images or HTML, and written answers sit in code fences longer than any run
of backticks they hold.

Besides ``gradebook.csv`` (one row per student and exercise, with the
diagnosis's code beside its feedback, so that a spreadsheet can count how
often each mistake occurs across a class), the folder
holds the same auto-points in the two forms that learning platforms import,
one row per student and one column per assignment (a chapter):

* ``canvas.csv``, Canvas's gradebook import: the columns ``Student``,
  ``ID``, ``SIS User ID``, ``SIS Login ID`` and ``Section`` (the student's
  name as handed in goes under ``Student`` and ``SIS Login ID``; Canvas
  matches on either), a ``Points Possible`` row, then one column per
  chapter named by its title;
* ``moodle.csv``, for Moodle's "Import grades from CSV": a ``Username``
  column (map it to the user field that the submission folders are named
  by: username, ID number or e-mail address) and one column per chapter.

Each written part has a row of its own (``<label> (written)``), 0 points
until the instructor scores it: the folder ``scores/`` holds one scoresheet
per chapter to fill in, and ``selfattention-grade --written scores/`` merges
the points into every file (:mod:`~selfattention_course.written`). The
Canvas and Moodle columns are each chapter's total, auto-points and written
points together, out of the chapter's whole maximum.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import io
import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from .intake import safe_file_name
from .names import (CANVAS_CSV, COLUMNS, EXECUTED_DIR, FEEDBACK_DIR,
                    GRADEBOOK, MOODLE_CSV, RUN_FILE, WRITTEN_DIR)

__all__ = ["Row", "status_code", "neutral", "md_text", "fenced",
           "clean_text", "write", "replace_folder", "assignment_totals",
           "canvas_csv", "moodle_csv"]

_FORMULA = ("=", "+", "-", "@", "\t", "\r")
# Control characters, and the invisible ones that reorder or hide text
# (bidirectional overrides and isolates, zero-width characters).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029"
                      r"\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]!|~#])")
# Characters from which renderers build links out of bare text (GitHub's
# and markdown-it's autolinks: www.x.y, http://, a@b.c, x.com): escaped,
# they split the text, so that no renderer sees a link in it.
_AUTOLINK = re.compile(r"([.:@/])")


@dataclass
class Row:
    """One line of the gradebook."""

    student: str
    chapter: str
    exercise: str
    points: float
    max_points: float
    feedback: str
    for_student: str | None = None    # what the student's page says instead
    #: The diagnosis, stable across rewordings of the feedback: the code of
    #: a wrong answer's diagnosis (``Wrong(message, code)``), of an answer
    #: sent for review from its source (``review-dynamic``...,
    #: :func:`~selfattention_course.review.diagnosis`), of why an answer was
    #: not graded (``answer-timeout``..., :mod:`~selfattention_course.
    #: grade`) or of a problem with the file (``symlink``...,
    #: :class:`~selfattention_course.names.Problem`), else the status in one
    #: word (see :func:`status_code`).
    code: str = ""
    #: The row's status (``"correct"``, ``"not graded"``...: the statuses
    #: of :mod:`selfattention_exercises.core`), which opens the feedback.
    status: str = ""
    #: Notes on the row's student for the instructor, one kebab-case word
    #: each, whose text the feedback carries: ``mixed-scripts`` (the name
    #: mixes the letters of two scripts, so it can pass for another).
    flags: tuple[str, ...] = ()

    @property
    def student_text(self) -> str:
        return self.feedback if self.for_student is None else self.for_student


def status_code(status: str) -> str:
    """A status in one word, as the code of a row that has no diagnosis
    (``"not done"`` -> ``"not-done"``)."""
    return status.replace(" ", "-")


def _encodable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates) as ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


def clean_text(text: str, limit: int = 600) -> str:
    """``text`` without control characters, at most ``limit`` characters,
    encodable in UTF-8."""
    text = _CONTROL.sub(" ", _encodable(str(text))).replace("\r", " ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def neutral(cell: str) -> str:
    """A CSV cell that a spreadsheet will not read as a formula."""
    raw = str(cell)
    cell = clean_text(raw, 2000)
    risky = raw.startswith(_FORMULA) or cell.lstrip().startswith(_FORMULA)
    return "'" + cell if risky else cell


def md_text(text: str) -> str:
    """``text`` for Markdown: no markup, links, images or HTML render.

    Markup characters are escaped, and so are the characters that make a
    bare address a link (``.``, ``:``, ``@``, ``/``); ``&``, ``<`` and ``>``
    become entities.
    """
    text = clean_text(text).replace("\n", " ").replace("\t", " ")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = _AUTOLINK.sub(r"\\\1", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">",
                                                                  "&gt;")


def fenced(text: str) -> str:
    """``text`` verbatim in a Markdown code fence that it cannot close."""
    text = _CONTROL.sub(" ", _encodable(text).replace("\r\n", "\n")
                        .replace("\t", "    "))
    longest = max((len(m) for m in re.findall(r"`+|~+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def csv_text(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow([neutral(r.student), neutral(r.chapter),
                         neutral(r.exercise), f"{r.points:g}",
                         f"{r.max_points:g}", neutral(r.code),
                         neutral(r.feedback)])
    return buffer.getvalue()


def assignment_totals(rows: list[Row], students: list[str]):
    """Points per student and chapter, and each chapter's maximum.

    Returns ``(chapters, points, possible)``: the chapters in order of
    first appearance, ``points[student][chapter]`` (auto-points and the
    written parts' points as scored so far) and ``possible[chapter]`` (every
    exercise's and written part's maximum).
    """
    chapters = list(dict.fromkeys(r.chapter for r in rows if r.chapter))
    points = {s: {c: 0.0 for c in chapters} for s in students}
    possible: dict[str, float] = {c: 0.0 for c in chapters}
    seen: dict[str, set] = {c: set() for c in chapters}
    for r in rows:
        if not r.chapter:
            continue
        points.setdefault(r.student, {c: 0.0 for c in chapters})
        points[r.student][r.chapter] += r.points
        if r.exercise not in seen[r.chapter]:
            seen[r.chapter].add(r.exercise)
            possible[r.chapter] += r.max_points
    return chapters, points, possible


def _title(stem: str, titles: dict) -> str:
    title = titles.get(stem)
    return f"{title} ({stem})" if title else stem


def canvas_csv(rows: list[Row], students: list[str], titles: dict) -> str:
    """Each chapter's total in the layout of Canvas's gradebook import."""
    chapters, points, possible = assignment_totals(rows, students)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID",
                     "Section"] + [neutral(_title(c, titles))
                                   for c in chapters])
    writer.writerow(["Points Possible", "", "", "", ""] +
                    [f"{possible[c]:g}" for c in chapters])
    for student in students:
        writer.writerow([neutral(student), "", "", neutral(student), ""] +
                        [f"{points[student][c]:g}" for c in chapters])
    return buffer.getvalue()


def moodle_csv(rows: list[Row], students: list[str], titles: dict) -> str:
    """Each chapter's total for Moodle's "Import grades from CSV"."""
    chapters, points, _ = assignment_totals(rows, students)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["Username"] + [neutral(_title(c, titles))
                                    for c in chapters])
    for student in students:
        writer.writerow([neutral(student)] +
                        [f"{points[student][c]:g}" for c in chapters])
    return buffer.getvalue()


def feedback_page(student: str, rows: list[Row], notebooks: dict,
                  notes: list[str], titles: dict) -> str:
    """The Markdown feedback of one student."""
    lines = [f"# Feedback for {md_text(student)}", ""]
    mine = [r for r in rows if r.chapter]
    for stem in dict.fromkeys(r.chapter for r in mine):
        ch_rows = [r for r in mine if r.chapter == stem]
        got = sum(r.points for r in ch_rows)
        top = sum(r.max_points for r in ch_rows)
        lines += [f"## {md_text(titles.get(stem, stem))} ({md_text(stem)}): "
                  f"{got:g} / {top:g} points", ""]
        graded = notebooks.get(stem)
        if graded is not None:
            lines += [f"Notebook: {md_text(graded.name)} (recognised by its "
                      f"{graded.matched_by}).", ""]
        for r in ch_rows:
            lines.append(f"- **{md_text(r.exercise)}** ({r.points:g} / "
                         f"{r.max_points:g}): {md_text(r.student_text)}")
        if graded is not None and graded.problems:
            lines += ["", "While running your notebook:"]
            lines += [f"- {md_text(p)}" for p in graded.problems]
        lines.append("")
    if notes:
        lines += ["## Other notes", ""]
        lines += [f"- {md_text(n)}" for n in notes] + [""]
    return "\n".join(lines)


def written_page(stem: str, title: str, entries: list[tuple]) -> str:
    """The written answers of one chapter, for the instructor to read.

    ``entries`` holds ``(label, prompt, rubric, [(student, text), ...])``.
    """
    lines = [f"# Written answers: {md_text(title)} ({md_text(stem)})", ""]
    for label, prompt, rubric, answers in entries:
        lines += [f"## {md_text(label)}", "", f"Prompt: {md_text(prompt)}",
                  "", "Rubric (from the solution):", "", fenced(rubric), ""]
        for student, text in answers:
            lines += [f"### {md_text(student)}", "",
                      fenced(text) if text else "(no answer written)", ""]
    return "\n".join(lines)


#: How the gradebook's files are written: an unencodable character never
#: stops a run.
TEXT = {"encoding": "utf-8", "errors": "replace"}


@contextlib.contextmanager
def swapped_in(out: Path, start_from: Path | None = None):
    """A fresh folder beside ``out`` (empty, or a copy of ``start_from``)
    to write into; it takes the place of ``out`` when the block ends, and
    is removed if the block raises, so ``out`` is never half written."""
    out = Path(out)
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    fresh = parent / f".{out.name}.{secrets.token_hex(6)}.new"
    if start_from is None:
        fresh.mkdir(mode=0o755)
    else:
        shutil.copytree(start_from, fresh, symlinks=True)
    try:
        yield fresh
        replace_folder(fresh, out)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


def write_tables(folder: Path, rows: list[Row], students: list[str],
                 titles: dict) -> None:
    """The gradebook's three tables: every row, and Canvas's and Moodle's
    one total per student and chapter."""
    (folder / GRADEBOOK).write_text(csv_text(rows), **TEXT)
    (folder / CANVAS_CSV).write_text(canvas_csv(rows, students, titles),
                                     **TEXT)
    (folder / MOODLE_CSV).write_text(moodle_csv(rows, students, titles),
                                     **TEXT)


def write(out: Path, rows: list[Row], students: list[str], graded: list,
          notes: dict, titles: dict, written: dict, run_info: dict) -> None:
    """Write the whole gradebook into a fresh folder and swap it in."""
    with swapped_in(out) as fresh:
        text = TEXT
        write_tables(fresh, rows, students, titles)
        names: dict[str, str] = {}
        taken: set[str] = set()          # case-folded: macOS, Windows
        for student in students:
            name = safe_file_name(student)
            while name.casefold() in taken:
                name += "_"
            names[student] = name
            taken.add(name.casefold())
            counted = {g.chapter: g for g in graded
                       if g.student == student and g.counted}
            page = feedback_page(student, [r for r in rows
                                           if r.student == student],
                                 counted, notes.get(student, []), titles)
            path = fresh / FEEDBACK_DIR / f"{name}.md"
            path.parent.mkdir(exist_ok=True)
            path.write_text(page, **text)
        for g in graded:
            if g.counted and g.executed:
                path = (fresh / EXECUTED_DIR / names[g.student] /
                        f"{g.chapter}.ipynb")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(g.executed, **text)
        for stem, entries in written.items():
            path = fresh / WRITTEN_DIR / f"{stem}.md"
            path.parent.mkdir(exist_ok=True)
            path.write_text(written_page(stem, titles.get(stem, stem),
                                         entries), **text)
            from .written import SCORES_DIR, scoresheet
            path = fresh / SCORES_DIR / f"{stem}.csv"
            path.parent.mkdir(exist_ok=True)
            path.write_text(scoresheet(stem, students, rows), **text)
        (fresh / RUN_FILE).write_text(json.dumps(run_info, indent=1,
                                                 sort_keys=True) + "\n",
                                      **text)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, exchange = -100, 2
    done = renameat2(at_fdcwd, os.fsencode(str(a)), at_fdcwd,
                     os.fsencode(str(b)), exchange)
    return done == 0


def replace_folder(fresh: Path, out: Path) -> None:
    """Put ``fresh`` at ``out``; the previous ``out`` is removed after."""
    if out.is_symlink():
        raise OSError(f"{out} is a symbolic link; give a real folder")
    if not out.exists():
        os.rename(fresh, out)
        return
    if not out.is_dir():
        raise OSError(f"{out} exists and is not a folder")
    if _exchange(fresh, out):
        shutil.rmtree(fresh)               # now the previous gradebook
        return
    old = out.parent / f".{out.name}.{secrets.token_hex(6)}.old"
    os.rename(out, old)
    os.rename(fresh, out)
    shutil.rmtree(old)
