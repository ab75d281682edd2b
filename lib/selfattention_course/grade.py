"""Grade submitted notebooks: the :class:`Grader` of one notebook at a time.

``selfattention-grade SUBMISSIONS`` (:mod:`~selfattention_course.cli`;
``make grade SUBMISSIONS=folder``) reads ``SUBMISSIONS/<student>/*.ipynb``
(or loose ``SUBMISSIONS/<student>.ipynb``) as untrusted input
(:mod:`~selfattention_course.intake`), and for each notebook

1. finds its chapter (:mod:`~selfattention_course.notebook`) from the
   metadata of the student version, or else from its exercise labels (the
   metadata of a student version's exercise cells, or a chapter's
   ``{exercise}`` directives), or else from the check calls in its code;
2. draws every exercise's **hidden cases** in this process, from a secret
   seed drawn for this run;
3. runs the notebook in a sandbox (:mod:`~selfattention_course.sandbox`),
   where :mod:`~selfattention_course.runner` executes it and then harvests
   each exercise's answers on the hidden cases
   (:mod:`~selfattention_course.harvest`), returning plain data only;
4. judges each output here, with the exercise's own ``judge`` and the
   library's reference, and writes one row per exercise: correct, wrong,
   not done, "for review" (the answer calls the library's own version) or
   not graded (the run never produced an answer), and one "to be read" row
   per written answer.

Nothing the notebook prints, writes or patches enters a score: the
notebook's own check calls are silenced in the grader's kernel, and the
verdicts come from outputs on inputs the notebook never saw, and only from
results whose harvest reported success for them. The gradebook
(``gradebook.csv``, ``canvas.csv`` and ``moodle.csv`` for learning
platforms, ``feedback/``, ``executed/``, ``written/``, ``scores/``,
``run.json``) is written to a fresh folder and swapped in; a run that
grades no notebook writes nothing and exits with status 1. ``--written
SCORES`` merges filled scoresheets of the written parts into it
(:mod:`~selfattention_course.written`), after grading or, without
submissions, into the gradebook as it is.

Each row has a diagnosis code (:attr:`~selfattention_course.gradebook.Row.
code`). Those made here, besides a check's own (``Wrong(message, code)``),
the status in one word and the source review's (``review-dynamic``...):

* why an exercise was not graded: ``answer-timeout`` (its answer ran past
  the time limit per exercise; ``too-slow`` when the exercise's judge says
  what that means), ``kernel-stopped`` (the kernel died or stopped
  answering before it), ``notebook-deadline`` (the notebook reached its
  time limit before it), ``harvest-error`` (its answer could not be read in
  the notebook), ``too-large`` (the answer's outputs on the hidden cases
  were over the size of one exercise's result), ``forged-result`` (the
  result was not the one the harvest wrote and reported),
  ``not-reached`` (the run stopped before it), ``no-answer`` (nothing
  came back), or the code of the job's own problem (``past-deadline``,
  ``results-too-large``, ``no-result``: the run ended without a readable
  result);
* ``no-notebook``: the student handed in no notebook of the chapter.

The problems met with a notebook (:attr:`Graded.problems`, each a
:class:`~selfattention_course.names.Problem`) are listed for the student;
a notebook that has no chapter gets one row per problem, the problem's
code as its diagnosis. Besides those of the intake and the sandbox:
``not-a-notebook`` (the file is not a notebook's JSON), ``too-many-cells``
(over :data:`MAX_CELLS`; refused), ``unexpected-cells`` (cells of a form
its chapter could not be read from), ``unknown-chapter`` (no chapter's
exercise label or check call in it), ``grader-error``; while it ran:
``cell-timeout``, ``notebook-deadline``, ``kernel-died``, ``kernel-start``
or ``run-stopped`` (the run stopped at a cell), ``cell-raised`` (one per
cell that raised, at most five), ``strays-stopped`` (processes it left
running were stopped), ``output-truncated``; and ``regrade-budget-spent``
(a starved notebook that was not graded again).
A student whose name mixes scripts has the flag ``mixed-scripts`` on every
row (:attr:`~selfattention_course.gradebook.Row.flags`).

``--sandbox none`` needs ``--exposing`` naming all it exposes
(:data:`~selfattention_course.sandbox.EXPOSED`). With ``--jobs`` above one,
a notebook is graded again alone only when its neighbours starved it
(:meth:`Grader.grade_all`, :mod:`~selfattention_course.load`), within a
budget.
"""

