"""What every exercise shares: its declaration, its outcome, plain data.

An exercise is declared once, as an :class:`Exercise`, in its chapter's
module::

    check_softmax = Exercise(
        "ex-definition-softmax", kind="Implement", points=1,
        answers=("my_softmax",),       # the names the grader reads
        run=softmax_run,               # (my_softmax, **case) -> an output
        references=("selfattention.attention.softmax",),
        success="rows are non-negative, sum to one ...")

What decides a grade is not here: the cases (``(rng) -> list of dicts of
plain data``), the judge (``(output, **case) -> None or Wrong(message,
code)``) and an Experiment's replay live with the grader, in
``selfattention_course.judges.<module>`` (:meth:`Exercise.grading` finds
them through an entry point, without importing the grader), which the
sandbox of a graded notebook does not hold. The same declaration serves
two places:

* **in the notebook**, ``checks.check_softmax(my_softmax)`` draws the public
  cases (a fixed seed), runs the answer on them, turns each output into
  plain data, judges it and shows a :class:`.Feedback`: what is right, or
  the first thing to fix. A check never raises and never shows an answer.
* **in the grader** (``selfattention_course``), :meth:`Exercise.attempt`
  runs the answers found in the student's executed notebook on hidden cases
  drawn at grading time, inside the sandboxed kernel; only plain data comes
  back, and :meth:`Exercise.assess` calls the judge in the grader's own
  process.

``run`` raises :class:`NotDone` while the answer is the starter code and
:class:`Wrong` when the answer cannot even be run on a case; ``judge``
raises :class:`Wrong` with a diagnosis and its code (or :class:`NotDone`
for a value answer still ``None``). An answer that uses one of the
exercise's ``references`` (the library's own version of what the student
is asked to write, and the shortcuts that answer it) is reported "for
review": the notebook asks the student to write it themselves and the
grader gives it no points. The grader decides that from the submitted
source (``selfattention_course.review``); a profiling hook
(:class:`.Tripwire`) in the kernel, which recognises the references' code
objects and the copies a chapter shows on its page, adds evidence and can
never clear an answer.

Plain data (:func:`.to_plain`) is what may cross from a student's kernel to
the grader: ``None``, bools, ints, floats, strings, tuples and lists of
plain data, and NumPy arrays of bools, numbers or strings. Anything else
becomes an :class:`.Opaque` marker that only carries its type's name.

Small helpers turn an output into what a judge compares, with the same
wording in every chapter: :func:`answered`, :func:`int_pair`,
:func:`returned_array`, :func:`returned_arrays` and :func:`expect_shape`.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import sys
import traceback

import numpy as np

from .feedback import (CORRECT, FOR_REVIEW, GRADING_ENV, MARKS, NOT_DONE,
                       NOT_GRADED, REFUSED, TO_BE_READ, WRONG, Feedback,
                       _show)
from .plain import Missing, Opaque, holds_nan, to_plain, type_name
from .tripwire import (CHECKS_PACKAGE, Tripwire, _imported, _resolve,
                       signatures)

# Plain data's names are the checks' and the judges' vocabulary: they come
# from here too.
__all__ = ["Exercise", "Feedback", "NotDone", "Wrong", "NoJudge", "Opaque",
           "Missing", "to_plain", "holds_nan", "type_name", "call",
           "answered", "int_pair", "returned_array", "returned_arrays",
           "expect_shape",
           "CORRECT", "WRONG", "NOT_DONE", "FOR_REVIEW", "NOT_GRADED",
           "TO_BE_READ", "REFUSED", "MARKS", "KINDS", "GRADING_ENV"]

#: The kinds of exercise, as the titles in the chapters name them.
KINDS = ("Derive", "Prove", "Implement", "Experiment", "Predict")
#: What computes a gradient for the student: the references of every
#: exercise that asks to derive one (a module stands for all its names).
GRADIENTS = (
    "torch.autograd.grad", "torch.autograd.backward",
    "torch.Tensor.backward", "torch.autograd.functional",
    "torch.autograd.forward_ad", "torch.func.grad",
    "torch.func.grad_and_value", "torch.func.vjp", "torch.func.jvp",
    "torch.func.jacrev", "torch.func.jacfwd", "torch.func.hessian",
    "torch.func.linearize",
)


class NotDone(Exception):
    """The answer is still the starter code."""

    code = "not-done"


class NoJudge(LookupError):
    """No judge of this exercise is installed here (a graded notebook's
    sandbox holds none)."""


class Wrong(Exception):
    """The answer is wrong; the message says what to fix.

    ``code`` names the diagnosis (``"sqrt-missing"``, ``"shape"``...): the
    wording of a message may change, its code does not, and tests assert
    codes. A diagnosis raised without one has the code ``"wrong"``.
    """

    def __init__(self, message: str = "", code: str = "wrong"):
        super().__init__(message)
        self.code = str(code)


_CODE = re.compile(r"[a-z][a-z0-9-]{0,39}")


def _kernel_code(outcome: dict) -> str:
    """The diagnosis code that the student's kernel sent with a run that
    stopped (``"raised"`` when the answer crashed, say), if it has the form
    of a code; ``"run-failed"`` otherwise. It came from code the student
    could change, so it decides nothing but the gradebook's diagnosis."""
    code = outcome.get("code")
    return code if isinstance(code, str) and _CODE.fullmatch(code) \
        else "run-failed"


