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
  plain data, judges it and shows a :class:`Feedback`: what is right, or
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
(:class:`Tripwire`) in the kernel, which recognises the references' code
objects and the copies a chapter shows on its page, adds evidence and can
never clear an answer.

Plain data (:func:`to_plain`) is what may cross from a student's kernel to
the grader: ``None``, bools, ints, floats, strings, tuples and lists of
plain data, and NumPy arrays of bools, numbers or strings. Anything else
becomes an :class:`Opaque` marker that only carries its type's name.

Small helpers turn an output into what a judge compares, with the same
wording in every chapter: :func:`answered`, :func:`int_pair`,
:func:`returned_array`, :func:`returned_arrays` and :func:`expect_shape`.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import html
import importlib
import linecache
import math
import os
import re
import sys
import threading
import traceback
import types
from dataclasses import dataclass

import numpy as np

__all__ = ["Exercise", "Feedback", "NotDone", "Wrong", "NoJudge", "Opaque",
           "Missing",
           "Tripwire", "signatures", "fingerprint", "to_plain", "holds_nan",
           "type_name", "call",
           "answered", "int_pair", "returned_array", "returned_arrays",
           "expect_shape",
           "CORRECT", "WRONG", "NOT_DONE", "FOR_REVIEW", "NOT_GRADED",
           "TO_BE_READ", "REFUSED", "MARKS", "KINDS", "GRADING_ENV"]

# ------------------------------------------------------------------ names
#: Status of an exercise in a notebook check or in the gradebook.
CORRECT = "correct"
WRONG = "wrong"
NOT_DONE = "not done"
FOR_REVIEW = "for review"          # the answer calls the library's reference
NOT_GRADED = "not graded"          # the grader could not read an answer
TO_BE_READ = "to be read"          # a written answer, for the instructor
REFUSED = "refused"                # a submitted file the grader won't open
#: How each status opens a message.
MARKS = {CORRECT: "Correct", WRONG: "Not yet", NOT_DONE: "Not attempted",
         FOR_REVIEW: "For review", NOT_GRADED: "Not graded",
         TO_BE_READ: "To be read", REFUSED: "Refused"}
#: The kinds of exercise, as the titles in the chapters name them.
KINDS = ("Derive", "Prove", "Implement", "Experiment", "Predict")
#: Set in the grader's kernels: the notebook's own checks then judge nothing.
GRADING_ENV = "SELFATTENTION_GRADING"
#: The package of the checks: an answer may not call into it.
CHECKS_PACKAGE = "selfattention_exercises"

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

# Bounds of plain data: what one output may hold.
MAX_ARRAY_ITEMS = 4_000_000
MAX_STR = 10_000
MAX_ITEMS = 10_000
MAX_DEPTH = 8


@dataclass(frozen=True)
class Feedback:
    """The outcome of one exercise.

    Attributes
    ----------
    exercise : str
        The exercise's label in the book, e.g. ``"ex-definition-softmax"``.
    status : str
        One of the statuses of this module (:data:`MARKS` lists them).
    message : str
        What is right, or the first thing that is wrong.
    points : float
        Points earned (``max_points`` if correct, else 0).
    max_points : float
        Points the exercise is worth.
    code : str
        The diagnosis, stable across rewordings: the :class:`Wrong`'s
        ``code`` for a wrong answer, else the status in one word
        (``"correct"``, ``"not-done"``, ``"for-review"``...).
    """

    exercise: str
    status: str
    message: str
    points: float
    max_points: float
    code: str = ""

    @property
    def passed(self) -> bool:
        return self.status == CORRECT

    def __str__(self) -> str:
        return f"[{self.exercise}] {MARKS[self.status]}: {self.message}"

    def _repr_html_(self) -> str:
        # JupyterLab and Notebook 7 show printed text in a <pre> styled
        # `word-break: break-all` (@jupyterlab/outputarea, style/base.css),
        # which wraps a long line in the middle of a word. A block of its
        # own wraps between words; the message may quote a student's
        # error text, so it is escaped.
        return ('<div class="sa-feedback" style="white-space: pre-wrap; '
                'overflow-wrap: break-word; word-break: normal; '
                'font-family: var(--jp-code-font-family, monospace); '
                'font-size: var(--jp-code-font-size, 13px)">'
                f"{html.escape(str(self))}</div>")

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))      # the plain form a notebook keeps


