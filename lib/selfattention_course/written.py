"""Written parts scored by hand: Gradescope's questions and scoresheets.

The manifest holds each written part's points, prompt and rubric (the
solution's prose, whose paragraph "**Rubric for the written part...**" gives
the points for each thing an answer must say). From it:

* :func:`questions`: one Markdown file per chapter for Gradescope (written
  by ``make gradescope`` beside the chapter's autograder): each written part
  with its points, prompt and rubric items, ready to create the manual
  questions;
* :func:`scoresheet`: the gradebook's ``scores/<chapter>.csv``, one row per
  student and written part (``student,exercise,points,comment``, points
  blank), for the instructor to fill in;
* :func:`merge`: ``selfattention-grade --written scores/`` reads the filled
  scoresheets and puts their points into the gradebook's written rows, so
  that ``gradebook.csv``, ``canvas.csv`` and ``moodle.csv`` carry one total
  per chapter and student. A blank points cell leaves its part unscored.

A scoresheet is refused whole, with every problem named by file and row,
when it names an unknown student, chapter or exercise, gives more points
than the part's maximum (or fewer than 0), repeats a student and exercise,
holds a number that is not one, or lacks the columns; then nothing is
written and the gradebook stays as it was. A merge writes a fresh folder
and swaps it in (:func:`~selfattention_course.gradebook.swapped_in`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from .gradebook import (TEXT, Row, clean_text, md_text, neutral, swapped_in,
                        write_tables)
from .names import (COLUMNS, FEEDBACK_DIR, GRADEBOOK, RUN_FILE)

__all__ = ["SCORES_DIR", "SHEET_COLUMNS", "WRITTEN_SUFFIX", "SCORED",
           "Score", "ScoresheetError", "rubric_items", "questions",
           "scoresheet", "read_scoresheets", "apply", "read_gradebook",
           "merge"]

#: The gradebook's folder of scoresheets, one CSV per chapter.
SCORES_DIR = "scores"
SHEET_COLUMNS = ("student", "exercise", "points", "comment")
#: How the gradebook names a written part's row.
WRITTEN_SUFFIX = " (written)"
#: The diagnosis code of a written part scored by the instructor.
SCORED = "scored-by-hand"

_NUMBER_WORDS = {"half a": 0.5, "a": 1.0, "one": 1.0, "two": 2.0,
                 "three": 3.0, "four": 4.0, "five": 5.0, "six": 6.0}
# "Two points for ...", "One for ...", "Half a point for ...".
_AWARD = r"\b(half a|a|one|two|three|four|five|six)(?:\s+points?)?\s+for\b"
_ITEM = re.compile("^" + _AWARD[2:], re.IGNORECASE)
_AWARDS = re.compile(_AWARD, re.IGNORECASE)
_ASIDE = re.compile(r"\([^()]*\)")
# A sentence ends at ". " before a capital letter or "(" (decimals such as
# 0.25 and abbreviations inside parentheses stay whole).
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


def _rubric_paragraph(rubric: str) -> tuple[str, str]:
    """The rubric's heading and its paragraph, else ``("", rubric)``."""
    start = rubric.find("**Rubric")
    if start < 0:
        return "", rubric.strip()
    text = rubric[start:].strip()
    end = text.find("**", 2)
    if end < 0:
        return "", text
    return text[2:end].strip(), text[end + 2:].split("\n\n")[0].strip()


def rubric_items(rubric: str, points: float) -> list[tuple[float, str]]:
    """The rubric's items: ``(points, text)`` for each sentence that opens
    with points ("Two points for ...", "One for ...", "Half a point for
    ..."), the sentences after it added to its text. Its points are those
    the sentence awards outside parentheses ("One point for the pattern,
    two for the reason (one if ...)": 3). Without such sentences, one item
    worth ``points``: the whole rubric."""
    _, paragraph = _rubric_paragraph(rubric)
    items: list[list] = []
    lead: list[str] = []
    for sentence in _SENTENCE.split(" ".join(paragraph.split())):
        found = _ITEM.match(sentence)
        if found:
            plain = sentence
            while _ASIDE.search(plain):
                plain = _ASIDE.sub("", plain)
            items.append([sum(_NUMBER_WORDS[m.group(1).lower()]
                              for m in _AWARDS.finditer(plain)), sentence])
        elif items:
            items[-1][1] += " " + sentence
        else:
            lead.append(sentence)
    if not items:
        return [(float(points), " ".join(lead) or paragraph)]
    return [(float(p), text) for p, text in items]