# ------------------------------------------------------------------ helpers
def call(fn, *args, what: str = "your function"):
    """Call student code; turn its crash into :class:`Wrong` with the reason.

    ``NotImplementedError`` counts as not done, and so does a function that
    returns ``None`` (a body left as ``...``).
    """
    if fn is None or fn is Ellipsis:
        raise NotDone("the answer is still empty; write it in the cell above")
    if not callable(fn):
        raise Wrong(f"{what} should be a function, got {type(fn).__name__}",
                    "not-a-function")
    try:
        out = fn(*args)
    except NotImplementedError:
        raise NotDone("the function still raises NotImplementedError") from None
    except MemoryError:
        raise Wrong(f"{what} ran out of memory: does it build an array "
                    f"far larger than its inputs?", "out-of-memory") from None
    except Exception as err:  # the student's bug, reported not raised
        frames = traceback.extract_tb(err.__traceback__)
        where = (f" (line {frames[-1].lineno}: {frames[-1].line})"
                 if frames else "")
        raise Wrong(f"{what} raised {type(err).__name__}: {err}{where}",
                    "raised") \
            from None
    if out is None:
        raise NotDone(f"{what} returned None; fill in its body")
    return out


def answered(value, expected: str, name: str = "answer"):
    """Return ``value``, or raise :class:`NotDone` while it is the starter.

    A value exercise starts from ``answer = None`` (or ``...``); the message
    asks to set ``name`` to ``expected``, e.g. ``"a pair (row, col)"``.
    """
    if value is None or value is Ellipsis:
        raise NotDone(f"`{name}` is still empty; set it to {expected}")
    return value


def int_pair(value, wrong: str) -> tuple[int, int]:
    """``value`` as a pair of ints, or :class:`Wrong` saying ``wrong``.

    The message is ``wrong`` followed by ``", got <repr of value>"``, e.g.
    ``int_pair(answer, "answer should be a pair (row, col)")``.
    """
    try:
        if isinstance(value, (str, Opaque)):
            raise TypeError
        a, b = (int(v) for v in value)
    except (TypeError, ValueError, OverflowError):
        raise Wrong(f"{wrong}, got {_short(value)}", "not-a-pair") \
            from None
    return a, b


def _short(value) -> str:
    text = f"<{value.type_name}>" if isinstance(value, Opaque) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def returned_array(out, what: str, kind: str = "an array of numbers"):
    """What ``what`` returned, as a float array, or :class:`Wrong`.

    The message reads "``what`` should return ``kind``, got <type>".
    """
    try:
        if isinstance(out, (str, Opaque)):
            raise TypeError
        return np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise Wrong(f"{what} should return {kind}, got "
                    f"{type_name(out)}", "type") from None


def returned_arrays(out, count: int, wrong: str, dtype=float) -> tuple:
    """The ``count`` arrays a student function returns as a tuple.

    Raises :class:`Wrong` with the message ``wrong`` unless ``out`` is a
    tuple of ``count`` items; each becomes an array of ``dtype`` (``None``
    keeps the dtype that NumPy infers).
    """
    if not (isinstance(out, tuple) and len(out) == count):
        raise Wrong(wrong, "type")
    arrays = []
    for a in out:
        if isinstance(a, (str, Opaque)) or a is None:
            raise Wrong(f"{wrong}; one item is {type_name(a)}", "type")
        try:
            arr = np.asarray(a, dtype=dtype)
        except (TypeError, ValueError):
            raise Wrong(f"{wrong}; one item is not an array of numbers",
                        "type") from None
        if arr.dtype.kind not in "biuf":
            raise Wrong(f"{wrong}; one item is not an array of numbers",
                        "type")
        arrays.append(arr)
    return tuple(arrays)