def _show(feedback: Feedback) -> None:
    """Display ``feedback`` in a notebook (as HTML, with its text as the
    plain form), print it anywhere else. In the grader's kernel it is
    printed: the executed notebook keeps text outputs only."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or os.environ.get(GRADING_ENV):
        print(feedback)
        return
    from IPython.display import display

    display(feedback)


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


# ------------------------------------------------------------------ plain
class Opaque:
    """Stands for a value that is not plain data; keeps its type's name."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = str(type_name)[:80]

    def __eq__(self, other) -> bool:
        return isinstance(other, Opaque) and other.type_name == self.type_name

    def __hash__(self) -> int:
        return hash(("Opaque", self.type_name))

    def __repr__(self) -> str:
        return f"Opaque({self.type_name!r})"


class Missing:
    """An answer name that the notebook never defined."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Missing({self.name!r})"


_ARRAY_KINDS = "biufU"
_INT64 = 2 ** 63


def type_name(value) -> str:
    """The type name a message shows for ``value`` (or what it stood for)."""
    if isinstance(value, Opaque):
        return value.type_name
    return type(value).__name__


def to_plain(value, _depth: int = 0):
    """``value`` as plain data; anything else becomes :class:`Opaque`.

    Types are matched exactly (a subclass of ``tuple`` or of ``ndarray`` is
    not plain), so converting never runs a method of the value itself.
    ``...`` (a value answer's starter) becomes ``None``. Python ints beyond
    64 bits become floats; strings, sequences and arrays beyond fixed sizes
    become :class:`Opaque`.
    """
    kind = type(value)
    if value is None or kind is bool or kind is float:
        return value
    if value is Ellipsis:                 # the starter of a value answer
        return None
    if kind is Opaque:
        return value
    if kind is int:
        return value if -_INT64 <= value < _INT64 else _big_int(value)
    if kind is str:
        return value if len(value) <= MAX_STR else Opaque("str (too long)")
    if isinstance(value, np.generic) and kind is not np.object_:
        if value.dtype.kind in _ARRAY_KINDS:
            return to_plain(value.item(), _depth)
        return Opaque(kind.__name__)
    if kind is np.ndarray:
        if value.dtype.kind not in _ARRAY_KINDS:
            return Opaque(f"ndarray of {value.dtype.name}")
        if value.size > MAX_ARRAY_ITEMS:
            return Opaque("ndarray (too large)")
        return np.array(value, dtype=value.dtype.newbyteorder("="))
    if kind is tuple or kind is list:
        if _depth >= MAX_DEPTH or len(value) > MAX_ITEMS:
            return Opaque(f"{kind.__name__} (too large)")
        items = [to_plain(v, _depth + 1) for v in value]
        return tuple(items) if kind is tuple else items
    return Opaque(kind.__name__)


def _nan_text(text: str) -> bool:
    return text.strip().lower().lstrip("+-") == "nan"


def holds_nan(value, words: bool = True, _depth: int = 0) -> bool:
    """Whether plain data holds a NaN, or (``words``) a string that reads
    as one.

    A correct output never does; a judge that compares with ``abs(a - b) >
    tol`` would let NaN through, so :meth:`Exercise.assess` rejects it
    whatever the judge says.
    """
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        return words and _nan_text(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            return bool(np.isnan(value).any())
        if words and value.dtype.kind == "U" and value.size:
            return any(_nan_text(str(v)) for v in np.unique(value))
        return False
    if isinstance(value, (tuple, list)) and _depth <= MAX_DEPTH:
        return any(holds_nan(v, words, _depth + 1) for v in value)
    return False


def _big_int(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


# ------------------------------------------------------------------ tripwire
#: One import at a time: the grader resolves references from several
#: threads, and a first ``import torch`` in two threads at once fails
#: ("cannot initialize type ...: an object with that name is already
#: defined", torch 2.13's C extension).
_IMPORT_LOCK = threading.Lock()


def _resolve(dotted: str):
    """The object a dotted name names: a module's attribute, or a class's
    (``torch.Tensor.backward``)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            with _IMPORT_LOCK:
                found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr)
        return found
    raise ImportError(dotted)


