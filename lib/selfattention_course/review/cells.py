"""The code cells of a submitted notebook as the review reads them: parsed
Python, with IPython's magics and automagic turned into what they run."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import keyword
import re
from dataclasses import dataclass

from .findings import cell_digest
from .rules import BUILTIN_NAMES, SAFE_MAGICS, TIMING_MAGICS


@dataclass
class _Cell:
    index: int                 # position in the notebook, from 0
    source: str
    lines: list[str]
    tree: ast.Module | None
    trusted: bool              # unchanged from the student version
    python: str = ""           # the Python IPython runs for it
    inert: bool = False        # the kernel cannot run it (a syntax error)


def walk(node) -> list:
    """Every node under ``node``, itself first, in :func:`ast.walk`'s
    order. The list is kept on the node: the review's rules each read every
    node of every cell, and none of them changes a cell's tree."""
    found = node.__dict__.get("_walked")
    if found is None:
        found = node._walked = list(ast.walk(node))
    return found


#: Cells up to this many characters have their Python kept for the next
#: notebook (a class hands in the book's cells again and again); at most
#: _KEPT of them, so the memory kept stays under 16 MiB.
_KEPT_CHARS, _KEPT = 16_384, 1024


def _python(source: str) -> str:
    """The Python IPython runs for a cell (magics become calls)."""
    if len(source) <= _KEPT_CHARS:
        return _kept_python(source)
    return _transform(source)


def _transform(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


_kept_python = functools.lru_cache(maxsize=_KEPT)(_transform)


def _parse(nb, book_cells) -> list[_Cell]:
    codes = [c for c in nb.cells if c.cell_type == "code"]
    # ``from __future__ import barry_as_FLUFL`` in one cell changes what
    # the kernel's compiler (IPython's CachingCompiler keeps the future
    # flags of every cell it compiled) accepts in the cells after it.
    grammar_changed = any(isinstance(c.source, str) and
                          "barry_as_FLUFL" in c.source for c in codes)
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        source = cell.source if isinstance(cell.source, str) else ""
        trusted = cell_digest(source) in book_cells
        python, inert = "", False
        try:
            python = _python(source)
            try:
                tree = ast.parse(python)
            except SyntaxError:
                inert = not grammar_changed and _inert(python)
                raise
            lines = python.splitlines()
            if _timed_code(tree):                # %%time's body is code
                lines = source.splitlines() if source.lstrip().startswith(
                    "%%") else lines
            tree = ast.fix_missing_locations(_NamedAttributes().visit(tree))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree, lines = None, source.splitlines()
        cells.append(_Cell(index, source, lines, tree, trusted, python,
                           inert))
    return cells


def _inert(python: str) -> bool:
    """Whether a cell whose Python (IPython's static transformation of
    it, as ``_python`` gives) does not parse also fails in the kernel, so
    that nothing of it runs.

    The kernel (IPython's ``InteractiveShell.run_cell``) transforms a
    cell with the same ``TransformerManager`` and then, for a cell of one
    line only, with its prefilter (``transform_cell``): a line that
    starts with the name of a magic (automagic, ``ls -la``, ``run x.py``)
    or with ``exit``/``quit`` (autocalled) runs although it is no Python.
    Such a line is not inert; any other line or cell that does not parse
    raises SyntaxError in the kernel before any of it runs. (Autocall,
    macros and new magics need a magic or IPython's shell first, which
    are flagged wherever they are.)"""
    return _automagic(python) is None


@functools.lru_cache(maxsize=1)
def _magic_names() -> frozenset:
    """The names of the magics a kernel offers without being told to:
    IPython's own, ipykernel's, the default aliases of shell commands,
    the script magics and those of IPython's extensions."""
    import pkgutil

    from IPython.core import magics
    from IPython.core.alias import default_aliases
    from IPython.core.magic import Magics

    for module in pkgutil.iter_modules(magics.__path__):
        importlib.import_module(f"{magics.__name__}.{module.name}")
    try:
        import ipykernel.zmqshell  # noqa: F401  (its KernelMagics)
    except ImportError:                           # pragma: no cover
        pass
    names, todo = set(), [Magics]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        for kind in getattr(cls, "magics", {}).values():
            names |= set(kind)
    names |= {name for name, _ in default_aliases()}
    names |= {"sh", "bash", "perl", "ruby", "python", "python2", "python3",
              "pypy", "js", "javascript", "svg", "latex", "html", "markdown",
              "autoreload", "aimport", "store", "capture", "writefile",
              "script", "debug", "sx", "sc", "system", "alias", "rehashx"}
    return frozenset(names)


def _automagic(python: str) -> str | None:
    """The magic (or autocalled name) the kernel's prefilter makes of a
    cell of one line, or None."""
    from IPython.core.splitinput import LineInfo

    lines = python.splitlines()
    if len(lines) != 1:
        return None
    info = LineInfo(lines[0])
    head = info.ifun
    if head in ("exit", "quit"):                 # IPyAutocall objects
        return head
    if info.the_rest[:1] in ("=", ","):          # AssignmentChecker
        return None
    if head not in _magic_names() or keyword.iskeyword(head) or \
            head in BUILTIN_NAMES:               # shadowed by a builtin
        return None
    return head


class _NamedAttributes(ast.NodeTransformer):
    """``getattr(x, "name")`` and ``hasattr(x, "name")`` read as ``x.name``
    (``getattr(x, "name", d)`` as ``x.name or d``), so that every check
    of attributes sees them."""

    def visit_Call(self, node):
        self.generic_visit(node)
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in ("getattr", "hasattr") \
                and 2 <= len(node.args) <= 3 and not node.keywords and \
                isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str) and \
                not any(isinstance(a, ast.Starred) for a in node.args):
            attr = ast.copy_location(ast.Attribute(
                value=node.args[0], attr=node.args[1].value,
                ctx=ast.Load()), node)
            if len(node.args) == 2:
                return attr
            return ast.copy_location(ast.BoolOp(
                op=ast.Or(), values=[attr, node.args[2]]), node)
        return node