def expect_shape(arr, name: str, want: tuple, legend: str,
                 why: str = "") -> None:
    """Raise :class:`Wrong` unless ``arr`` has the shape ``want``.

    The message reads "``name`` has shape <shape>, expected ``legend`` =
    ``want``", followed by ``": why"`` if ``why`` is given; ``legend`` names
    the sizes, e.g. ``"(n_q, n_k)"``.
    """
    if arr.shape != want:
        raise Wrong(f"{name} has shape {arr.shape}, expected {legend} = "
                    f"{want}" + (f": {why}" if why else ""), "shape")


# ------------------------------------------------------------------ exercise
#: The entry-point group under which a grading package registers
#: ``find(exercise) -> judge`` (raising ``LookupError`` for an exercise it
#: does not judge).
JUDGES_GROUP = "selfattention_exercises.judges"


@functools.lru_cache(maxsize=1)
def _finders() -> tuple:
    from importlib.metadata import entry_points

    return tuple(entry_points(group=JUDGES_GROUP))


def _judge_finders():
    """The installed judges' finders; one whose package cannot be imported
    here (the sandbox hides the judges) is left out."""
    for point in _finders():
        try:
            yield point.load()
        except ImportError:
            continue


def _value_run(*answers):
    return answers[0] if len(answers) == 1 else answers


