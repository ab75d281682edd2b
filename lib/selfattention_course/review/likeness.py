"""When code is a reference's: the same object, the same body pasted or
retyped under other names, or an object of PyTorch or the library that holds
a reference inside; and the judges' helpers, matched by the shapes of their
statements."""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types

from .cells import _NamedAttributes, walk
from .rules import TRUSTED_ROOTS
from .scope import _import


def _lookup(dotted: str):
    """The object a dotted name stands for, imported only from modules the
    course installs (never a module the notebook names otherwise)."""
    parts = dotted.split(".")
    if parts[0] not in TRUSTED_ROOTS or "?" in parts:
        return None
    for cut in range(len(parts), 0, -1):
        obj = _import(".".join(parts[:cut]))
        if obj is None:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _same(obj, ref) -> bool:
    if obj is None:
        return False
    try:
        return obj is ref or inspect.unwrap(obj) is inspect.unwrap(ref)
    except Exception:
        return False


def _body_dump(node) -> str:
    """A function's code without its name's place, decorators, docstring."""
    node = ast.parse(ast.unparse(node)).body[0]
    node.decorator_list = []
    body = node.body
    if body and isinstance(body[0], ast.Expr) and \
            isinstance(body[0].value, ast.Constant) and \
            isinstance(body[0].value.value, str):
        node.body = body[1:] or [ast.Pass()]
    return ast.dump(node, annotate_fields=False)


class _Reference:
    """One reference of an exercise: its name, object and code."""

    def __init__(self, dotted: str):
        self.dotted = dotted
        self.short = dotted.rsplit(".", 1)[-1]
        self.obj = _lookup(dotted)
        self.method = False
        self.code = self.shape = None
        if self.obj is not None:
            owner = _lookup(dotted.rsplit(".", 1)[0])
            self.method = isinstance(owner, type)     # torch.Tensor.backward
            try:
                source = textwrap.dedent(inspect.getsource(
                    inspect.unwrap(self.obj)))
                tree = ast.fix_missing_locations(_NamedAttributes().visit(
                    ast.parse(source))).body[0]
                if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.code = _body_dump(tree)
                    # retyped under other names: for a reference of a
                    # few statements at least (a two-line softmax is
                    # anyone's)
                    if _size(tree) >= SHAPE_NODES and \
                            len(_steps(tree)) >= MIN_STEPS:
                        self.shape = _shape_dump(tree)
            except (OSError, TypeError, SyntaxError, IndexError):
                pass

    def matches(self, dotted: str) -> bool:
        if dotted == self.dotted:
            return True
        if isinstance(self.obj, types.ModuleType) and \
                dotted.startswith(self.dotted + "."):
            return True                      # a module: any of its names
        if dotted.rsplit(".", 1)[-1] != self.short:
            return False
        return _same(_lookup(dotted), self.obj)


@functools.lru_cache(maxsize=None)
def _reference(dotted: str) -> _Reference:
    """The reference ``dotted``, read once per process (finding its source
    and reading its code is most of the work of a review): the grader's own
    objects, which no submitted notebook runs in this process to change."""
    return _Reference(dotted)


class _Helper:
    """A function a judge computes an expected answer with (see
    :func:`selfattention_course.judges.answer_helpers`): a copy of it,
    pasted or retyped under other names, is no answer of the student's."""

    def __init__(self, dotted: str, fn):
        self.dotted = dotted
        self.short = dotted.rsplit(".", 1)[-1]
        self.code = self.shape = None
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(
                inspect.unwrap(fn))))
        except (OSError, TypeError, SyntaxError, IndexError):
            return
        # read as a notebook's cell is (getattr(x, "name") as x.name)
        tree = ast.fix_missing_locations(
            _NamedAttributes().visit(tree)).body[0]
        self.steps = ()
        if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.code = _body_dump(tree).replace(f"'{self.short}'",
                                                 "'?'", 1)
            if _size(tree) >= SHAPE_NODES:
                self.shape = _shape_dump(tree)
                steps = _steps(tree)
                if len(steps) >= MIN_STEPS:
                    self.steps = steps

    def copied_by(self, theirs: "Candidate") -> bool:
        """Whether the student's function ``theirs`` is this helper."""
        if self.code is None or theirs.code is None:
            return False
        if theirs.code.replace(f"'{theirs.node.name}'", "'?'",
                               1) == self.code:
            return True
        if self.shape is None or theirs.shape is None:
            return False
        if theirs.shape == self.shape:
            return True
        if not self.steps:
            return False
        return _in_order(self.steps, theirs.steps) or (
            len(self.steps) >= FUZZY_STEPS and _shared(
                self.steps, theirs.steps) >= FUZZY_SHARE * len(self.steps))