def _imported(dotted: str):
    """What ``dotted`` names among the modules imported already, or None
    (nothing is imported to find it)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = sys.modules.get(".".join(parts[:cut]))
        if found is not None:
            try:
                for attr in parts[cut:]:
                    found = getattr(found, attr)
            except Exception:      # not imported, or a hostile __getattr__
                return None
            return found
    return None


def _code_objects(fn) -> list:
    """Code objects that identify ``fn``: its own and those it wraps.

    A wrapper whose code is shared by many functions (a decorator's inner
    function) is left out: it would match every function it decorates.
    """
    if isinstance(fn, (type, types.ModuleType)):
        return _member_codes(fn)
    codes, seen = [], set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        code = getattr(fn, "__code__", None)
        if code is not None and code.co_name == getattr(fn, "__name__", ""):
            codes.append(code)
        fn = getattr(fn, "__wrapped__", None)
    return codes


def _member_codes(owner) -> list:
    """The code objects of a class's own methods (``__init__``,
    ``forward``, ``__enter__``...) or of a module's public functions and
    classes: a class or a module has no code of its own."""
    codes = []
    module = isinstance(owner, types.ModuleType)
    # where that code may be written: the owner's file, and for a module
    # also its private submodules, whose public functions it re-exports
    homes = {_file_of(getattr(owner, "__module__", None) or owner.__name__)}
    for name, member in sorted(vars(owner).items()):
        where = getattr(member, "__module__", None) or ""
        if module and (name.startswith("_") or not (
                where == owner.__name__
                or where.startswith(owner.__name__ + "._"))):
            continue
        if module:
            homes.add(_file_of(where))
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        elif isinstance(member, property):
            member = member.fget
        if isinstance(member, type) and module:
            codes += _member_codes(member)
        elif isinstance(member, types.FunctionType):
            codes += _code_objects(member)
    # only code written there (not the code that, say, every namedtuple's
    # methods share)
    homes.discard(None)
    return [c for c in codes if os.path.abspath(c.co_filename) in homes]


def _file_of(module_name: str):
    """The absolute path of an imported module's file, or None."""
    path = getattr(sys.modules.get(module_name), "__file__", None)
    return os.path.abspath(path) if path else None


# Flags that say what a function is (arguments, generator...), not where or
# under which ``__future__`` imports it was compiled.
_KIND_FLAGS = 0x3ff & ~0x10


def _const_text(value) -> str:
    """A constant as text that is the same in every process."""
    if isinstance(value, types.CodeType):
        return "code:" + fingerprint(value)
    if isinstance(value, (frozenset, set)):
        return "{" + ",".join(sorted(_const_text(v) for v in value)) + "}"
    if isinstance(value, tuple):
        return "(" + ",".join(_const_text(v) for v in value) + ")"
    return f"{type(value).__name__}:{value!r}"


def _steps(code) -> list[str]:
    """The instructions of ``code``, as text free of offsets and line
    numbers; a method call and an attribute call read the same (the
    compiler picks one by whether the name was imported in the same
    source)."""
    import dis

    found = list(dis.get_instructions(code))
    index = {ins.offset: i for i, ins in enumerate(found)}
    steps = []
    for ins in found:
        op = "LOAD_ATTR" if ins.opname == "LOAD_METHOD" else ins.opname
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            arg = f"->{index.get(ins.argval, -1)}"
        elif ins.opcode in dis.hasconst:
            arg = _const_text(ins.argval)
        elif ins.arg is None:
            arg = ""
        elif isinstance(ins.argval, str):
            arg = ins.argval
        else:
            arg = repr(ins.argval)
        steps.append(f"{op} {arg}")
    return steps


def fingerprint(code) -> str:
    """What a code object does, whatever file or line it was compiled at.

    Two functions with the same name, arguments, local names and
    instructions have the same fingerprint: the library's function, a copy
    of its code object, and its source executed or retyped elsewhere
    (comments, blank lines and the docstring may differ). Computed by the
    same Python, it is the same in every process.
    """
    head = (code.co_name, code.co_argcount, code.co_posonlyargcount,
            code.co_kwonlyargcount, code.co_flags & _KIND_FLAGS,
            code.co_varnames, code.co_freevars, code.co_cellvars)
    digest = hashlib.sha256(repr(head).encode())
    digest.update("\n".join(_steps(code)).encode())
    return digest.hexdigest()[:32]


#: The ``file`` of a builtin function's signature (it has no code object).
BUILTIN = "<builtin>"


