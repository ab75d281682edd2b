"""Which answers go "for review", decided from the submitted source.

The grader reads the code cells of a submitted notebook (as text, in its own
process; nothing here runs a line of them) and flags, per exercise:

* **references and shortcuts**: any use, in the code an answer can reach,
  of one of the exercise's ``references`` (the library's own version of
  what the student is asked to write, and the shortcuts that answer it:
  PyTorch's fused attention, autograd, ``nn.MultiheadAttention``...). Names
  are followed through ``import ... as``, ``from ... import``, attributes
  of imported modules and plain assignments (``f = sa.attention``); a
  function the chapter shows on its page (an unchanged cell that defines a
  reference's name) counts as the reference, also where it bears the
  answer's own name and the answer reaches it under another (an alias
  kept before the answer's def, a default, a class attribute); so does a
  student's function whose code is the reference's own, retyped or
  pasted; so does
  building or calling a class or function of PyTorch's modules or of the
  library that holds a reference inside (``nn.TransformerEncoderLayer``,
  whose ``self_attn`` is an ``nn.MultiheadAttention``). The code
  an answer can reach starts at the definitions of its names and follows
  every top-level name they use, in any cell, and the statements that put
  values into the objects those names hold (``H["k"] = f``, ``box.f =
  f``, ``L.append(f)``, a function that fills one, with the statements
  that call it). A copy of a reference (pasted, or retyped under other
  names for one of ``MIN_STEPS`` statements or more) is looked for in
  every function and lambda of every cell the student wrote;
* **the judges' code**: any function or lambda of a cell the student
  wrote, reached or not, whose code is that of a function the exercise's
  judge computes an expected answer with (found by reading the judge,
  :func:`selfattention_course.judges.answer_helpers`), pasted, retyped
  under other names, or, for a helper of ``FUZZY_STEPS`` statements or
  more, holding ``FUZZY_SHARE`` of its statements' shapes in any order;
* **the checks' own code**: anything of ``selfattention_exercises`` other
  than the student tools it offers (a check used as an oracle, its private
  helpers) and anything of ``selfattention_course``;
* **dynamic code**, anywhere in a cell the student wrote or changed:
  ``exec``, ``eval``, ``compile``, ``__import__``, ``globals()``,
  ``importlib``, ``marshal``, ``pickle``, ``types`` (building code or
  function objects), ``inspect``, ``linecache`` (the source lines by which
  the tripwire knows a shown cell's copy), ``ctypes``, attribute access by a
  computed name (``getattr(x, name)``), dunder and frame attributes
  (``__code__``, ``co_filename``, ``f_back``...), PyTorch's private parts
  (``torch._C``, ``torch._scaled_dot_product_attention_math``), a module
  the course does not install (one written by the notebook itself),
  modules that compile, evaluate or locate code named by a string
  (``torch.jit``, ``torch.compile``, ``torch.fx``, ``sympy``, ``pydoc``,
  ``numexpr``, ``unittest.mock``...: a list, not an allow list), any of
  those modules read as another module's attribute (``os.sys.modules``,
  ``traceback.linecache``; known from the modules the grader has
  imported), IPython's output cache (``Out``, ``_``, ``_3``: what earlier
  cells showed) read as a global, and a module object used as a value
  (kept in a container or an attribute, passed as an argument, returned),
  through which nothing can be read.
  ``getattr(x, "name")`` and ``hasattr`` with a constant name read as
  ``x.name`` for every check, references included;
* **hooks**: ``sys.setprofile``/``settrace`` and their kin, IPython's input
  transformers, event callbacks and shell commands (``get_ipython()``, any
  magic but ``%time``/``%timeit`` (whose code is read as the cell's),
  ``%matplotlib <backend>``, help of a dotted name (``np.einsum?``, read
  as the name), ``%load_ext autoreload`` and ``%autoreload <mode>``; a
  one-line cell IPython's prefilter runs as a magic, ``ls -la``), threads
  and processes (``platform`` functions other than ``PLATFORM_PLAIN``),
  rebinding a builtin name (a global ``exec``) or ``sys.modules``.
  ``sys.stderr``/``sys.stdout`` only as ``print(..., file=sys.stderr)``
  or ``sys.stderr.write(...)``; ``help`` only of a dotted name of an
  import, a def or a builtin (pydoc imports a module a string names).

Dynamic code and hooks can change any answer of the notebook, so they flag
every exercise of it; a reference flags the exercise it belongs to. A cell
left exactly as the student version or the chapter has it (the chapter's own
code outside its solutions) is trusted for dynamic code; a cell that the
kernel cannot compile either (a syntax error, see ``_inert``) runs nothing
and is skipped. Each finding
quotes its line. The runtime tripwire of the harvest adds evidence on top of
this (a call hidden from the source); it never clears what is flagged here.
"""