class Candidate:
    """A function of the student's as the comparisons read it: its code,
    its shape (None below SHAPE_NODES syntax nodes) and its statements'
    shapes, each worked out once (a review compares one function with
    every reference and helper of every exercise)."""

    def __init__(self, node, code: str | None):
        self.node, self.code = node, code

    @functools.cached_property
    def shape(self) -> str | None:
        if _size(self.node) < SHAPE_NODES:
            return None
        return _shape_dump(self.node)

    @functools.cached_property
    def steps(self) -> list[str]:
        return _steps(self.node)


#: What a copy of a reference or a helper can be written as: a def (a
#: method, an inner one) or a lambda (read as a def returning its body).
COPYABLE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def as_def(node):
    """A lambda as the def that returns its body (named ``lambda_``)."""
    if not isinstance(node, ast.Lambda):
        return node
    made = ast.FunctionDef(name="lambda_", args=node.args,
                           body=[ast.Return(value=node.body)],
                           decorator_list=[], returns=None)
    return ast.fix_missing_locations(ast.copy_location(made, node))


def candidate(node) -> Candidate:
    """The student's function ``node`` (a def, or a lambda read as one) as
    a :class:`Candidate`. Its code, shape and steps are all read from its
    text, so a text up to :data:`_KEPT_CHARS` characters is read once per
    process: a class hands in the same answers again and again."""
    text = ast.unparse(node)
    if len(text) <= _KEPT_CHARS:
        try:
            return _kept_candidate(text)
        except SyntaxError:             # unparsed into what does not parse
            pass
    try:
        code = _body_dump(node)
    except SyntaxError:
        code = None
    return Candidate(node, code)


_KEPT_CHARS = 16_384


@functools.lru_cache(maxsize=2048)
def _kept_candidate(text: str) -> Candidate:
    node = ast.parse(text).body[0]
    return Candidate(node, _body_dump(node))


#: A helper of at least this many statements is also recognised when at
#: least FUZZY_SHARE of its statements' shapes are found in a function,
#: in any order (statements trimmed, moved, added).
FUZZY_STEPS = 10


FUZZY_SHARE = 0.75


def _shared(wanted: list[str], steps: list[str]) -> int:
    """How many of ``wanted`` are among ``steps`` (each used once)."""
    from collections import Counter

    return sum((Counter(wanted) & Counter(steps)).values())


#: A helper of at least this many statements is also recognised with
#: statements added between its own (each statement compared by its
#: shape): fewer could be anyone's (``X = X.copy()``, then a return).
MIN_STEPS = 4


def _steps(node) -> list[str]:
    """The shapes of a function's statements, one by one (docstring left
    out, each with its names renamed in order of appearance)."""
    body = ast.parse(_without_docstring(node)).body[0].body
    return [_shape_dump(ast.parse("def f():\n" + textwrap.indent(
        ast.unparse(stmt), "    ")).body[0]) for stmt in body]


def _in_order(wanted: list[str], steps: list[str]) -> bool:
    """Whether ``wanted`` are among ``steps``, in that order."""
    it = iter(steps)
    return all(any(w == s for s in it) for w in wanted)


#: A function of at least this many syntax nodes is compared with a
#: judge's helpers by its shape too (every name renamed in order of
#: appearance); a smaller one only as it is written, since a one-line
#: helper (``Q @ K.T``) may well be an honest student's own.
SHAPE_NODES = 25


def _size(node) -> int:
    return len(walk(node))