from __future__ import annotations

import hashlib
import json
import math
import queue
import secrets
import shutil
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np

from . import review, wire
from .assign import find_exercises
from .gradebook import Row, clean_text, status_code
from .intake import Submission
from .judges import judges_of
from .load import cores, cut_short, starved_by_neighbours
from .names import (CORRECT, FOR_REVIEW, JOB_FILE, JOB_NOTEBOOK, MARKS,
                    NOT_DONE, NOT_GRADED, PART_EXECUTED, PART_HARVEST,
                    PART_REPORT, TO_BE_READ, Problem)
from .notebook import (MAX_CELLS, clean, identify, load_manifest,
                       safe_executed, written_answers)
from .sandbox import Limits

__all__ = ["Grader", "Graded"]


@dataclass
class Graded:
    """What grading one notebook produced."""

    student: str
    name: str
    chapter: str | None = None          # the chapter's file stem
    matched_by: str = ""
    rows: list[Row] = field(default_factory=list)
    # For the student, each with its code (module docstring).
    problems: list[Problem] = field(default_factory=list)
    executed: str | None = None         # the executed notebook (JSON)
    written: dict = field(default_factory=dict)         # label -> text
    refused: bool = False
    counted: bool = False
    seconds: float = 0.0
    # Whether a time limit or a crash cut the run short, which another job
    # running at the same time could have caused (see Grader.grade_all).
    cut_short: bool = False
    # The sandboxed run's processor seconds and its start and end
    # (time.monotonic()), measured outside the sandbox.
    cpu: float | None = None
    started: float | None = None
    ended: float | None = None
    # What sent each exercise for review, read from the source
    # (label -> findings; see review.review).
    findings: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(r.points for r in self.rows)


def _text(value, limit: int = 300) -> str:
    return clean_text(value if isinstance(value, str) else "", limit)


def _describe_stop(report: dict, nb) -> Problem | None:
    stopped = report.get("stopped")
    if not isinstance(stopped, dict):
        return None
    cell = stopped.get("cell")
    why = stopped.get("why")
    where = (f"cell {cell + 1}" if isinstance(cell, int) and
             0 <= cell < len(nb.cells) else "the start")
    text, code = {
        "timeout": (f"{where} was still running after the time limit per "
                    f"cell and was stopped (an endless loop?)",
                    "cell-timeout"),
        "deadline": (f"the notebook reached its time limit at {where}",
                     "notebook-deadline"),
        "dead kernel": (f"{where} made the kernel die (it crashed, ran out "
                        f"of memory or exited)", "kernel-died"),
        "start": ("the kernel could not start", "kernel-start")}.get(
        why, (f"the run stopped at {where}", "run-stopped"))
    return Problem(text, code)