from __future__ import annotations

import ast
import threading
import types

from selfattention_exercises import CORE_MODULES

from .cells import _Cell, _dotted, _parse, walk
from .dynamic import (
    _binds_anywhere,
    _bound_here,
    _dynamic,
    _finding,
    _module_values,
)
from .findings import Finding, cell_digest, diagnosis, explain
from .likeness import (
    COPYABLE,
    Candidate,
    as_def,
    candidate,
    _helpers,
    _holds,
    _lookup,
    _Reference,
    _reference,
)
from .rules import CHECKS, FILLING_METHODS, GRADER
from .scope import TooInvolved, _global_loads, _module_level, _Names

__all__ = ["Finding", "review", "cell_digest", "explain", "diagnosis"]


def _reach(names: _Names, answers, filled=None) -> list[tuple[_Cell,
                                                             ast.AST]]:
    """The definitions an answer can reach: those of its names and, in
    turn, of every top-level name they use; for a name whose object code
    fills (``H["k"] = f``, ``box.f = f``, ``H.append(f)``, a function that
    does so, such as a decorator that registers), the statements that
    fill it too (see :func:`_filling`)."""
    stores, writers, loaders = filled or ({}, {}, {})
    todo, seen, nodes = list(answers), set(), []

    def add(cell, node):
        nodes.append((cell, node))
        for inner in _global_loads(node):
            if inner.id in names.bound:
                todo.append(inner.id)

    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for cell, node, _ in names.bound.get(name, ()):
            add(cell, node)
        for cell, node in stores.get(name, ()):
            add(cell, node)
        for writer in writers.get(name, ()):     # and whatever it is given
            todo.append(writer)
            for cell, node in loaders.get(writer, ()):
                add(cell, node)
    return nodes


def _filled_root(node) -> str | None:
    """The name whose object ``node`` (a store target or a call) puts a
    value into: ``H`` of ``H["k"] = f``, ``box.f = f``, ``H.append(f)``,
    ``setattr(box, "f", f)``."""
    if isinstance(node, ast.Call):
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id == "setattr" and node.args:
            node = ast.Attribute(value=node.args[0], attr="?",
                                 ctx=ast.Store())
        elif isinstance(fn, ast.Attribute) and fn.attr in FILLING_METHODS:
            node = fn
        else:
            return None
    if not isinstance(node, (ast.Subscript, ast.Attribute)):
        return None
    root = node
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    return root.id if isinstance(root, ast.Name) else None


def _filling(cells: list[_Cell], names: _Names) -> tuple:
    """Where the notebook puts values into objects its names hold:
    ``(stores, writers, loaders)``: the top-level statements that fill the
    object of a name (its value bound by code, not an import), the
    functions that fill it from inside, and the top-level statements that
    use each function (a call, a decorator)."""
    stores: dict[str, list] = {}
    writers: dict[str, set] = {}
    loaders: dict[str, list] = {}
    compound = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
                ast.AsyncWith, ast.Try, ast.Match)
    data = {name for name, found in names.bound.items()
            if any(not isinstance(v, str) for _, _, v in found)}
    for cell in cells:
        if cell.tree is None:
            continue
        for stmt in cell.tree.body:
            for node in _module_level(stmt):
                if isinstance(node, compound):
                    continue
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                     ast.ClassDef)):
                    for deco in node.decorator_list:
                        for inner in _global_loads(deco):
                            loaders.setdefault(inner.id, []).append(
                                (cell, node))
                    if isinstance(node, ast.ClassDef):
                        continue
                    outer = {id(n) for n in _global_loads(node)}
                    for inner in walk(node):
                        root = _filled_root(inner) if isinstance(
                            inner, ast.Call) else None
                        if root is None and isinstance(
                                inner, (ast.Subscript, ast.Attribute)) and \
                                isinstance(inner.ctx, ast.Store):
                            root = _filled_root(inner)
                        if root in data and any(
                                isinstance(n, ast.Name) and n.id == root and
                                id(n) in outer for n in walk(inner)):
                            writers.setdefault(root, set()).add(node.name)
                    continue
                for inner in _global_loads(node):
                    loaders.setdefault(inner.id, []).append((cell, node))
                for inner in walk(node):
                    root = None
                    if isinstance(inner, ast.Call):
                        root = _filled_root(inner)
                    elif isinstance(inner, (ast.Subscript, ast.Attribute)) \
                            and isinstance(inner.ctx, ast.Store):
                        root = _filled_root(inner)
                    if root in data:
                        stores.setdefault(root, []).append((cell, node))
    return stores, writers, loaders