def signatures(targets: dict) -> list[tuple[str, str, int, str, str]]:
    """Where each target's code lives and what it does.

    Returns ``(name, file, first line, co_name, fingerprint)`` per code
    object: ``file`` is the path of the source file relative to the folder
    that holds its top-level package (``selfattention/attention.py``), so
    the same signature holds in any installation of the package;
    ``fingerprint`` (see :func:`fingerprint`) also matches copies of the
    code compiled anywhere else; the tripwire counts those that a chapter
    shows (see :class:`Tripwire`). A builtin (C) function has no code: its
    signature is ``(name, BUILTIN, 0, __qualname__, "")``.
    """
    found = []
    for name, fn in targets.items():
        if type(fn) is types.BuiltinFunctionType:
            found.append((name, BUILTIN, 0, fn.__qualname__, ""))
            continue
        top = importlib.import_module(name.split(".")[0])
        root = os.path.dirname(os.path.dirname(os.path.abspath(top.__file__)))
        for code in _code_objects(fn):
            path = os.path.abspath(code.co_filename)
            inside = path.startswith(root + os.sep)
            rel = os.path.relpath(path, root) if inside else \
                os.path.basename(path)
            found.append((name, rel.replace(os.sep, "/"), code.co_firstlineno,
                          code.co_name, fingerprint(code)))
    return found


def _genuine(fn, module, name: str) -> bool:
    """Whether ``fn`` is the interpreter's own ``module.name`` builtin."""
    return (type(fn) is type(len) and getattr(fn, "__name__", "") == name
            and getattr(getattr(fn, "__self__", None), "__name__", "")
            == module)


_TOOLS: dict[str, dict[str, frozenset]] = {}