def questions(chapter: dict) -> str:
    """The written parts of one chapter as Gradescope's manual questions."""
    lines = [f"# Written questions: {chapter['title']} ({chapter['file']})",
             "", "One manual question per written part, with the "
             "solution's rubric: one item per sentence that awards points, "
             "worth the points it awards outside parentheses (the "
             "parentheses give partial credit). Where the items do not add "
             "up to the question's points, the rubric says so below.", ""]
    parts = [ex for ex in chapter["exercises"] if ex.get("written")]
    if not parts:
        lines.append("This chapter has no written part.")
    for number, ex in enumerate(parts, 1):
        part = ex["written"]
        lines += [f"## Question {number}: {ex['label']} "
                  f"({part['points']:g} points)", "", "Prompt:", "",
                  part["prompt"].strip(), "", "Rubric items:", ""]
        items = rubric_items(part["rubric"], part["points"])
        lines += [f"- {points:g} pt: {text}" for points, text in items]
        total = sum(points for points, _ in items)
        if total != part["points"]:
            lines += ["", f"The items add up to {total:g} points, the "
                          f"question is worth {part['points']:g}: read the "
                          f"rubric whole before creating them."]
        lines.append("")
    return "\n".join(lines)


def _plain(cell: str) -> str:
    """A cell as written before :func:`~selfattention_course.gradebook.
    neutral` quoted it (the scoresheets this module writes quote a cell
    that a spreadsheet would run)."""
    rest = cell[1:]
    return rest if cell.startswith("'") and neutral(rest) == cell else cell


def scoresheet(stem: str, students: list[str], rows: list[Row]) -> str:
    """A chapter's scoresheet: one row per student and written part, with
    the points and comment already merged (blank when none)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SHEET_COLUMNS)
    for row in rows:
        if row.chapter != stem or not row.exercise.endswith(WRITTEN_SUFFIX) \
                or row.student not in students:
            continue
        scored = row.code == SCORED
        comment = row.feedback.split(": ", 1)[1] if scored and \
            ": " in row.feedback else ""
        writer.writerow([neutral(row.student),
                         neutral(row.exercise.removesuffix(WRITTEN_SUFFIX)),
                         f"{row.points:g}" if scored else "",
                         neutral(comment)])
    return buffer.getvalue()


@dataclass
class Score:
    """One filled row of a scoresheet."""

    student: str
    chapter: str
    exercise: str            # the written part's label
    points: float
    comment: str
    where: str               # "scores/01_x.csv, row 3"


class ScoresheetError(ValueError):
    """Scoresheets that cannot be merged; its text names every problem."""


def read_scoresheets(folder: Path, maxima: dict[tuple[str, str], float],
                     students: set[str],
                     rows: set[tuple[str, str, str]] | None = None
                     ) -> list[Score]:
    """Every filled row of ``folder/<chapter>.csv``, checked; raises
    :class:`ScoresheetError` naming each bad file and row.

    ``rows`` holds the gradebook's written rows as ``(student, chapter,
    label)``: a score for a student without that row (no notebook of the
    chapter was graded) is refused too.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ScoresheetError(f"{folder} is not a folder of scoresheets")
    chapters = {stem for stem, _ in maxima}
    problems: list[str] = []
    scores: list[Score] = []
    seen: dict[tuple[str, str, str], str] = {}
    sheets = sorted(p for p in folder.iterdir() if p.suffix == ".csv")
    if not sheets:
        raise ScoresheetError(f"{folder} holds no scoresheet (.csv)")
    for path in sheets:
        stem = path.stem
        if stem not in chapters:
            problems.append(f"{path}: no chapter with written parts is "
                            f"called {stem!r} (known: {sorted(chapters)})")
            continue
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as err:
            problems.append(f"{path}: cannot be read ({err})")
            continue
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if header is None or tuple(h.strip().lower() for h in header) != \
                SHEET_COLUMNS:
            problems.append(f"{path}, row 1: the columns must be "
                            f"{','.join(SHEET_COLUMNS)}")
            continue
        for number, cells in enumerate(reader, 2):
            where = f"{path}, row {number}"
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(SHEET_COLUMNS):
                problems.append(f"{where}: {len(cells)} cells, not "
                                f"{len(SHEET_COLUMNS)}")
                continue
            student, exercise, points, comment = cells
            label = _plain(exercise).strip().removesuffix(WRITTEN_SUFFIX)
            comment = _plain(comment)
            top = maxima.get((stem, label))
            bad = []
            if student not in students:
                bad.append(f"no student {clean_text(student, 80)!r} in the "
                           f"gradebook")
            if top is None:
                bad.append(f"{clean_text(label, 80)!r} is not a written "
                           f"part of {stem}")
            elif student in students and rows is not None and \
                    (student, stem, label) not in rows:
                bad.append(f"{clean_text(student, 80)!r} has no row for "
                           f"{clean_text(label, 80)!r} (no notebook of "
                           f"{stem} was graded)")
            if not points.strip():
                if not bad:
                    continue                     # not scored yet
            else:
                try:
                    value = float(points.strip())
                    if not math.isfinite(value):
                        raise ValueError
                except ValueError:
                    bad.append(f"the points {clean_text(points, 40)!r} are "
                               f"not a number")
                else:
                    if value < 0:
                        bad.append(f"{value:g} points is below 0")
                    elif top is not None and value > top:
                        bad.append(f"{value:g} points is above the "
                                   f"part's {top:g}")
            key = (stem, student, label)
            if key in seen:
                bad.append(f"{clean_text(student, 80)!r} and "
                           f"{clean_text(label, 80)!r} were already scored "
                           f"in {seen[key]}")
            else:
                seen[key] = f"row {number}"
            if bad:
                problems.append(f"{where}: " + "; ".join(bad))
                continue
            scores.append(Score(student, stem, label, value,
                                clean_text(comment, 1_000), where))
    if problems:
        raise ScoresheetError("the scoresheets were not merged:\n" +
                              "\n".join(problems))
    return scores