def _odd_bindings(cells: list[_Cell], answers) -> list[Finding]:
    """Answer names bound by anything but a ``def`` or a plain assignment
    ``name = value`` (whose value is not the name itself): a ``for`` or
    ``with`` target, a ``match`` capture, ``:=``, a starred or unpacked
    target, an import, a function's ``global``... The grader follows only
    the plain forms."""
    found = []

    def flag(cell, node, name, how):
        found.append(_finding(cell, node, "dynamic",
                              f"binds the answer `{name}` {how}, which the "
                              f"grader does not follow; define it with a "
                              f"plain def"))

    def visit(cell, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.Lambda)):
            declared = {n for g in walk(node) if isinstance(g, ast.Global)
                        for n in g.names} & answers
            for inner in walk(node):
                if isinstance(inner, ast.Name) and inner.id in declared \
                        and not isinstance(inner.ctx, ast.Load):
                    flag(cell, inner, inner.id, "inside a function "
                                                "(global)")
            outside = node.args.defaults + [d for d in node.args.kw_defaults
                                            if d]
            if not isinstance(node, ast.Lambda):
                outside += node.decorator_list
            for child in outside:
                visit(cell, child)
            return
        if isinstance(node, ast.ClassDef):
            if node.name in answers:
                flag(cell, node, node.name, "as a class")
            for child in node.decorator_list + node.bases + [
                    k.value for k in node.keywords]:
                visit(cell, child)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) \
                else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and \
                        target.id in answers and node.value is not None \
                        and any(isinstance(n, ast.Name) and
                                n.id == target.id
                                for n in walk(node.value)):
                    flag(cell, node, target.id, "to itself")
                elif not isinstance(target, ast.Name):
                    for n in walk(target):
                        if isinstance(n, ast.Name) and n.id in answers \
                                and isinstance(n.ctx, ast.Store):
                            flag(cell, node, n.id, "by unpacking")
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor,
                               ast.NamedExpr)):
            for n in walk(node.target):
                if isinstance(n, ast.Name) and n.id in answers:
                    flag(cell, node, n.id, "by a loop, `:=` or `+=`")
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                for n in walk(item.optional_vars) \
                        if item.optional_vars else ():
                    if isinstance(n, ast.Name) and n.id in answers:
                        flag(cell, node, n.id, "by `with ... as`")
        elif isinstance(node, ast.ExceptHandler) and node.name in answers:
            flag(cell, node, node.name, "by `except ... as`")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in _bound_here(node):
                if name in answers:
                    flag(cell, node, name, "by an import")
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and \
                node.name in answers:
            flag(cell, node, node.name, "by a `match` capture")
        elif isinstance(node, ast.MatchMapping) and node.rest in answers:
            flag(cell, node, node.rest, "by a `match` capture")
        for child in ast.iter_child_nodes(node):
            visit(cell, child)

    for cell in cells:
        if cell.tree is not None:
            visit(cell, cell.tree)
    return found