class Grader:
    """Grades notebooks against a manifest with one sandbox backend."""

    def __init__(self, manifest: Path, backend, limits: Limits,
                 seed: int | None = None, jobs: int = 1, echo=print,
                 python_path=(), figures: bool = False,
                 regrade_budget: int | None = None):
        self.chapters, modules = load_manifest(manifest)
        self.exercises = {label: ex for label, (_, _, ex) in
                          find_exercises(modules).items()}
        self.backend = backend
        self.limits = limits
        self.seed = secrets.randbits(64) if seed is None else int(seed)
        self.jobs = max(1, int(jobs))
        self.regraded = 0
        self._places: dict[str, list] = {}
        self.not_regraded = 0
        # At most this many notebooks are graded a second time (None: one
        # in ten of those handed in, at least one).
        self.regrade_budget = regrade_budget
        self.cores = cores()
        self.echo = echo
        self.python_path = [str(Path(p).resolve()) for p in python_path]
        # Without figures (matplotlib's non-interactive backend) a notebook
        # runs faster; its executed copy then has no images.
        self.kernel_env = {} if figures else {"MPLBACKEND": "agg"}

    # ------------------------------------------------------------------
    def cases_for(self, student: str, stem: str, label: str) -> list[dict]:
        """The hidden cases of one exercise for one student's notebook."""
        key = hashlib.sha256(f"{student}\0{stem}\0{label}".encode()).digest()
        words = [int.from_bytes(key[i:i + 4], "little") for i in (0, 4, 8)]
        rng = np.random.default_rng(np.random.SeedSequence(
            self.seed, spawn_key=words))
        return self.exercises[label].draw(rng, self._judge(label))

    def grade_one(self, sub: Submission, slot: int, base: Path) -> Graded:
        """Grade one submission; never raises."""
        start = time.monotonic()
        try:
            graded = self._grade_one(sub, slot, base)
        except (Exception, SystemExit) as err:   # an unusual notebook
            graded = Graded(sub.student, sub.name)
            graded.problems.append(Problem(
                f"{sub.name} could not be graded ({type(err).__name__})",
                "grader-error"))
            # The instructor's console gets the grader's own traceback (the
            # student's row never does: it could quote the grader's files).
            self.echo("".join(traceback.format_exception(err)).rstrip())
        graded.seconds = time.monotonic() - start
        return graded

    def _grade_one(self, sub: Submission, slot: int, base: Path) -> Graded:
        graded = Graded(sub.student, sub.name)
        if sub.problem:
            graded.refused = True
            graded.problems.append(sub.problem if isinstance(
                sub.problem, Problem) else Problem(sub.problem, "refused"))
            return graded
        try:
            nb = nbformat.reads(sub.data.decode("utf-8"), as_version=4)
            count = len(nb.cells)
        except Exception as err:                    # never quote the file
            graded.problems.append(Problem(
                f"{sub.name} could not be read as a notebook "
                f"({type(err).__name__})", "not-a-notebook"))
            return graded
        if count > MAX_CELLS:
            graded.refused = True
            graded.problems.append(Problem(
                f"{sub.name} has {count} cells, more than the {MAX_CELLS} "
                f"the grader reads", "too-many-cells"))
            return graded
        try:
            stem, how = identify(nb, self.chapters)
        except Exception as err:
            stem, how = None, ""
            graded.problems.append(Problem(
                f"{sub.name} has cells of an unexpected form "
                f"({type(err).__name__})", "unexpected-cells"))
        if stem is None:
            if not graded.problems:
                graded.problems.append(Problem(
                    f"{sub.name} is not one of the chapters' notebooks (no "
                    f"known exercise label in it)", "unknown-chapter"))
            return graded
        graded.chapter, graded.matched_by = stem, how
        chapter = self.chapters[stem]
        graded.written = written_answers(nb)
        job = base / f"job-{slot}-{secrets.token_hex(4)}"
        job.mkdir(mode=0o755)
        try:
            cases, given = self._write_job(job, nb, sub.student, chapter)
            outcome = self.backend.run(job, slot, self.limits, given)
            graded.cpu = getattr(outcome, "cpu_seconds", None)
            graded.started = getattr(outcome, "started", None) or None
            graded.ended = getattr(outcome, "ended", None) or None
        finally:
            shutil.rmtree(job, ignore_errors=True)
            shutil.rmtree(job.parent / f"{job.name}-scratch",
                          ignore_errors=True)
        self._score(graded, chapter, cases, outcome, clean(nb))
        return graded

    def _write_job(self, job: Path, nb, student: str, chapter: dict):
        """Write the job folder; return the hidden cases, and the frame
        that carries them to the runner's standard input (never a file
        of the job, which the notebook could read)."""
        exercises, cases, parts = [], [], []
        for index, entry in enumerate(chapter["exercises"]):
            if not self.auto_points(entry["label"]):
                # Nothing of it runs: its points are the written part's.
                cases.append([])
                continue
            drawn = self.cases_for(student, chapter["file"], entry["label"])
            cases.append(drawn)
            name = f"cases-{index}.bin"
            parts.append((name, wire.dump_cases(drawn)))
            exercises.append({
                "label": entry["label"], "ref": entry["ref"],
                "answers": entry["answers"], "cases": name,
                "places": self.places(entry["label"])})
        spec = {"limits": self.limits.as_dict(), "exercises": exercises,
                "python_path": self.python_path,
                "kernel_env": self.kernel_env,
                "count_processes": self.backend.name != "none"}
        (job / JOB_FILE).write_text(json.dumps(spec), encoding="utf-8")
        (job / JOB_NOTEBOOK).write_text(nbformat.writes(clean(nb)),
                                        encoding="utf-8", errors="replace")
        for path in job.iterdir():
            path.chmod(0o644)
        return cases, wire.pack(parts)

    def _score(self, graded: Graded, chapter: dict, cases, outcome,
               nb) -> None:
        student, stem = graded.student, chapter["file"]
        parts, report = {}, {}
        why_none = outcome.problem
        if why_none is not None and not isinstance(why_none, Problem):
            why_none = Problem(why_none, "no-result")
        if outcome.stdout is not None:
            try:
                parts = wire.unpack(outcome.stdout, 8 + len(cases),
                                    self.limits.result_bytes)
                report = json.loads(parts[PART_REPORT].decode("utf-8"))
                if not isinstance(report, dict):
                    raise ValueError
            except (wire.WireError, KeyError, ValueError):
                parts, report = {}, {}
                why_none = Problem(
                    f"the run ended without a readable result (exit status "
                    f"{outcome.returncode})", "no-result")
        stop = _describe_stop(report, nb)
        graded.cut_short = cut_short(why_none, report)
        if why_none:
            graded.problems.append(why_none)
        if stop:
            graded.problems.append(Problem(
                stop + "; the cells after it did not run.", stop.code))
        errors = report.get("errors", [])
        if isinstance(errors, list):
            for item in errors[:5]:
                if isinstance(item, list) and len(item) == 2 and \
                        isinstance(item[0], int):
                    graded.problems.append(Problem(
                        f"cell {item[0] + 1} raised {_text(item[1], 200)}",
                        "cell-raised"))
        strays = report.get("strays")
        if isinstance(strays, int) and strays > 0:
            graded.problems.append(Problem(
                f"{strays} process(es) that the notebook started were still "
                f"running and were stopped before its answers were called",
                "strays-stopped"))
        truncated = report.get("truncated", [])
        if isinstance(truncated, list) and truncated:
            graded.problems.append(Problem(
                f"the output of {len(truncated)} cell(s) went over the "
                f"limit; the rest of it was dropped", "output-truncated"))
        harvest = report.get("harvest", {})
        harvest = harvest if isinstance(harvest, dict) else {}
        flagged = self.review(nb, chapter)
        graded.findings = {label: found for label, found in flagged.items()
                           if found}
        for index, entry in enumerate(chapter["exercises"]):
            ex = self.exercises[entry["label"]]
            if not self.auto_points(entry["label"]):
                graded.rows.append(Row(
                    student, stem, entry["label"], 0.0, 0.0,
                    f"{MARKS[TO_BE_READ]}: no auto-points; the written part "
                    f"carries this exercise's points",
                    code=status_code(TO_BE_READ), status=TO_BE_READ))
                self._written_row(graded, entry, stem)
                continue
            slot = sum(self.auto_points(e["label"])    # its place in the job
                       for e in chapter["exercises"][:index])
            data = parts.get(PART_HARVEST.format(index=slot))
            fb = None
            # A result counts only when the runner saw its harvest report
            # success for it (runner: "Results only the harvest can write").
            if harvest.get(str(slot)) != "ok":
                data = None
            if data is not None:
                try:
                    result = wire.load_result(data, len(cases[index]))
                    fb = ex.assess(result, cases[index],
                                   grading=self._judge(entry["label"]))
                except wire.WireError:
                    fb = None
            findings = flagged.get(entry["label"])
            if findings:
                # Decided here, from the source, whatever the run did: what
                # the kernel reported (the tripwire) may add to it, never
                # clear it, and a run cut short does not hide it.
                status, points = FOR_REVIEW, 0.0
                code = review.diagnosis(findings)
                message = clean_text(review.explain(findings), 500)
            elif fb is None:
                reason = why_none or _harvest_problem(
                    harvest.get(str(slot)), stop)
                status, points, message = NOT_GRADED, 0.0, reason
                code = reason.code
                slow = getattr(self._judge(entry["label"]), "slow",
                               None)
                if slow and not why_none and \
                        harvest.get(str(slot)) == "timeout":
                    message = (f"its answer was still running after the "
                               f"time limit per exercise: {slow}")
                    code = "too-slow"
            else:
                status, points, code = fb.status, fb.points, fb.code
                message = clean_text(fb.message, 500)
                if status not in (CORRECT, FOR_REVIEW) and stop:
                    message += f" (the run stopped: {stop})"
            graded.rows.append(Row(student, stem, entry["label"],
                                   min(points, float(entry["points"])),
                                   float(entry["points"]),
                                   f"{MARKS[status]}: {message}",
                                   code=code, status=status))
            self._written_row(graded, entry, stem)
        executed = parts.get(PART_EXECUTED)
        if executed is not None:
            try:
                graded.executed = safe_executed(
                    nbformat.reads(executed.decode("utf-8"), as_version=4))
            except Exception:
                graded.executed = None

    def places(self, label: str) -> list:
        """Where the code of the exercise's references lives (imports them
        once; :meth:`grade_all` fills this before its threads start)."""
        if label not in self._places:
            self._places[label] = self.exercises[label].signatures()
        return self._places[label]

    def auto_points(self, label: str) -> bool:
        """Whether the grader runs and judges the exercise's code: not when
        its points are all the written part's (numbers a student could
        make up)."""
        return self.exercises[label].points > 0

    @staticmethod
    def _written_row(graded: Graded, entry: dict, stem: str) -> None:
        written = entry.get("written")
        if not written:
            return
        student = graded.student
        text = graded.written.get(entry["label"], "")
        status = TO_BE_READ if text else NOT_DONE
        mark = MARKS[status]
        note = (f"the answer is in written/{stem}.md; rubric: "
                f"{clean_text(_rubric_part(written['rubric']), 400)}"
                if text else "no written answer")
        graded.rows.append(Row(
            student, stem, f"{entry['label']} (written)", 0.0,
            float(written["points"]), f"{mark}: {note}",
            for_student=f"{mark}: your instructor reads it" if text
            else None, code=status_code(status), status=status))

    def review(self, nb, chapter: dict) -> dict:
        """What sends each exercise of ``nb`` for review, read from its
        source in this process (:mod:`~selfattention_course.review`)."""
        spec = {e["label"]: (e["answers"],
                             self.exercises[e["label"]].references,
                             self._judge(e["label"]))
                for e in chapter["exercises"]}
        try:
            return review.review(nb, spec, chapter.get("book_cells", ()))
        except (RecursionError, MemoryError, ValueError) as err:
            finding = review.Finding(
                "dynamic", 1, 1, "", f"could not be read by the grader "
                                     f"({type(err).__name__})")
            return {label: [finding] for label in spec}

    def _judge(self, label: str):
        """The exercise's judge, whose helpers' copies the source review
        sends for review (None when it has none here)."""
        try:
            return judges_of(self.exercises[label])
        except LookupError:
            return None

    # ------------------------------------------------------------------
    def grade_all(self, submissions: list[Submission]) -> list[Graded]:
        """Grade every submission, ``jobs`` at a time, in order.

        With more than one job, a notebook is graded once more at the end,
        alone, only if a neighbour starved it: its run was cut short (its
        kernel died, or a time limit stopped it while it had less than half
        a processor) *and* the notebooks graded beside it used, on average
        over its run, all but half a processor of the machine
        (:func:`starved_by_neighbours`). A notebook that sleeps into its
        limit is not starved; one that spins is not either. At most
        :meth:`budget` notebooks are graded again; the second result counts.
        """
        for label in self.exercises:        # imports, in this thread only
            if self.auto_points(label):
                self.places(label)
        slots: queue.Queue[int] = queue.Queue()
        for slot in range(self.jobs):
            slots.put(slot)
        base = Path(tempfile.mkdtemp(prefix="selfattention-grade-"))

        def one(sub: Submission) -> Graded:
            slot = slots.get()
            try:
                g = self.grade_one(sub, slot, base)
            finally:
                slots.put(slot)
            self.echo(f"{g.student:16.16s} {g.name[:32]:32s} -> "
                      f"{g.chapter or '?':18s} {g.total:g} points"
                      + (f"  [{clean_text(g.problems[0], 100)}]"
                         if g.problems else ""))
            return g

        try:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                graded = list(pool.map(one, submissions))
            if self.jobs > 1:
                budget = self.budget(len(submissions))
                for i, g in enumerate(graded):
                    if not g.cut_short or not starved_by_neighbours(
                            g, graded, self.cores):
                        continue
                    if self.regraded >= budget:
                        self.not_regraded += 1
                        g.problems.append(Problem(
                            f"the notebooks graded beside this one kept "
                            f"the processors busy while it ran, but the "
                            f"budget of {budget} second gradings was spent; "
                            f"the instructor can grade it again alone "
                            f"(--jobs 1)", "regrade-budget-spent"))
                        continue
                    self.regraded += 1
                    graded[i] = one(submissions[i])
            return graded
        finally:
            shutil.rmtree(base, ignore_errors=True)

    def budget(self, count: int) -> int:
        """How many notebooks of ``count`` may be graded a second time."""
        if self.regrade_budget is not None:
            return max(0, int(self.regrade_budget))
        return max(1, math.ceil(count / 10))


