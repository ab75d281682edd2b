"""The judges of the book's exercises: the grader's side, one module per
chapter.

An exercise is declared once, in the student's package
(:mod:`selfattention_exercises`): its label, kind, points, the names of its
answers, how to call them on a case (``run``), its references, its written
part. That is what a student and a graded notebook see. What decides a
grade lives here, beside the grader, and runs in the grader's process:

* ``cases(rng)``: the cases drawn from a generator (public ones from the
  exercise's fixed ``seed`` for the in-notebook check, hidden ones from the
  grader's secret seed);
* ``judge(output, **case)``: returns None or raises ``Wrong(message,
  code=...)`` / ``NotDone``, on plain data only;
* ``replay(output, **case)`` (Experiments): redoes the experiment of a
  hidden case and raises ``Wrong`` when the numbers are not what it gives;
* ``prepare(cases)``, optional: work done once for all the cases of one
  answer (:ref:`ch-cost` measures every peak in one process of its own);
* the reference helpers these use.

``selfattention_course.judges.<module>`` holds those of
``selfattention_exercises.<module>``, as ``JUDGES = {label: Judge(...)}``.
The sandbox of a graded notebook does not mount this package, so nothing a
notebook runs can call a judge, a reference helper or a case generator
(the grader judges with its own copy; a notebook's check there prints
"checked by the grader"). The in-notebook checks on a student's machine
import the same judges, on the public cases: the same diagnoses, from code
whose use cannot change a grade.

Adding an exercise
------------------
Declare it in the chapter's module
without ``cases``/``judge``/``replay``, and add its entry to ``JUDGES``
here; give every ``Wrong`` a ``code``, which the tests assert.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from selfattention_exercises import CORE_MODULES

__all__ = ["Judge", "judge_for", "judges_of", "modules", "answer_helpers",
           "named_functions"]

#: The package of the exercises whose judges live here.
EXERCISES = "selfattention_exercises"


@dataclass(frozen=True)
class Judge:
    """How the grader judges one exercise (see the module's docstring)."""

    judge: Callable
    cases: Callable | None = None
    replay: Callable | None = None
    #: ``prepare(cases)``, called once before the cases of one answer are
    #: judged: work the judge can do for all of them at once.
    prepare: Callable | None = None
    #: What a run past the time limit per exercise means, when the hidden
    #: cases hold one that only the intended method answers in time (the
    #: row reads "Not graded" with this message and the code ``too-slow``).
    slow: str | None = None
    #: How many of the last cases of one draw are there for their cost: a
    #: size that only the intended method answers in time or memory (the
    #: cases that ``slow`` speaks of). An honest answer's result on them
    #: does not hang on the draw, so the test of the book's own solutions
    #: judges them on a few draws only (``tests/book/test_exercises.py``).
    wide: int = 0


def judge_for(exercise) -> Judge:
    """The :class:`Judge` of a book exercise, from the judges module named
    like the module that declares it."""
    module = str(exercise.module)
    if not module.startswith(EXERCISES + "."):
        raise LookupError(f"{exercise.label} is declared in {module!r}, "
                          f"outside {EXERCISES}, without a judge")
    stem = module.rsplit(".", 1)[-1]
    try:
        table = importlib.import_module(f"{__name__}.{stem}").JUDGES
    except ImportError:
        raise LookupError(f"no judges module {__name__}.{stem} for "
                          f"{exercise.label}") from None
    try:
        return table[exercise.label]
    except KeyError:
        raise LookupError(f"{__name__}.{stem} has no judge for "
                          f"{exercise.label}") from None


def judges_of(exercise):
    """What judges ``exercise`` in the grader: the exercise itself when it
    was declared with its judge (an instructor's own module), else its
    :class:`Judge` here (:func:`judge_for`; raises ``LookupError``)."""
    return exercise if exercise.judge is not None else judge_for(exercise)


def modules() -> list[str]:
    """The judges modules of this package, by name (a module whose name
    starts with ``_`` holds helpers of one of them)."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__)
                  if not m.name.startswith("_"))


#: Where the functions that compute an exercise's expected answer live:
#: the grader's package and the checks' modules (whose private helpers
#: some judges import). The rest of the library is the student's to call.
HELPER_HOMES = (__name__.rsplit(".", 1)[0], EXERCISES)
#: The checks' core (plain data, the tripwire, type and shape checks, the
#: feedback): no answer.
NOT_HELPERS = tuple(f"{EXERCISES}.{stem}" for stem in CORE_MODULES)
#: At most this many functions are followed from one judge.
MAX_HELPERS = 400


def answer_helpers(judge) -> dict:
    """Every function the judge (a :class:`Judge`, or an exercise declared
    with its judge) uses to compute an expected answer:
    ``{dotted name: function}``, found by reading the code of its
    ``judge``, ``replay`` and ``prepare`` (not ``cases``, which only draws
    the inputs a notebook sees anyway) for the functions they name, and
    theirs in turn, as far as the grader's package and the checks' modules
    go (:data:`HELPER_HOMES`). Derived from the code, so that a new judge
    cannot leave one out: the source review sends for review an answer
    that reaches a copy of any of them
    (:func:`selfattention_course.review.review`)."""
    import inspect

    found: dict = {}
    todo = [f for f in (getattr(judge, k, None) for k in
                        ("judge", "replay", "prepare")) if f is not None]
    seen: set[int] = set()
    while todo and len(seen) < MAX_HELPERS:
        fn = inspect.unwrap(todo.pop())
        if id(fn) in seen or not (inspect.isfunction(fn) or
                                  inspect.isclass(fn)):
            continue
        seen.add(id(fn))
        module = getattr(fn, "__module__", "") or ""
        if not module.startswith(HELPER_HOMES) or \
                module.startswith(NOT_HELPERS):
            continue
        if inspect.isclass(fn):                 # its methods
            todo += [v for v in vars(fn).values() if inspect.isfunction(v)]
            continue
        if "<" not in fn.__qualname__ and \
                not fn.__name__.startswith("__"):   # no closure, lambda,
            # or method a dataclass writes
            found.setdefault(f"{module}.{fn.__qualname__}", fn)
        todo += named_functions(fn)
    return found


def named_functions(fn) -> list:
    """The functions and classes ``fn``'s code names (read from its
    source): its globals, attributes of modules and classes
    (``vit.forward``, ``torch.nn.MultiheadAttention``), names it imports
    inside, its closure's."""
    import ast
    import inspect
    import textwrap
    import types

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    space = dict(vars(__import__("builtins")))
    space.update(fn.__globals__)
    for node in ast.walk(tree):                 # imports inside the code
        if isinstance(node, ast.ImportFrom) and node.module and \
                not node.level:
            for alias in node.names:
                module = _module(node.module)
                found = vars(module).get(alias.name) if module else None
                found = found or _module(f"{node.module}.{alias.name}")
                if found is not None:
                    space[alias.asname or alias.name] = found
        elif isinstance(node, ast.Import):
            for alias in node.names:
                module = _module(alias.name if alias.asname else
                                 alias.name.split(".")[0])
                if module is not None:
                    space[alias.asname or alias.name.split(".")[0]] = module
    try:
        closure = inspect.getclosurevars(fn).nonlocals \
            if fn.__closure__ else {}
    except (TypeError, ValueError):
        closure = {}
    space.update(closure)
    found = []
    for node in ast.walk(tree):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in space:
            continue
        obj = space[node.id]
        for attr in reversed(parts):
            if isinstance(obj, types.ModuleType):  # (no lazy import)
                obj = vars(obj).get(attr)
            elif isinstance(obj, type):
                obj = inspect.getattr_static(obj, attr, None)
            else:
                break
        if callable(obj):
            found.append(obj)
    return found


def _module(name: str):
    """The module ``name``: imported if it is the book's own, else only if
    something imported it already (reading PyTorch's code must not import
    its compiler, say); None if neither."""
    import sys

    if name in sys.modules:
        return sys.modules[name]
    if name.split(".")[0] not in ("selfattention", "selfattention_models",
                                  "selfattention_exercises",
                                  "selfattention_course"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