def _shape_dump(node) -> str:
    """A function's code with its decorators and docstring left out and
    every name (its own, its arguments, its locals, the globals it uses)
    replaced by its place in order of appearance: the code of a helper
    retyped under other names."""
    node = ast.parse(_without_docstring(node)).body[0]
    node.decorator_list = []
    places: dict[str, str] = {}

    def place(name: str) -> str:
        return places.setdefault(name, f"n{len(places)}")

    node.name = place(node.name)
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            inner.id = place(inner.id)
        elif isinstance(inner, ast.arg):
            inner.arg = place(inner.arg)
            inner.annotation = None
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef,
                                ast.ClassDef)) and inner is not node:
            inner.name = place(inner.name)
    node.returns = None
    return ast.dump(node, annotate_fields=False)


def _without_docstring(node) -> str:
    node = ast.parse(ast.unparse(node)).body[0]
    body = node.body
    if body and isinstance(body[0], ast.Expr) and \
            isinstance(body[0].value, ast.Constant) and \
            isinstance(body[0].value.value, str):
        node.body = body[1:] or [ast.Pass()]
    return ast.unparse(node)


def _helpers(label: str, judge) -> tuple:
    """The judge's helpers as :class:`_Helper`, read once per process."""
    try:
        return _cached_helpers(label, judge)
    except TypeError:                        # a judge that is not hashable
        return _cached_helpers.__wrapped__(label, judge)


@functools.lru_cache(maxsize=None)
def _cached_helpers(label: str, judge) -> tuple:
    from ..judges import answer_helpers

    return tuple(_Helper(dotted, fn)
                 for dotted, fn in sorted(answer_helpers(judge).items()))


#: Where a class or function may hold a reference inside (an attribute it
#: builds, a function it calls): PyTorch's modules and the library.
HOLDER_HOMES = ("torch.nn", "selfattention")


#: How many functions and classes are read to see what one holds.
MAX_HELD = 300


@functools.lru_cache(maxsize=4096)
def _held(dotted: str) -> tuple:
    """The functions and classes that the function or class ``dotted``
    reaches through its code (its attributes' classes, what its methods
    call), within :data:`HOLDER_HOMES`: ``torch.nn.TransformerEncoderLayer``
    holds ``torch.nn.MultiheadAttention`` (its ``self_attn``)."""
    from ..judges import named_functions

    start = _lookup(dotted)
    if start is None or not (inspect.isclass(start) or
                             inspect.isfunction(inspect.unwrap(start))):
        return ()
    found, todo, seen = [], [start], set()
    while todo and len(seen) < MAX_HELD:
        obj = todo.pop(0)                 # nearest first
        try:
            obj = inspect.unwrap(obj)
        except ValueError:
            continue
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        module = getattr(obj, "__module__", None) or ""
        if obj is not start:
            found.append(obj)
        if not (isinstance(module, str) and module.startswith(
                HOLDER_HOMES)):
            continue
        if inspect.isclass(obj):              # its methods, __init__ first
            todo += [v for k, v in vars(obj).items()
                     if inspect.isfunction(v) and (
                         k == "__init__" or not k.startswith("__"))]
        elif inspect.isfunction(obj):
            try:
                todo += named_functions(obj)
            except Exception:
                continue
    return tuple(found)


def _holds(dotted: str, refs: list[_Reference]) -> _Reference | None:
    """The reference that the class or function ``dotted`` (not itself
    one) builds or calls inside, or None."""
    if dotted.split(".")[0] not in TRUSTED_ROOTS:
        return None
    objs = [r for r in refs if r.obj is not None and (
        inspect.isclass(r.obj) or callable(r.obj)) and
        not isinstance(r.obj, types.ModuleType)]
    if not objs:
        return None
    start = _lookup(dotted)
    if start is None or isinstance(start, types.ModuleType):
        return None
    for ref in objs:
        if inspect.isclass(start) and inspect.isclass(ref.obj):
            try:
                if issubclass(start, ref.obj):
                    return ref
            except TypeError:
                pass
    for obj in _held(dotted):            # the nearest one first
        for ref in objs:
            if _same(obj, ref.obj):
                return ref
    return None