_TIMEIT_OPTIONS = re.compile(r"^\s*(?:(?:-[nrp]\s*\d+|-[qoct])(?:\s+|$))*")


def _timed_code(tree) -> bool:
    """Read the code a safe magic runs (``%time f()``, a ``%%timeit``
    cell's body, the name ``%pinfo`` looks up) as part of the cell: its
    statements join the tree, at the lines where they stand (so it reads
    the tree with :func:`ast.walk`: no list of :func:`walk` may be kept
    before the tree is whole). Raises
    SyntaxError when it is not Python. Whether the cell had any."""
    added = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _magic(node)):
            continue
        name = node.args[0].value
        if name in ("pinfo", "pinfo2"):          # `np.einsum?`: the name
            sub = ast.parse(node.args[1].value.strip(), mode="eval")
            expr = ast.Expr(sub.body)
            ast.copy_location(expr, node)
            for inner in ast.walk(expr):
                ast.copy_location(inner, node)
            added.append(expr)
            continue
        if name not in TIMING_MAGICS:
            continue
        cell_magic = node.func.attr == "run_cell_magic"
        for k, arg in enumerate(node.args[1:3], start=1):
            if not isinstance(arg, ast.Constant) or \
                    not isinstance(arg.value, str):
                raise SyntaxError("a magic's code is not a plain string")
            code = arg.value
            if k == 1:                           # the line: options, code
                code = _TIMEIT_OPTIONS.sub("", code, count=1)
            sub = ast.parse(code)
            # a cell magic's body starts on the line after the magic's
            ast.increment_lineno(sub, node.lineno - (k == 1 or
                                                     not cell_magic))
            added += sub.body
    tree.body += added
    return bool(added)


def _dotted(node) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _call(node: ast.Call) -> str | None:
    fn = node.func
    if isinstance(fn, ast.Name) and fn.id in ("getattr", "setattr",
                                               "delattr", "hasattr"):
        if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
            return f"reaches an attribute by a computed name ({fn.id})"
        if isinstance(node.args[1].value, str) and \
                node.args[1].value.startswith("__"):
            return f"reaches the interpreter's internals ({fn.id})"
    if isinstance(fn, ast.Name) and fn.id in ("setattr", "delattr"):
        return None
    if isinstance(fn, ast.Name) and fn.id == "open":
        for arg in list(node.args[1:2]) + [k.value for k in node.keywords
                                           if k.arg == "mode"]:
            if not isinstance(arg, ast.Constant) or any(
                    c in str(arg.value) for c in "wax+"):
                return "writes a file (code a later import could run)"
    return None


def _magic(node: ast.Call) -> bool:
    """A safe magic: ``get_ipython().run_line_magic('timeit', ...)``, with
    arguments of a harmless form (see ``SAFE_MAGICS``)."""
    fn = node.func
    if not (isinstance(fn, ast.Attribute)
            and fn.attr in ("run_line_magic", "run_cell_magic")
            and isinstance(fn.value, ast.Call)
            and isinstance(fn.value.func, ast.Name)
            and fn.value.func.id == "get_ipython"
            and not fn.value.args and not fn.value.keywords
            and len(node.args) >= 2 and not node.keywords
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                    for a in node.args[:2])):
        return False
    name, line = node.args[0].value, node.args[1].value
    if name in TIMING_MAGICS:
        return True
    if fn.attr != "run_line_magic" or name not in SAFE_MAGICS or \
            len(node.args) != 2:
        return False
    return SAFE_MAGICS[name](line)


def _magic_nodes(tree) -> set[int]:
    """The ids of the nodes that make up the calls of safe magics (the
    ``get_ipython``, the call of it and ``run_line_magic``), which say
    nothing about the code the magic runs."""
    found = set()
    for node in walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and _magic(node):
            found |= {id(node.func), id(node.func.value),
                      id(node.func.value.func)}
    return found