def apply(rows: list[Row], scores: list[Score]) -> list[Row]:
    """The gradebook's rows with each scored written part's points."""
    by_key = {(s.student, s.chapter, s.exercise + WRITTEN_SUFFIX): s
              for s in scores}
    out = []
    for row in rows:
        score = by_key.get((row.student, row.chapter, row.exercise))
        if score is None:
            out.append(row)
            continue
        text = (f"scored by the instructor: {score.comment}"
                if score.comment else "scored by the instructor")
        out.append(Row(row.student, row.chapter, row.exercise, score.points,
                       row.max_points, text, code=SCORED, status="scored",
                       flags=row.flags))
    return out


def read_gradebook(folder: Path) -> tuple[list[Row], list[str]]:
    """The rows and students of a gradebook's ``gradebook.csv``."""
    with open(Path(folder) / GRADEBOOK, encoding="utf-8",
              newline="") as handle:
        reader = csv.reader(handle)
        if tuple(next(reader, ())) != COLUMNS:
            raise ScoresheetError(f"{folder / GRADEBOOK} does not have the "
                                  f"gradebook's columns")
        rows = [Row(student, chapter, exercise, float(points),
                    float(top), feedback, code=code)
                for student, chapter, exercise, points, top, code, feedback
                in reader]
    return rows, list(dict.fromkeys(r.student for r in rows))


def _feedback_note(scores: list[Score], student: str) -> str:
    mine = [s for s in scores if s.student == student]
    if not mine:
        return ""
    lines = ["", "## Written parts, scored by your instructor", ""]
    lines += [f"- **{md_text(s.chapter)}, {md_text(s.exercise)}**: "
              f"{s.points:g} points" + (f"; {md_text(s.comment)}"
                                        if s.comment else "")
              for s in scores if s.student == student]
    return "\n".join(lines) + "\n"


def merge(gradebook: Path, folder: Path) -> list[Row]:
    """Merge the scoresheets of ``folder`` into the gradebook folder
    ``gradebook`` (a fresh copy swapped in); return its new rows.

    Raises :class:`ScoresheetError` (the gradebook unchanged) when a
    scoresheet is bad.
    """
    gradebook = Path(gradebook)
    rows, students = read_gradebook(gradebook)
    info = {}
    run_file = gradebook / RUN_FILE
    if run_file.exists():
        info = json.loads(run_file.read_text(encoding="utf-8"))
    chapters = info.get("written_parts") or {}
    maxima = {(stem, label): float(points) for stem, parts in
              chapters.items() for label, points in parts.items()}
    if not maxima:                   # an older gradebook: from its rows
        maxima = {(r.chapter, r.exercise.removesuffix(WRITTEN_SUFFIX)):
                  r.max_points for r in rows
                  if r.exercise.endswith(WRITTEN_SUFFIX)}
    present = {(r.student, r.chapter, r.exercise.removesuffix(
        WRITTEN_SUFFIX)) for r in rows if r.exercise.endswith(WRITTEN_SUFFIX)}
    scores = read_scoresheets(folder, maxima, set(students), present)
    rows = apply(rows, scores)
    titles = info.get("titles") or {}
    with swapped_in(gradebook, start_from=gradebook) as fresh:
        text = TEXT
        write_tables(fresh, rows, students, titles)
        sheets = fresh / SCORES_DIR
        for stem in sorted({stem for stem, _ in maxima}):
            sheets.mkdir(exist_ok=True)
            (sheets / f"{stem}.csv").write_text(
                scoresheet(stem, students, rows), **text)
        pages = fresh / FEEDBACK_DIR
        marker = "\n## Written parts, scored by your instructor\n"
        for page in sorted(pages.glob("*.md")) if pages.is_dir() else []:
            body = page.read_text(encoding="utf-8").split(marker)[0]
            first = body.splitlines()[0] if body else ""
            student = next((s for s in students
                            if first == f"# Feedback for {md_text(s)}"), None)
            if student is not None:
                page.write_text(body.rstrip("\n") + "\n" +
                                _feedback_note(scores, student), **text)
        info["written_merged_from"] = str(Path(folder).resolve())
        (fresh / RUN_FILE).write_text(json.dumps(info, indent=1,
                                                 sort_keys=True) + "\n",
                                      **text)
    return rows