def _rubric_part(rubric: str) -> str:
    """The solution's paragraph on the written part when it has one (it
    starts with "**Rubric"), else the whole solution prose."""
    start = rubric.find("**Rubric")
    return rubric[start:] if start >= 0 else rubric


def _harvest_problem(status, stop: Problem | None) -> Problem:
    """Why an exercise has no answer, with its code (module docstring)."""
    if status == "timeout":
        return Problem("its answer was still running after the time limit "
                       "per exercise (an endless loop?)", "answer-timeout")
    if status in ("dead", "stuck"):
        return Problem("the kernel stopped answering before this exercise",
                       "kernel-stopped")
    if status == "deadline":
        return Problem("the notebook reached its time limit before this "
                       "exercise", "notebook-deadline")
    if status == "error":
        return Problem("its answer could not be read in the notebook",
                       "harvest-error")
    if status == "too-large":
        return Problem("its answer's outputs on the hidden cases came to "
                       "more than the grader reads back of one exercise "
                       f"({wire.MAX_BUNDLE // 2 ** 20} MB), so they were "
                       "not read", "too-large")
    if status == "forged":
        return Problem("its result was not the one the grader's harvest "
                       "wrote and reported (something in the notebook "
                       "wrote, replaced or blocked the harvest's result), "
                       "so it has none", "forged-result")
    if stop:
        return Problem(f"the run never reached it: {stop}", "not-reached")
    return Problem("no answer came back from the notebook's run",
                   "no-answer")