def _uses(cell: _Cell, node, names: _Names, refs: list[_Reference],
          answers, helpers=()) -> list[Finding]:
    """References, shortcuts and the checks' code used inside ``node``;
    copies of the references and of the judge's ``helpers``."""
    found = []
    local = _Names([], names.budget)
    for inner in walk(node):               # imports inside functions
        if isinstance(inner, (ast.Import, ast.ImportFrom)):
            local._statement(cell, inner)
            for dotted in _imported(inner):
                why = _meaning(dotted, refs)
                if why:
                    found.append(_finding(cell, inner, *why))
    outer = {id(n) for n in _global_loads(node)}
    for inner in walk(node):
        if not isinstance(inner, (ast.Name, ast.Attribute)):
            continue
        if isinstance(inner, ast.Name) and not isinstance(inner.ctx,
                                                          ast.Load):
            continue
        parts = _dotted(inner)
        root = inner
        while isinstance(root, ast.Attribute):
            root = root.value
        meanings = set()
        if parts and isinstance(root, ast.Name):
            if id(root) in outer:
                meanings = names.meanings(inner)
                if parts[0] not in names.bound:
                    meanings.add(".".join(parts))
            else:
                meanings = local.meanings(inner)
        for meaning in meanings:
            why = _meaning(meaning, refs)
            if not why:
                holder = _holds(meaning, refs)
                if holder is not None:
                    why = ("reference", f"builds or calls {meaning}, which "
                                        f"holds {holder.dotted} inside "
                                        f"(this exercise asks you to "
                                        f"write it yourself)")
            if why:
                found.append(_finding(cell, inner, *why))
                break
        else:
            if isinstance(inner, ast.Attribute):
                for ref in refs:
                    if ref.method and inner.attr == ref.short:
                        found.append(_finding(
                            cell, inner, "reference",
                            f"uses {ref.dotted}, which this exercise "
                            f"asks you to do yourself"))
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if cell.trusted and node.name not in answers:
            for ref in refs:            # (a module is no function)
                if ref.short == node.name and not isinstance(
                        ref.obj, types.ModuleType):
                    found.append(_finding(
                        cell, node, "reference",
                        f"is the chapter's own {ref.dotted}, which this "
                        f"exercise asks you to write yourself"))
                    break
    return found


def _shown_answers(names: _Names, answers, refs) -> dict:
    """Answer names that a cell of the chapter's own code defines as the
    copy of a reference it shows (``masked_patch_loss`` of
    :ref:`ch-photographs`): ``{name: reference}``. The answer's own def
    replaces that copy, so code the answer reaches that still reads the
    name (an alias made before, a default, a class attribute) holds the
    reference."""
    shown = {}
    for name in answers:
        for cell, node, _ in names.bound.get(name, ()):
            if cell.trusted and isinstance(node, (ast.FunctionDef,
                                                  ast.AsyncFunctionDef)):
                for ref in refs:
                    if ref.short == node.name and not isinstance(
                            ref.obj, types.ModuleType):
                        shown[name] = ref
    return shown


def _copies(cell: _Cell, node, theirs: Candidate, refs,
            helpers) -> list[Finding]:
    """Whether the function ``node`` of a cell the student wrote (any def,
    method or lambda read as a def, whether an answer reaches it or not),
    read as ``theirs``, is a copy of a reference's code or of a judge's
    helper."""
    found = []
    mine = theirs.code
    for ref in refs:
        if ref.code is not None and mine == ref.code.replace(
                f"'{ref.short}'", f"'{node.name}'", 1) or (
                ref.shape is not None and theirs.shape == ref.shape):
            found.append(_finding(
                cell, node, "reference",
                f"is a copy of {ref.dotted}, which this exercise asks you "
                f"to write yourself"))
    for helper in helpers:
        if helper.copied_by(theirs):
            found.append(_finding(
                cell, node, "judge",
                f"is a copy of {helper.dotted}, with which the grader "
                f"computes this exercise's answer"))
            break
    return found