def _student_tools(folder: str) -> dict[str, frozenset]:
    """Each checks module's ``__all__`` (what it offers students), read
    from its file: the profiling hook looks up nothing the notebook could
    have replaced, such as a module in ``sys.modules``."""
    if folder not in _TOOLS:
        found = {}
        for entry in sorted(os.listdir(folder)):
            if entry.endswith(".py"):
                with open(os.path.join(folder, entry), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                found[entry[:-3]] = frozenset(next((
                    ast.literal_eval(node.value) for node in tree.body
                    if isinstance(node, ast.Assign) and any(
                        getattr(t, "id", "") == "__all__"
                        for t in node.targets)), ()))
        _TOOLS[folder] = found
    return _TOOLS[folder]


class Tripwire:
    """Notice calls of given functions while a block runs (a profiling hook).

    ``with Tripwire({"selfattention.attention.softmax": fn}) as wire:``
    records in ``wire.called`` the name of every listed function that runs
    inside the block, in this thread or in threads started there, whether
    it is called directly, through ``__wrapped__``, under another name or
    as a copy of its code object. ``signatures`` (see ``signatures``) adds
    code that lives at the same place in the same file, so that a reference
    the notebook rebound to something else is still recognised, and code
    with the same ``fingerprint`` compiled from a chapter's shown cell
    (a source whose first line names the library's file,
    ``# lib/selfattention/attention.py``, as ``scripts/sync_code.py``
    writes it): the copy of the function that a chapter defines in the
    notebook. A builtin of the signatures is also recognised by its
    ``__qualname__`` (when it belongs to a module or to no object, as
    PyTorch's do, Python computes that name from nothing code can change),
    even if its package was not imported when the block began. Switching
    profiling or tracing off inside the block, or a
    profiling function that is not the interpreter's own, sets
    ``wire.tampered``.

    It is a tripwire, not a proof: code running in the same process can
    still hide a call (a copy compiled from any other source, a thread
    started before the block, the hook itself reached and emptied, or
    changes to the interpreter that a profiler does not see).
    """

    def __init__(self, targets: dict, signatures=()):
        self.codes, self.builtins, self.places = {}, {}, {}
        # co_name -> {fingerprint: (name, the first line of a shown cell)}
        self.prints: dict[str, dict[str, tuple]] = {}
        self._seen: dict[int, tuple] = {}     # id(code) -> (code, name)
        for name, fn in targets.items():
            codes = _code_objects(fn)
            for code in codes:
                self.codes[id(code)] = (code, name)
            if not codes:
                self.builtins[id(fn)] = (fn, name)
        # builtins by __qualname__, which code cannot change: those of a
        # module not imported yet, and the real ones where the notebook put
        # something else in sys.modules
        self.builtin_names: dict[str, str] = {}
        for name, rel, line, co_name, *rest in signatures:
            if rel == BUILTIN:
                self.builtin_names[co_name] = name
                continue
            self.places.setdefault((co_name, int(line)), []).append(
                ("/" + rel.lstrip("/"), name))
            if rest:
                self.prints.setdefault(co_name, {})[str(rest[0])] = (
                    name, f"# lib/{rel.lstrip('/')}")
        self._guards = {id(f): f for f in (sys.setprofile, sys.settrace)}
        self._guard_codes = {id(f.__code__): f.__code__ for f in
                             (threading.setprofile, threading.settrace)}
        self.called: list[str] = []
        self.tampered = False
        self._active = False
        self._hook = self._profile         # one bound method, compared by id
        # The checks' own code (``selfattention_exercises``) called straight
        # from code outside the library: an answer borrowing the reference
        # computations its judge uses.
        here = os.path.dirname(os.path.abspath(__file__))
        self._checks_dir = here + os.sep
        self._library_dir = os.path.dirname(here) + os.sep
        self._tools = _student_tools(here)

    def _note(self, name: str) -> None:
        if name not in self.called:
            self.called.append(name)

    def _profile(self, frame, event, arg):
        if not self._active:
            return
        if event == "call":
            code = frame.f_code
            found = self.codes.get(id(code))
            if found is not None and found[0] is code:
                self._note(found[1])
            elif self._guard_codes.get(id(code)) is code:
                self.tampered = True
            else:
                for suffix, name in self.places.get(
                        (code.co_name, code.co_firstlineno), ()):
                    if code.co_filename.replace("\\", "/").endswith(suffix):
                        self._note(name)
                if code.co_name in self.prints:
                    self._copy(code)
                if code.co_filename.startswith(self._checks_dir) and \
                        "." not in code.co_qualname and \
                        not code.co_name.startswith("<"):
                    # a module-level function (not a closure or method the
                    # check hands to the answer, such as a classifier) that
                    # its module does not offer students (its __all__)
                    caller = frame.f_back
                    if caller is not None and not caller.f_code.co_filename \
                            .startswith(self._library_dir):
                        module = os.path.basename(code.co_filename)[:-3]
                        name = f"{CHECKS_PACKAGE}.{module}"
                        if code.co_name not in self._tools.get(module, ()):
                            self._note(f"{name}.{code.co_name}")
        elif event == "c_call":
            found = self.builtins.get(id(arg))
            if found is not None and found[0] is arg:
                self._note(found[1])
            elif id(arg) in self._guards and self._guards[id(arg)] is arg:
                self.tampered = True
            elif self.builtin_names and \
                    type(arg) is types.BuiltinFunctionType and (
                        arg.__self__ is None or
                        type(arg.__self__) is types.ModuleType):
                # (a builtin bound to an object would take its qualname
                # from the object's type, which may run code of the notebook)
                name = self.builtin_names.get(arg.__qualname__)
                if name is not None:
                    self._note(name)

    def _copy(self, code) -> None:
        """Note ``code`` if it is a target's code compiled from the cell in
        which a chapter shows it."""
        seen = self._seen.get(id(code))
        if seen is None or seen[0] is not code:
            name, header = self.prints[code.co_name].get(fingerprint(code),
                                                         (None, None))
            shown = header is not None and linecache.getline(
                code.co_filename, 1).strip() == header
            seen = self._seen[id(code)] = (code, name if shown else None)
        if seen[1] is not None:
            self._note(seen[1])

    def __enter__(self) -> "Tripwire":
        if not (_genuine(sys.setprofile, "sys", "setprofile")
                and _genuine(sys.getprofile, "sys", "getprofile")):
            self.tampered = True
        self._old = sys.getprofile()
        self._old_threads = threading.getprofile()
        self._active = True
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)
        if sys.getprofile() is not self._hook:
            self.tampered = True
        return self

    def __exit__(self, *exc) -> None:
        self._active = False
        if sys.getprofile() is not self._hook:
            self.tampered = True
        sys.setprofile(self._old)
        threading.setprofile(self._old_threads)


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
        :data:`JUDGES_GROUP` (the book's grader registers
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
        others' code and builtins (:class:`Tripwire`), so a graded kernel
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
        targets = self.targets(imported_only=places is not None)
        places = signatures(targets) if places is None else places
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