class Exercise:
    """One exercise: its answers, how to run and judge them, its points.

    Parameters
    ----------
    label : str
        The exercise's label in its chapter, ``ex-<chapter>-<name>``.
    kind : str
        One of :data:`KINDS`.
    points : float
        What a correct answer earns. 0 for an exercise whose numbers a
        student could make up: the grader then runs nothing of it and the
        written part carries the points (the check still gives feedback in
        the notebook).
    answers : tuple of str
        The names, in the student's notebook, that hold the answer: a
        function to complete or a value to set. Calling the exercise takes
        these in the same order.
    judge : callable, optional
        ``judge(output, **case)``: returns None when the output is right,
        raises :class:`Wrong` with a diagnosis, or :class:`NotDone`. It
        receives plain data only and runs in the grader's process. The
        book's exercises leave it out: their judges, cases and replays live
        with the grader, in ``selfattention_course.judges.<module>``
        (:meth:`grading` finds them), so that the package a graded notebook
        runs with holds none of them. An exercise module of an instructor
        may still give them here.
    cases : callable, optional
        ``cases(rng)``: a list of dicts of plain data, the inputs of one run
        each. Public cases come from ``np.random.default_rng(seed)``, hidden
        ones from a secret seed. None for a value answer (one empty case).
        With the judge, or in the grader's judges.
    run : callable, optional
        ``run(*answers, **case)``: calls the student's code on one case and
        returns its output; runs in the student's kernel. By default the
        answers themselves (a value exercise).
    references : tuple of str
        Dotted names of library functions that the answer must not call.
    written : str, optional
        A one-line prompt for a written part, read by the instructor.
    written_points : float
        What the written part is worth (the instructor awards it).
    success : str
        The message of a correct answer.
    seed : int
        Seed of the public cases.
    doc : str
        One line on what the check tests (the page for instructors shows
        it).
    nan_is_a_word : bool
        The right answer may name NaN in words (which rows come out NaN):
        the guard against NaN then looks at numbers only.
    replay : callable, optional
        ``replay(output, **case)``, run by the grader after ``judge``: it
        redoes an experiment (trains the model of the case) and raises
        :class:`Wrong` when the output is not what that run gives, so that
        plausible numbers made up without running the experiment fail.
        The notebook's own check leaves it out (it costs a training run
        the chapter has just done). With the judge, or in the grader's
        judges.
    module : str, optional
        The module that declares the exercise (by default the caller's):
        its judges are ``selfattention_course.judges.<last part>``.
    """

    def __init__(self, label: str, *, kind: str, points: float,
                 answers: tuple, judge=None, cases=None, run=None,
                 references: tuple = (), written: str | None = None,
                 written_points: float = 1.0, success: str = "",
                 seed: int = 0, doc: str = "", nan_is_a_word: bool = False,
                 replay=None, module: str | None = None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if not answers or not all(isinstance(a, str) and a.isidentifier()
                                  for a in answers):
            raise ValueError(f"answers must be names, got {answers!r}")
        if float(points) < 0 or (float(points) == 0 and not written):
            raise ValueError(f"points must be > 0, or 0 with a written part "
                             f"that carries them, got {points!r}")
        self.label = label
        self.kind = kind
        self.points = float(points)
        self.answers = tuple(answers)
        self.judge = judge
        self.cases = cases
        self.run = run or _value_run
        self.references = tuple(references)
        self.written = written
        self.written_points = float(written_points) if written else 0.0
        self.success = success
        self.seed = seed
        self.doc = doc
        self.nan_is_a_word = nan_is_a_word
        self.replay = replay
        self.module = module or sys._getframe(1).f_globals.get(
            "__name__", "")
        self.__doc__ = doc or f"The check of exercise {label}."

    def __repr__(self) -> str:
        return (f"Exercise({self.label!r}, kind={self.kind!r}, "
                f"points={self.points:g})")

    # -- the grading side ----------------------------------------------
    def grading(self):
        """What judges this exercise: an object with ``cases``, ``judge``
        and ``replay`` (see the parameters).

        The exercise itself when it was declared with its judge; else what
        a judges package registered for it under the entry-point group
        ``JUDGES_GROUP`` (the book's grader registers
        ``selfattention_course.judges:judge_for``): this package never
        imports the grader. Raises :class:`NoJudge` where no installed
        package judges it (in a graded notebook's sandbox).
        """
        if self.judge is not None:
            return self
        for find in _judge_finders():
            try:
                return find(self)
            except LookupError:
                continue
        raise NoJudge(self.label)

    # -- cases ---------------------------------------------------------
    def draw(self, rng: np.random.Generator, grading=None) -> list[dict]:
        """The cases drawn from ``rng`` (one empty case for a value answer),
        by ``grading`` (by default :meth:`grading`)."""
        cases = (grading or self.grading()).cases
        return [{}] if cases is None else list(cases(rng))

    def public_cases(self) -> list[dict]:
        """The cases of the in-notebook check (a fixed seed)."""
        return self.draw(np.random.default_rng(self.seed))

    # -- in the student's kernel ---------------------------------------
    def targets(self, imported_only: bool = False) -> dict:
        """The reference functions by dotted name (imported on demand).

        With ``imported_only``, only those whose module is imported
        already, and nothing is imported: the grader's signatures name the
        others' code and builtins (:class:`.Tripwire`), so a graded kernel
        need not import PyTorch (over a second of processor time) to watch
        for calls of functions that only an import inside the answer could
        reach.
        """
        found = {}
        for name in self.references:
            if imported_only:
                fn = _imported(name)
                if fn is not None:
                    found[name] = fn
                continue
            try:
                found[name] = _resolve(name)
            except (ImportError, AttributeError):
                continue
        return found

    def signatures(self) -> list[tuple[str, str, int, str]]:
        """Where the references' code lives (see ``signatures``)."""
        return signatures(self.targets())

    def attempt(self, answers, cases: list[dict], places=None) -> dict:
        """Run the answers on every case; return plain data only.

        Returns ``{"outcomes": [...], "called": [...], "tampered": bool}``:
        one outcome per case run, ``{"output": plain}``, or ``{"not_done":
        message}`` / ``{"wrong": message}`` for the case that stopped the
        run; the references the answer called; whether profiling was
        switched off meanwhile. Runs in the student's kernel. ``places``
        are the references' signatures as the grader computed them (by
        default, from the references found here).
        """
        answers = list(answers)
        missing = [a.name for a in answers if isinstance(a, Missing)]
        if missing:
            return {"outcomes": [{"not_done": (
                f"`{missing[0]}` is not defined in the notebook; run the "
                f"cell that defines it")}], "called": [], "tampered": False}
        raw, stop = [], None
        # Only the references whose module is imported already are looked
        # for (importing PyTorch to watch for its functions costs over a
        # second); the grader's ``places`` name the others.
        in_notebook = places is None
        targets = self.targets(imported_only=True)
        places = signatures(targets) if in_notebook else places
        with Tripwire(targets, places) as wire, np.errstate(all="ignore"):
            for case in cases:
                try:
                    raw.append(self.run(*answers, **copy.deepcopy(case)))
                except NotDone as err:
                    stop = {"not_done": str(err)}
                except Wrong as err:
                    stop = {"wrong": str(err), "code": err.code}
                except Exception as err:   # an answer run() cannot read
                    stop = {"wrong": (
                        f"the answer could not be checked "
                        f"({type(err).__name__}: {err}); look at its type "
                        f"and shape")}
                if stop:
                    break
        if in_notebook and len(self.targets(imported_only=True)) > len(
                targets):
            # The answer imported a reference's module as it ran, unwatched:
            # run it again, watching that module's functions too.
            return self.attempt(answers, cases)
        outcomes = [{"output": to_plain(out)} for out in raw]
        if stop:
            outcomes.append(stop)
        return {"outcomes": outcomes, "called": list(wire.called),
                "tampered": bool(wire.tampered)}

    # -- in the grader (and in the notebook) ---------------------------
    def assess(self, result: dict, cases: list[dict],
               replay: bool = True, grading=None) -> Feedback:
        """Judge what :meth:`attempt` returned for ``cases``.

        Never raises. Runs in the grader's process on plain data; with
        ``replay``, an experiment's output is also compared with the
        grader's own run of the case.
        """
        called = [n for n in result.get("called", ())
                  if n in self.references
                  or str(n).startswith(CHECKS_PACKAGE + ".")]
        if called or result.get("tampered"):
            what = ("switched off the profiling that watches for calls of "
                    "the library's own version" if not called else
                    f"calls {called[0]}, part of the checks' own code"
                    if str(called[0]).startswith(CHECKS_PACKAGE + ".") else
                    f"calls {called[0]}, the library's own version of what "
                    f"this exercise asks you to write (or the copy the "
                    f"chapter shows)")
            return self._feedback(
                FOR_REVIEW, f"your answer {what}. Write it yourself: an "
                            f"answer that calls the library's version gets "
                            f"no points")
        try:
            grading = grading or self.grading()
        except NoJudge:
            return self._feedback(NOT_GRADED, "the judges of the checks are "
                                              "not installed here")
        outcomes = list(result.get("outcomes", ()))
        prepare = getattr(grading, "prepare", None)
        if prepare is not None and outcomes:
            prepare(copy.deepcopy(cases))   # e.g. measure every case at once
        for case, outcome in zip(cases, outcomes):
            if "not_done" in outcome:
                return self._feedback(NOT_DONE, outcome["not_done"])
            if "wrong" in outcome:       # the answer could not run on it
                return self._feedback(WRONG, outcome["wrong"],
                                      code=_kernel_code(outcome))
            try:
                with np.errstate(all="ignore"):
                    grading.judge(outcome["output"], **copy.deepcopy(case))
            except NotDone as err:
                return self._feedback(NOT_DONE, str(err))
            except Wrong as err:
                return self._feedback(WRONG, str(err), code=err.code)
            except Exception as err:     # plain data of an unexpected form
                return self._feedback(
                    WRONG, f"the answer could not be checked "
                           f"({type(err).__name__}); look at its type and "
                           f"shape", code="unreadable")
            if holds_nan(outcome["output"],    # no judge may be fooled by it
                         words=not self.nan_is_a_word):
                return self._feedback(
                    WRONG, "the output holds NaN (not a number) where a "
                           "number was expected", code="nan")
            if replay and grading.replay is not None:
                try:
                    grading.replay(outcome["output"], **copy.deepcopy(case))
                except Wrong as err:
                    return self._feedback(WRONG, str(err), code=err.code)
        if len(outcomes) < len(cases):
            return self._feedback(
                NOT_GRADED, f"the answer ran on {len(outcomes)} of "
                            f"{len(cases)} cases")
        return self._feedback(CORRECT, self.success, self.points)

    def _feedback(self, status: str, message: str, points: float = 0.0,
                  code: str | None = None) -> Feedback:
        code = code or (WRONG if status == WRONG else status.replace(" ",
                                                                     "-"))
        return Feedback(self.label, status, message, points, self.points,
                        code)

    # -- the in-notebook check -----------------------------------------
    def feedback(self, *answers) -> Feedback:
        """The check's verdict on ``answers`` for the public cases.

        In the grader's kernel (where ``GRADING_ENV`` is set) a check
        judges nothing: it cannot serve a notebook as an oracle there.
        """
        if os.environ.get(GRADING_ENV):
            return self._feedback(NOT_GRADED, "checked by the grader once "
                                              "the notebook has run")
        if len(answers) != len(self.answers):
            return self._feedback(
                WRONG, f"this check takes {len(self.answers)} answer(s): "
                       f"{', '.join(self.answers)}")
        try:
            cases = self.public_cases()
            return self.assess(self.attempt(answers, cases), cases,
                               replay=False)
        except NoJudge:
            return self._feedback(NOT_GRADED, "this check needs the book's "
                                              "grading package "
                                              "(selfattention_course)")
        except Exception as err:     # a check never raises
            return self._feedback(
                WRONG, f"the answer could not be checked "
                       f"({type(err).__name__}: {err})")

    def __call__(self, *answers) -> None:
        """Check ``answers`` and show what is right or what to fix."""
        _show(self.feedback(*answers))