def _imported(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = "." * node.level + (node.module or "")
    return [f"{base}.{a.name}" for a in node.names if a.name != "*"]


def _meaning(dotted: str, refs: list[_Reference]) -> tuple | None:
    for ref in refs:
        if ref.matches(dotted):
            return ("reference", f"uses {ref.dotted}, which this exercise "
                                 f"asks you to write yourself")
    if dotted == GRADER or dotted.startswith(GRADER + "."):
        return ("checks", "reaches the grader's code")
    if dotted == CHECKS or dotted.startswith(CHECKS + "."):
        rest = dotted[len(CHECKS) + 1:].split(".")
        if len(rest) >= 2 and rest[0] not in CORE_MODULES:
            module = _lookup(f"{CHECKS}.{rest[0]}")
            tools = set(getattr(module, "__all__", ())) if module else set()
            obj = getattr(module, rest[1], None) if module else None
            from selfattention_exercises.core import Exercise

            if rest[1] in tools and not isinstance(obj, Exercise):
                return None                      # a student tool
        if len(rest) == 1:
            return None                          # the module, not a name
        return ("checks", "uses the checks' own code (a check, its "
                          "helpers or its judge), not something an answer "
                          "may call")
    return None


#: One review at a time: the grader reviews from several threads, and
#: CPython 3.11's parser keeps its AST recursion depth per interpreter, so
#: two ``ast.parse`` at once can raise "SystemError: AST constructor
#: recursion depth mismatch".
_REVIEW_LOCK = threading.Lock()


def review(nb, exercises: dict[str, tuple], book_cells=()) -> dict:
    """What sends each exercise of ``nb`` for review (one call at a time:
    see ``_REVIEW_LOCK``).

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The submitted notebook (never executed here).
    exercises : dict
        ``label -> (answers, references)`` or ``(answers, references,
        judge)``: the names that hold the answer, the dotted names of the
        references and shortcuts, and the exercise's
        :class:`~selfattention_course.judges.Judge`, whose helpers'
        copies are for review too.
    book_cells : iterable of str
        :func:`cell_digest` of the student version's code cells: a cell
        left as it is there is the chapter's own code.

    Returns
    -------
    dict
        ``label -> list of Finding`` (empty when nothing is flagged).
    """
    with _REVIEW_LOCK:
        return _review(nb, exercises, book_cells)


def _review(nb, exercises, book_cells):
    book_cells = set(book_cells)
    cells = _parse(nb, book_cells)
    names = _Names(cells)
    trusted = {c.index + 1 for c in cells if c.trusted}
    # print(..., file=sys.stderr) is the builtin print only where no code
    # of the notebook binds the name print (a parameter, a local...)
    streams = not _binds_anywhere(cells, "print")
    everywhere, where = [], None
    result = {}
    try:
        for cell in cells:
            where = cell
            if not cell.trusted:
                everywhere += _dynamic(cell, names, streams)
                everywhere += _module_values(cell, names)
        filled = _filling(cells, names)
        own = [c for c in cells if not c.trusted and c.tree is not None
               and not c.inert]
        # every function the student wrote, read once for every exercise
        written = []
        for cell in own:
            where = cell
            for node in walk(cell.tree):
                if isinstance(node, COPYABLE):
                    function = as_def(node)
                    written.append((cell, function, candidate(function)))
        for label, (answers, references, *judge) in exercises.items():
            refs = [_reference(r) for r in references]
            helpers = _helpers(label, judge[0]) if judge and \
                judge[0] is not None else ()
            found = _odd_bindings(cells, set(answers))
            shown = _shown_answers(names, answers, refs)
            reached = set()
            for cell, node in _reach(names, answers, filled):
                where = cell
                reached.add(id(node))
                found += _uses(cell, node, names, refs, set(answers),
                               helpers)
                found += [_finding(
                    cell, inner, "reference",
                    f"reaches {shown[inner.id].dotted}, the copy the "
                    f"chapter shows under the name `{inner.id}`, which "
                    f"this exercise asks you to write yourself")
                    for inner in _global_loads(node) if inner.id in shown]
            # copies are looked for in every function the student wrote,
            # reached or not (a dict, a registry, an object may hold it)
            for cell, node, theirs in written:
                where = cell
                found += _copies(cell, node, theirs, refs, helpers)
            # the student's own cells first, references before the rest
            result[label] = sorted(set(found + everywhere), key=lambda f: (
                f.cell in trusted, f.kind not in ("reference", "judge"), f.cell,
                f.line))
    except (TooInvolved, RecursionError) as err:
        line = (where.lines or [""])[0] if where else ""
        stop = Finding("dynamic", where.index + 1 if where else 1, 1, line,
                       f"is too involved for the grader to read ({err}), "
                       f"so it cannot tell what the notebook does")
        return {label: [stop] + everywhere for label in exercises}
    return result
