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
  reference's name) counts as the reference, and so does a student's
  function whose code is the reference's own, retyped or pasted; so does
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
* **the checks' own code**: anything of ``selfattention.exercises`` other
  than the student tools it offers (a check used as an oracle, its private
  helpers) and anything of ``selfattention_course``;
* **dynamic code**, anywhere in a cell the student wrote or changed:
  ``exec``, ``eval``, ``compile``, ``__import__``, ``globals()``,
  ``importlib``, ``marshal``, ``pickle``, ``types`` (building code or
  function objects), ``inspect``, ``ctypes``, attribute access by a
  computed name (``getattr(x, name)``), dunder and frame attributes
  (``__code__``, ``co_filename``, ``f_back``...), PyTorch's private parts
  (``torch._C``, ``torch._scaled_dot_product_attention_math``), a module
  the course does not install (one written by the notebook itself),
  modules that compile, evaluate or locate code named by a string
  (``torch.jit``, ``torch.compile``, ``torch.fx``, ``sympy``, ``pydoc``,
  ``numexpr``, ``unittest.mock``...: a list, not an allow list), and a
  module object used as a value (kept in a container or an attribute,
  passed as an argument, returned), through which nothing can be read.
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
import builtins
import functools
import hashlib
import importlib
import importlib.util
import inspect
import keyword
import re
import textwrap
import threading
import types
from dataclasses import dataclass

__all__ = ["Finding", "review", "cell_digest", "explain", "diagnosis"]

#: Names whose use runs code built at run time or reaches the interpreter.
DYNAMIC_NAMES = {
    "exec": "runs code built at run time",
    "eval": "runs code built at run time",
    "compile": "builds a code object",
    "__import__": "imports a module by a computed name",
    "globals": "reads or rewrites the notebook's namespace",
    "locals": "reads or rewrites a namespace",
    "vars": "reads or rewrites a namespace",
    "breakpoint": "starts a debugger",
    "__builtins__": "reaches the interpreter's builtins",
    "__build_class__": "reaches the interpreter's builtins",
    "get_ipython": "reaches IPython's shell (input transformers, events, "
                   "shell commands)",
    "exit": "reaches IPython's shell (exit._ip)",
    "quit": "reaches IPython's shell (quit._ip)",
}
#: Builtins that reach attributes by a computed name: flagged when passed
#: on or renamed (``g = getattr``), not only when called with a name.
ATTRIBUTE_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")
#: Modules that build or load code, reach frames or the interpreter, or run
#: code beside the notebook's (threads, processes, hooks).
DYNAMIC_MODULES = {
    "importlib": "imports by a computed name",
    "imp": "imports by a computed name",
    "pkgutil": "imports by a computed name",
    "zipimport": "imports by a computed name",
    "runpy": "runs code from a file",
    "timeit": "runs code given as a string (timeit.timeit)",
    "doctest": "runs code given as a string",
    "pty": "starts processes",
    "functorch": "computes gradients (PyTorch's function transforms)",
    "marshal": "loads code objects",
    "pickle": "loads objects that run code",
    "_pickle": "loads objects that run code",
    "cPickle": "loads objects that run code",
    "dill": "loads objects that run code",
    "cloudpickle": "loads objects that run code",
    "joblib": "loads objects that run code",
    "shelve": "loads objects that run code",
    "copyreg": "changes how objects are rebuilt",
    "types": "builds code or function objects",
    "inspect": "reaches frames and source code",
    "ctypes": "changes the interpreter's memory",
    "cffi": "changes the interpreter's memory",
    "gc": "reaches every live object",
    "code": "runs code built at run time",
    "codeop": "builds code objects",
    "builtins": "reaches the interpreter's builtins",
    "__builtin__": "reaches the interpreter's builtins",
    "sys": None,           # flagged by attribute (sys.setprofile...) only
    "threading": "starts threads or sets their hooks",
    "_thread": "starts threads",
    "concurrent": "starts threads or processes",
    "multiprocessing": "starts processes",
    "asyncio": "runs code in an event loop",
    "subprocess": "starts processes",
    "signal": "installs signal handlers",
    "atexit": "installs exit hooks",
    "sched": "schedules code",
    "trace": "installs a trace hook",
    "cProfile": "installs a profile hook",
    "profile": "installs a profile hook",
    "bdb": "installs a trace hook",
    "pdb": "installs a trace hook",
    "faulthandler": "installs hooks",
    "weakref": "installs callbacks",
    "IPython": "reaches IPython's shell",
    "ipykernel": "reaches the kernel",
    "traitlets": "reaches the kernel's configuration",
    "jupyter_client": "reaches the kernel",
    "selfattention_course": "reaches the grader's code",
    "pydoc": "imports a module a string names (pydoc.locate)",
    "sympy": "parses and runs strings as code (sympify, parse_expr, "
             "lambdify)",
    "numexpr": "evaluates strings as code",
    "unittest": "replaces objects the checks use (unittest.mock)",
    "rlcompleter": "evaluates strings as code",
    "logging.config": "builds objects named by strings",
    "torch.jit": "compiles code from strings and hides what it calls "
                 "(TorchScript)",
    "torch.compiler": "compiles code and hides what it calls",
    "torch.fx": "builds code from graphs and hides what it calls",
    "torch.export": "compiles code and hides what it calls",
    "torch.package": "loads objects that run code",
    "torch.hub": "loads code from elsewhere",
    "torch.onnx": "compiles code and hides what it calls",
    "torch.library": "registers operators that replace PyTorch's",
    "torch.utils.cpp_extension": "compiles and loads code",
    "numpy.f2py": "compiles and loads code",
    "operator": None,      # flagged by attribute (attrgetter...) only
    "os": None,            # flagged by attribute (os.system...) only
}
#: Submodules that are fine although their top module is flagged.
ALLOWED_MODULES = {"IPython.display"}
#: Attributes that reach code objects, frames or hooks, whatever they are
#: read from.
DYNAMIC_ATTRS = {
    "co_code", "co_filename", "co_consts", "co_names", "co_firstlineno",
    "co_name", "co_qualname", "co_varnames", "co_lines", "replace_code",
    "f_back", "f_globals", "f_locals", "f_code", "f_builtins", "f_trace",
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "tb_frame",
    "tb_next", "func_globals", "func_code",
    "setprofile", "settrace", "getprofile", "gettrace",
    "setprofile_all_threads", "settrace_all_threads", "_getframe",
    "monitoring", "addaudithook",
    "meta_path", "path_hooks", "path_importer_cache", "displayhook",
    "excepthook", "breakpointhook", "unraisablehook",
    "input_transformers_cleanup", "input_transformers_post",
    "ast_transformers", "register_magic_function", "set_hook",
    "run_cell", "run_line_magic", "run_cell_magic", "user_ns",
    "attrgetter", "methodcaller", "read_pickle", "_ip", "_evaluate",
    "get_field", "currentframe",
}
#: Attributes that reach IPython's shell or run what it runs, whatever they
#: are read from (``ipywidgets.get_ipython()``, ``shell.ex(code)``).
SHELL_ATTRS = {"get_ipython", "ex", "ev", "system", "events", "run_code",
               "run_ast_nodes", "safe_execfile", "getoutput", "kernel",
               "shell"}
#: Attributes that write a file (a module a later import could run).
WRITE_ATTRS = {"write_text", "write_bytes", "symlink_to", "hardlink_to"}
#: Attributes of ``os`` and ``sys`` that run or replace code.
MODULE_ATTRS = {
    "os": {"system", "popen", "fork", "forkpty", "execv", "execve",
           "execl", "execle", "execlp", "execlpe", "execvp", "execvpe",
           "spawnl", "spawnv", "spawnve", "spawnvp", "posix_spawn",
           "posix_spawnp", "kill", "killpg", "register_at_fork",
           "_exit", "putenv", "environ", "environb", "getenv", "getenvb",
           "chdir"},
    "sys": {"modules", "path", "stdout", "stderr", "stdin", "settrace",
            "setprofile", "_getframe", "meta_path", "path_hooks",
            "setrecursionlimit", "exit", "monitoring", "addaudithook",
            "displayhook", "excepthook", "breakpointhook", "__stdout__",
            "__stderr__"},
    "torch": {"load", "ops", "_C", "_VF", "jit", "compile", "compiler",
              "fx", "export", "package", "hub", "onnx", "library"},
    "torch.utils": {"cpp_extension"},
    "numpy": {"load", "f2py"},
    "scipy": {"LowLevelCallable"},
    "typing": {"get_type_hints"},
    "pandas": {"eval", "read_pickle"},
}
#: What the attributes of MODULE_ATTRS do, when not the default.
MODULE_REASONS = {"torch": "loads objects that run code, compiles code "
                           "that hides what it calls (torch.jit, "
                           "torch.compile, torch.fx), or reaches PyTorch's "
                           "internal operators",
                  "torch.utils": "compiles and loads code",
                  "scipy": "calls code by its address",
                  "typing": "evaluates strings as code",
                  "pandas": "evaluates strings as code or loads objects "
                            "that run code",
                  "numpy": "loads objects that run code"}
#: Functions of ``platform`` (Python 3.11's platform.py) that neither
#: start a process nor read a file on Linux: ``os.uname`` fields and
#: ``sys.version`` parsed. Any other is flagged: ``processor``,
#: ``uname`` (its ``processor``, also read when the result is unpacked,
#: runs ``uname -p`` by subprocess), ``platform`` (unpacks ``uname()``
#: and reads the interpreter's file in ``libc_ver``), ``architecture``
#: (runs ``file`` by subprocess), ``libc_ver``, ``freedesktop_os_release``
#: and ``mac_ver`` (read files), ``win32_ver`` (runs ``ver``), ...
PLATFORM_PLAIN = {"system", "node", "release", "version", "machine",
                  "python_version", "python_version_tuple",
                  "python_implementation", "python_branch",
                  "python_revision", "python_build", "python_compiler",
                  "system_alias"}
#: Dunder attributes an honest answer uses.
PLAIN_DUNDERS = {"__init__", "__name__", "__doc__", "__qualname__",
                 "__len__", "__call__", "__repr__", "__str__", "__eq__",
                 "__hash__", "__iter__", "__next__", "__getitem__",
                 "__enter__", "__exit__", "__post_init__", "__future__"}
#: Magics that time code, read as part of the cell.
TIMING_MAGICS = {"time", "timeit"}
#: The autoreload modes of IPython 9's ``%autoreload`` (its extension
#: reloads only modules whose files changed, and the sandbox binds every
#: installed file read-only; the kernel imports nothing from its working
#: folder, PYTHONSAFEPATH).
AUTORELOAD_MODES = {"", "now", "0", "1", "2", "3", "off", "explicit",
                    "all", "complete"}
_DOTTED_NAME = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")


def _plain_name(line: str) -> bool:
    """``np.einsum``: a dotted name, which ``%pinfo`` looks up attribute
    by attribute (IPython's ``InteractiveShell._ofind``), evaluating
    nothing."""
    text = line.strip()
    return bool(_DOTTED_NAME.fullmatch(text)) and not any(
        keyword.iskeyword(p) for p in text.split("."))


def _autoreload_alone(line: str) -> bool:
    """``%load_ext autoreload`` loads IPython's extension: IPython 9's
    ``ExtensionManager.load_extension`` imports a top module
    ``autoreload`` first, so only where the course installs none (the
    kernel cannot import one the notebook wrote)."""
    if line != "autoreload":
        return False
    try:
        return importlib.util.find_spec("autoreload") is None
    except (ImportError, ValueError):
        return False


#: Line magics that only draw, show help or reload changed modules, each
#: with the arguments it may take (the timing magics are read apart).
SAFE_MAGICS = {
    "matplotlib": lambda line: re.fullmatch(r"\s*\w*\s*", line) is not None,
    "pinfo": _plain_name,
    "pinfo2": _plain_name,
    "load_ext": _autoreload_alone,
    "autoreload": lambda line: line.strip() in AUTORELOAD_MODES,
}
#: Top modules the grader imports to compare a name with a reference.
TRUSTED_ROOTS = {"selfattention", "torch", "numpy", "scipy", "math"}
#: Where the checks live: an answer may use only their student tools.
CHECKS = "selfattention.exercises"
GRADER = "selfattention_course"
BUILTIN_NAMES = set(dir(builtins)) - {"__name__", "__doc__", "_"}


@dataclass(frozen=True)
class Finding:
    """One reason to send an answer for review.

    ``kind`` is ``"reference"`` (the exercise's reference or a shortcut),
    ``"judge"`` (a copy of a function the grader computes the answer
    with), ``"checks" (the checks' own code), ``"dynamic"`` or ``"hook"``;
    ``cell`` counts code and text cells from 1, ``line`` counts lines of the
    cell from 1; ``text`` is that line.
    """

    kind: str
    cell: int
    line: int
    text: str
    what: str

    def quote(self) -> str:
        text = self.text.strip()
        text = text if len(text) <= 100 else text[:97] + "..."
        return f"cell {self.cell}, line {self.line}: `{text}` {self.what}"


def cell_digest(source: str) -> str:
    """The digest by which an unchanged cell of the student version is
    recognised (the manifest lists those of each chapter)."""
    return hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()


def explain(findings: list[Finding]) -> str:
    """The feedback of an answer sent for review: the first finding quoted,
    and how many more there are."""
    first = findings[0]
    more = len(findings) - 1
    return (f"{first.quote()}. Auto-points go only to answers that do the "
            f"work in plain code; the instructor reviews this one"
            + (f" ({more} more place(s) flagged)" if more else ""))


def diagnosis(findings: list[Finding]) -> str:
    """The gradebook's code of an answer sent for review from its source:
    ``review-`` and the kind of the finding that :func:`explain` quotes
    (``review-reference``, ``review-judge``, ``review-checks``,
    ``review-dynamic``, ``review-hook``). The notebook's own check, which
    sees only what the kernel reports, says ``for-review``."""
    return f"review-{findings[0].kind}"


# ------------------------------------------------------------------ parsing
@dataclass
class _Cell:
    index: int                 # position in the notebook, from 0
    source: str
    lines: list[str]
    tree: ast.Module | None
    trusted: bool              # unchanged from the student version
    python: str = ""           # the Python IPython runs for it
    inert: bool = False        # the kernel cannot run it (a syntax error)


def _python(source: str) -> str:
    """The Python IPython runs for a cell (magics become calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


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
    statements join the tree, at the lines where they stand. Raises
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


# ------------------------------------------------------------------ names
#: How many names deep an expression is followed, and how many expressions
#: one review reads at most: beyond either, the notebook goes for review.
MAX_DEPTH = 60
MAX_WORK = 200_000


class TooInvolved(Exception):
    """The notebook binds its names through each other too much to read."""


class _Budget:
    """The readings one review may still make (see ``MAX_WORK``)."""

    def __init__(self, work: int = MAX_WORK):
        self.left = work

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise TooInvolved("names bound through each other too often")


class _Names:
    """Every top-level binding of the notebook, and what a name stands for.

    A binding is ``(cell, node, value)``: an import gives the dotted name it
    binds, an assignment the expression assigned, a ``def``/``class`` its
    node. A name bound more than once stands for all of its values.
    """

    def __init__(self, cells: list[_Cell], budget: "_Budget" = None):
        self.bound: dict[str, list[tuple[_Cell, ast.AST, object]]] = {}
        self._sure: set[int] = set()     # ids of unconditional bindings
        self.budget = budget if budget is not None else _Budget()
        self._memo: dict[int, set[str]] = {}
        self._current: dict[str, list] = {}
        self._reading: set[int] = set()
        self._partial = False
        self.sure = self._sure
        # names that code unbinds: ``del x``, and ``except E as x``, which
        # deletes x when its handler ends
        self.deleted = {n.id for c in cells if c.tree is not None
                        for n in ast.walk(c.tree) if isinstance(n, ast.Name)
                        and isinstance(n.ctx, ast.Del)} | {
            n.name for c in cells if c.tree is not None
            for n in ast.walk(c.tree)
            if isinstance(n, ast.ExceptHandler) and n.name}
        for cell in cells:
            if cell.tree is None:
                continue
            for stmt in cell.tree.body:
                self._statement(cell, stmt)
                self._sure.add(id(stmt))
            for node in ast.walk(cell.tree):      # `global x` in a function
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    declared = {n for g in ast.walk(node)
                                if isinstance(g, ast.Global) for n in g.names}
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.Name) and \
                                inner.id in declared and \
                                isinstance(inner.ctx, ast.Store):
                            self._add(inner.id, cell, node, None)

    def _add(self, name, cell, node, value) -> None:
        self.bound.setdefault(name, []).append((cell, node, value))
        self._current.pop(name, None)
        self._memo.clear()

    def current(self, name: str) -> list[tuple[_Cell, ast.AST, object]]:
        """The bindings of ``name`` in effect once the notebook has run top
        to bottom: the last unconditional one and any conditional ones
        after it (a binding in an ``if``, a loop, a ``try``, a function's
        ``global``)."""
        if name not in self._current:
            found = self.bound.get(name, [])
            last = max((i for i, (_, node, _) in enumerate(found)
                        if id(node) in self._sure), default=0)
            self._current[name] = found[last:]
        return self._current[name]

    def _statement(self, cell, stmt) -> None:
        for node in _module_level(stmt):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self._add(alias.asname, cell, node, alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        self._add(top, cell, node, top)
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name == "*":
                        for name in _star_names(base):
                            self._add(name, cell, node, f"{base}.{name}")
                    else:
                        self._add(alias.asname or alias.name, cell, node,
                                  f"{base}.{alias.name}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                   ast.ClassDef)):
                self._add(node.name, cell, node, node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign,
                                   ast.AugAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) \
                    else [node.target]
                for target in targets:
                    single = isinstance(target, ast.Name)
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and \
                                isinstance(name.ctx, ast.Store):
                            self._add(name.id, cell, node,
                                      node.value if single else None)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With,
                                   ast.AsyncWith, ast.ExceptHandler)):
                holders = ([node.target] if isinstance(
                    node, (ast.For, ast.AsyncFor)) else
                    [i.optional_vars for i in node.items] if isinstance(
                        node, (ast.With, ast.AsyncWith)) else [])
                for holder in holders:
                    for name in ast.walk(holder) if holder else ():
                        if isinstance(name, ast.Name) and \
                                isinstance(name.ctx, ast.Store):
                            self._add(name.id, cell, node, None)
                if isinstance(node, ast.ExceptHandler) and node.name:
                    self._add(node.name, cell, node, None)

    def meanings(self, node, depth: int = 0) -> set[str]:
        """The dotted names an expression may stand for (``"?"`` parts
        where it is not known).

        Each expression is read once per review (a name bound through
        itself, ``a = max(a, a, a)``, is not read again on every path);
        a chain longer than ``MAX_DEPTH`` or more than ``MAX_WORK``
        readings in one review raise :class:`TooInvolved` rather than
        guess, so the notebook goes for review instead of holding up the
        grader."""
        self.budget.spend()
        key = id(node)
        if key in self._memo:
            return self._memo[key]
        if key in self._reading:            # a name bound through itself
            self._partial = True
            return set()
        if depth > MAX_DEPTH:
            raise TooInvolved("a chain of names too long to follow")
        outer, self._partial = self._partial, False
        self._reading.add(key)
        try:
            found = self._meanings(node, depth)
        finally:
            self._reading.discard(key)
        if not self._partial:               # complete: remembered
            self._memo[key] = found
        self._partial = self._partial or outer
        return found

    def _meanings(self, node, depth: int) -> set[str]:
        parts = _dotted(node)
        if parts is None:
            if isinstance(node, (ast.BoolOp, ast.IfExp)):   # f or g
                found = set()
                for value in (node.values if isinstance(node, ast.BoolOp)
                              else (node.body, node.orelse)):
                    found |= self.meanings(value, depth + 1)
                return found
            if isinstance(node, ast.Call):      # functools.partial(f) ...
                found = set()
                for arg in node.args:
                    found |= self.meanings(arg, depth + 1)
                return found
            return set()
        head, rest = parts[0], parts[1:]
        found = set()
        for _, _, value in self.bound.get(head, ()):
            if isinstance(value, str):
                found.add(".".join([value] + rest))
            elif isinstance(value, ast.expr):
                for base in self.meanings(value, depth + 1):
                    found.add(".".join([base] + rest))
        return found


def _module_level(stmt):
    """The statements a top-level statement runs at module level (the
    bodies of ``if``/``for``/``with``/``try`` included)."""
    yield stmt
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                         ast.ClassDef, ast.Lambda)):
        return
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for inner in getattr(stmt, field, ()) or ():
            yield from _module_level(inner)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.NamedExpr):
        yield stmt.value


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_locals(fn) -> set[str]:
    """Names local to one function: its parameters and what its own body
    (not a nested function's) binds, less ``global`` ones."""
    args = fn.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a}
    declared = set()
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            names.add(node.name)
            todo += node.decorator_list
            if isinstance(node, ast.ClassDef):
                todo += node.bases + node.keywords
            else:
                todo += node.args.defaults + [
                    d for d in node.args.kw_defaults if d]
            continue
        if isinstance(node, ast.Lambda):
            todo += node.args.defaults
            continue
        todo += list(ast.iter_child_nodes(node))
    return names - declared


def _global_loads(node, shadowed=frozenset()):
    """The ``Name`` loads inside ``node`` that refer to the module's
    namespace (not to a parameter or a local of an enclosing function)."""
    if isinstance(node, _SCOPES):
        for default in node.args.defaults + [d for d in
                                             node.args.kw_defaults if d]:
            yield from _global_loads(default, shadowed)
        if not isinstance(node, ast.Lambda):
            for deco in node.decorator_list:
                yield from _global_loads(deco, shadowed)
        inner = shadowed | _own_locals(node)
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            yield from _global_loads(stmt, inner)
        return
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in shadowed:
            yield node
        return
    for child in ast.iter_child_nodes(node):
        yield from _global_loads(child, shadowed)


def _importable(module: str) -> bool:
    """Whether the review may import ``module`` in the grader's process to
    read its names: an installed module of a trusted package, never one
    that runs a program when imported (``__main__``)."""
    parts = module.split(".")
    return parts[0] in TRUSTED_ROOTS and "__main__" not in parts


def _import(module: str):
    """``module`` imported for reading, or None; nothing it raises, not
    even ``SystemExit``, reaches the grader."""
    if not _importable(module):
        return None
    try:
        return importlib.import_module(module)
    except (Exception, SystemExit):
        return None


def _star_names(module: str) -> list[str]:
    found = _import(module)
    if found is None:
        return []
    names = getattr(found, "__all__", None)
    return list(names) if names is not None else [
        n for n in vars(found) if not n.startswith("_")]


# ------------------------------------------------------------------ objects
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

    def copied_by(self, node, mine: str | None) -> bool:
        if self.code is None or mine is None:
            return False
        if mine.replace(f"'{node.name}'", "'?'", 1) == self.code:
            return True
        if self.shape is None or _size(node) < SHAPE_NODES:
            return False
        if _shape_dump(node) == self.shape:
            return True
        if not self.steps:
            return False
        theirs = _steps(node)
        return _in_order(self.steps, theirs) or (
            len(self.steps) >= FUZZY_STEPS and
            _shared(self.steps, theirs) >= FUZZY_SHARE * len(self.steps))


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
    return sum(1 for _ in ast.walk(node))


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
    from .judges import answer_helpers

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
    from .judges import named_functions

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


# ------------------------------------------------------------------ review
def _finding(cell: _Cell, node, kind: str, what: str) -> Finding:
    line = getattr(node, "lineno", 1)
    text = cell.lines[line - 1] if 0 < line <= len(cell.lines) else ""
    return Finding(kind, cell.index + 1, line, text, what)


def _dynamic(cell: _Cell, names: _Names, streams: bool = False
             ) -> list[Finding]:
    """Dynamic code and hooks in one cell the student wrote or changed
    (``streams``: whether ``print(..., file=sys.stderr)`` is the builtin
    print's)."""
    if cell.inert:                    # a syntax error: nothing of it runs
        return []
    magic = _automagic(cell.python)
    if magic is not None and cell.tree is not None and \
            _shadowed(magic, cell, names):
        magic = None                  # `history` once history = [...]
    if magic is not None:
        return [Finding("hook", cell.index + 1, 1, (cell.lines or [""])[0],
                        f"runs as IPython's {magic} (a magic or an "
                        f"autocall without % or parentheses)")]
    if cell.tree is None:
        return [Finding("dynamic", cell.index + 1, 1,
                        (cell.lines or [""])[0],
                        "cannot be read as Python, so the grader cannot "
                        "tell what it does")]
    found = []
    asked = _membership_tests(cell.tree)
    called = {id(n.func) for n in ast.walk(cell.tree)
              if isinstance(n, ast.Call)}
    magics = _magic_nodes(cell.tree)
    printed = _stream_reads(cell.tree) if streams else set()
    helped = _plain_help(cell.tree, names)
    for node in ast.walk(cell.tree):
        if id(node) in magics:
            continue
        if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES and \
                id(node) not in asked:
            found.append(_finding(cell, node, "dynamic",
                                  f"{DYNAMIC_NAMES[node.id]} ({node.id})"))
        elif isinstance(node, ast.Name) and node.id in ATTRIBUTE_BUILTINS \
                and id(node) not in called:
            found.append(_finding(cell, node, "dynamic",
                                  f"passes on or renames {node.id}, which "
                                  f"reaches attributes by a computed name"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found += _imports(cell, node)
        elif isinstance(node, ast.Attribute):
            why = _attribute(node, names, stream=id(node) in printed)
            if why:
                found.append(_finding(cell, node, "dynamic", why))
        elif isinstance(node, ast.Call):
            why = _call(node)
            if not why and isinstance(node.func, ast.Name) and \
                    node.func.id == "help" and id(node) not in helped:
                why = ("asks pydoc for help on a string or an expression "
                       "(help('name') imports a module by that name)")
            if not why and isinstance(node.func, ast.Name) and \
                    node.func.id in ("setattr", "delattr") and \
                    len(node.args) >= 2:         # setattr(sys, "x", f)
                why = _attribute(ast.Attribute(
                    value=node.args[0], attr=str(node.args[1].value),
                    ctx=ast.Load()), names)
            if why:
                found.append(_finding(cell, node, "dynamic", why))
        elif isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            found.append(_finding(cell, node.value, "dynamic",
                                  "loads objects that run code "
                                  "(allow_pickle)"))
    for stmt in cell.tree.body:                  # a global `exec` & co.
        for node in _module_level(stmt):
            for name in _bound_here(node):
                if name in BUILTIN_NAMES:
                    found.append(_finding(
                        cell, node, "hook", f"rebinds the builtin name "
                                            f"`{name}`, which other code "
                                            f"of the notebook's namespace "
                                            f"calls"))
    for node in ast.walk(cell.tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign,
                                                      ast.AnnAssign))
                   else node.targets if isinstance(node, ast.Delete)
                   else [])
        for target in targets:
            if isinstance(target, ast.Attribute):
                root = target
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and any(
                        isinstance(v, str) for _, _, v in
                        names.bound.get(root.id, ())):
                    found.append(_finding(
                        cell, node, "hook",
                        f"changes the module {root.id} that other code "
                        f"(the library, the checks) uses"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("setattr", "delattr") and node.args:
            root = node.args[0]
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and any(
                    isinstance(v, str) for _, _, v in
                    names.bound.get(root.id, ())):
                found.append(_finding(
                    cell, node, "hook",
                    f"changes the module {root.id} that other code uses"))
        if isinstance(node, ast.Global):
            hit = [n for n in node.names if n in BUILTIN_NAMES]
            if hit:
                found.append(_finding(cell, node, "hook",
                                      f"rebinds the builtin name "
                                      f"`{hit[0]}`"))
    return found


def _value_places(tree):
    """The expressions of ``tree`` whose object is kept or handed on: an
    item of a list, tuple, set or dict, an argument, a value stored into
    an item or an attribute, a return or yield, a default, a lambda's
    body, the value of ``:=``."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            yield from node.elts
        elif isinstance(node, ast.Dict):
            yield from (k for k in node.keys if k is not None)
            yield from node.values
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "help":
                continue                  # help(np): read as the name
            yield from node.args
            yield from (k.value for k in node.keywords)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) \
                else [node.target]
            if node.value is not None and any(
                    isinstance(t, (ast.Subscript, ast.Attribute))
                    for t in targets):
                yield node.value
        elif isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom,
                               ast.NamedExpr)) and node.value is not None:
            yield node.value
        elif isinstance(node, ast.Lambda):
            yield node.body
            yield from node.args.defaults
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from node.args.defaults
            yield from (d for d in node.args.kw_defaults if d)
        elif isinstance(node, ast.Starred):
            yield node.value


def _is_module(dotted: str, imported: set[str]) -> bool:
    """Whether the dotted name stands for a module: one an ``import``
    statement binds, one the grader has imported, or (for the course's
    own packages) one found by looking it up."""
    if dotted in imported or dotted == "__main__":
        return True
    import sys
    if dotted in sys.modules:
        return True
    if dotted.split(".")[0] in TRUSTED_ROOTS:
        return isinstance(_lookup(dotted), types.ModuleType)
    return False


def _module_values(cell: _Cell, names: _Names) -> list[Finding]:
    """A module object (the library's, PyTorch's, any) used as a value in
    a cell the student wrote: kept in a list, a dict or an attribute,
    passed as an argument, returned. What is reached through it then
    hides from the review (``[sa][0].attention``, ``R["m"] =
    torch.nn``), so the notebook goes for review."""
    if cell.tree is None or cell.inert:
        return []
    imported = {v for found in names.bound.values()
                for _, node, v in found
                if isinstance(node, ast.Import) and isinstance(v, str)}
    outer = {id(n) for n in _global_loads(cell.tree)}
    found, read = [], {}                  # a global name reads the same
    for value in _value_places(cell.tree):
        parts = _dotted(value)
        if not parts:
            continue
        root = value
        while isinstance(root, ast.Attribute):
            root = root.value
        if id(root) not in outer:
            continue                      # a parameter, a local
        text = ".".join(parts)
        if text not in read:
            meanings = names.meanings(value) if parts[0] in names.bound \
                else {text}
            read[text] = next((m for m in sorted(meanings)
                               if "?" not in m.split(".") and
                               _is_module(m, imported)), None)
        hit = read[text]
        if hit is not None:
            found.append(_finding(
                cell, value, "dynamic",
                f"uses the module {hit} as a value (kept in a container "
                f"or an attribute, passed on or returned), through which "
                f"the grader cannot follow what is called"))
    return found


#: Magics whose names students give their variables (``history =
#: model.fit(...)``) and that, run bare, only print or do nothing.
SHADOWABLE = {"history", "config", "page", "store", "env", "precision",
              "who", "whos", "dirs", "pwd"}


def _shadowed(name: str, cell: _Cell, names: _Names) -> bool:
    """Whether ``name`` is surely in the kernel's namespace when ``cell``
    runs, so that IPython's automagic leaves a line that starts with it
    alone (``prefilter.is_shadowed``): bound by a top-level statement of
    an earlier cell, outside any ``if`` or loop, and deleted nowhere.

    Only for the names of ``SHADOWABLE``: the binding may still fail (its
    value raises), and then the magic runs; those magics, run bare, only
    print, and change neither what later cells run nor how IPython reads
    them (as ``autocall``, ``alias`` or ``rehashx`` would). And only for the
    bare name, the whole cell: whatever follows it would be the magic's
    argument (``%time`` and ``%timeit`` run theirs as a cell, so they are
    not on the list; ``store -r`` reads pickles, ``history -f`` writes)."""
    if name not in SHADOWABLE or name in names.deleted or \
            cell.python.strip() != name:
        return False
    return any(c.index < cell.index and id(node) in names.sure and
               isinstance(node, (ast.Assign, ast.FunctionDef,
                                 ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Import, ast.ImportFrom))
               for c, node, _ in names.bound.get(name, ()))


def _plain_help(tree, names: _Names) -> set[int]:
    """The ids of the calls ``help(np.einsum)`` that only read a docstring:
    a statement of the cell's top level, one dotted name whose first name
    is bound by imports, defs and classes only (or a builtin). pydoc's
    ``help`` imports a module named by a string (``pydoc.locate``), so
    ``help("x")``, ``help(s)`` with ``s = "x"`` and any other argument
    stay flagged."""
    found = set()
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and
                isinstance(call.func, ast.Name) and call.func.id == "help"
                and len(call.args) == 1 and not call.keywords):
            continue
        parts = _dotted(call.args[0])
        if not parts:
            continue
        values = [v for _, _, v in names.bound.get(parts[0], ())]
        if (values or parts[0] in BUILTIN_NAMES) and all(
                isinstance(v, (str, ast.FunctionDef, ast.AsyncFunctionDef,
                               ast.ClassDef)) for v in values):
            found.add(id(call))
    return found


#: The standard streams, which an answer may print to.
STREAMS = {"stdout", "stderr"}


def _stream_reads(tree) -> set[int]:
    """The ids of the reads ``x.stderr`` (``x.stdout``) that only print:
    the value of ``file=`` of a call of ``print``, or the object whose
    ``write``/``flush`` is called. Reading them otherwise (``e =
    sys.stderr``, ``sys.stderr.session``) stays flagged."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id == "print":
            for kw in node.keywords:
                if kw.arg == "file" and isinstance(kw.value, ast.Attribute) \
                        and kw.value.attr in STREAMS:
                    found.add(id(kw.value))
        elif isinstance(fn, ast.Attribute) and fn.attr in ("write",
                                                           "flush") \
                and isinstance(fn.value, ast.Attribute) and \
                fn.value.attr in STREAMS:
            found.add(id(fn.value))
    return found


def _binds_anywhere(cells: list[_Cell], name: str) -> bool:
    """Whether any code of the notebook binds ``name``, in any scope."""
    for cell in cells:
        for node in ast.walk(cell.tree) if cell.tree is not None else ():
            if isinstance(node, ast.Name) and node.id == name and \
                    not isinstance(node.ctx, ast.Load):
                return True
            if isinstance(node, ast.arg) and node.arg == name:
                return True
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)) and node.name == name:
                return True
            if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                    name in _bound_here(node):
                return True
            if isinstance(node, (ast.ExceptHandler, ast.MatchAs,
                                 ast.MatchStar)) and node.name == name:
                return True
            if isinstance(node, ast.MatchMapping) and node.rest == name:
                return True
            if isinstance(node, (ast.Global, ast.Nonlocal)) and \
                    name in node.names:
                return True
    return False


def _membership_tests(tree) -> set[int]:
    """``"name" in globals()``: a question about the namespace, which
    changes nothing (the ids of those ``globals`` names)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and all(
                isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and isinstance(node.left, ast.Constant):
            for right in node.comparators:
                if isinstance(right, ast.Call) and not right.args and \
                        not right.keywords and \
                        isinstance(right.func, ast.Name) and \
                        right.func.id in ("globals", "locals"):
                    found.add(id(right.func))
    return found


def _bound_here(node) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                         ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names
                if a.name != "*"]
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign,
                         ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
                         ast.NamedExpr)):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [i.optional_vars for i in node.items if i.optional_vars]
                   if isinstance(node, (ast.With, ast.AsyncWith)) else
                   [node.target])
        return [n.id for t in targets for n in ast.walk(t)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return []


def _imports(cell: _Cell, node) -> list[Finding]:
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return [_finding(cell, node, "dynamic",
                             "imports relative to a file of the notebook")]
        modules = [node.module or ""]
        if any(a.name == "*" for a in node.names) and \
                modules[0].split(".")[0] not in TRUSTED_ROOTS:
            return [_finding(cell, node, "dynamic",
                             f"imports every name of {modules[0]}")]
        modules += [f"{node.module}.{a.name}" for a in node.names]
        wanted = [node.module or ""]
        for a in node.names:                 # from sys import setprofile
            if node.module == "platform":
                if a.name in PLATFORM_PLAIN:
                    continue
                return [_finding(cell, node, "dynamic",
                                 f"imports platform.{a.name}, which may "
                                 f"start a process or read files")]
            if a.name in DYNAMIC_ATTRS or a.name in WRITE_ATTRS or \
                    a.name in SHELL_ATTRS or \
                    a.name in MODULE_ATTRS.get(node.module or "", ()) or \
                    _private_torch(f"{node.module}.{a.name}"):
                return [_finding(cell, node, "dynamic",
                                 f"imports {node.module}.{a.name}, which "
                                 f"reaches code, hooks or the interpreter")]
    else:
        modules = wanted = [a.name for a in node.names]
    found = []
    for name in modules:
        if _private_torch(name):
            found.append(_finding(cell, node, "dynamic",
                                  f"reaches PyTorch's private internals "
                                  f"({name})"))
            continue
        if name in ALLOWED_MODULES or any(
                name.startswith(m + ".") for m in ALLOWED_MODULES):
            continue
        top = name.split(".")[0]
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            mod = ".".join(parts[:cut])
            if mod in DYNAMIC_MODULES and DYNAMIC_MODULES[mod]:
                found.append(_finding(cell, node, "dynamic",
                                      f"{DYNAMIC_MODULES[mod]} ({mod})"))
                break
        else:
            if top == "selfattention_course":
                found.append(_finding(cell, node, "checks",
                                      "reaches the grader's code"))
    for name in wanted:
        top = name.split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            found.append(_finding(cell, node, "dynamic",
                                  f"imports {top}, a module the course "
                                  f"does not install (one the notebook "
                                  f"wrote?)"))
    return found


def _attribute(node: ast.Attribute, names: _Names,
               stream: bool = False) -> str | None:
    """Why reading ``node`` is dynamic code or a hook, or None
    (``stream``: the read only prints, see ``_stream_reads``)."""
    attr = node.attr
    if attr.startswith("__") and attr.endswith("__") and \
            attr not in PLAIN_DUNDERS:
        return f"reaches the interpreter's internals ({attr})"
    parts = _dotted(node.value)
    meanings = set()
    if parts:
        meanings = names.meanings(node.value) | {".".join(parts)} \
            if parts[0] not in names.bound else names.meanings(node.value)
    if meanings == {"platform"}:
        if attr in PLATFORM_PLAIN:
            return None
        return (f"may start a process or read files (platform.{attr}; "
                f"only {', '.join(sorted(PLATFORM_PLAIN))} are read "
                f"as plain)")
    if attr in SHELL_ATTRS:
        return f"reaches IPython's shell or runs code as it does ({attr})"
    if attr in DYNAMIC_ATTRS:
        return f"reaches code objects, frames or hooks ({attr})"
    if attr in WRITE_ATTRS:
        return f"writes a file (code a later import could run) ({attr})"
    for meaning in meanings:
        if stream and meaning == "sys" and attr in STREAMS:
            continue
        if attr in MODULE_ATTRS.get(meaning, ()):
            why = MODULE_REASONS.get(meaning, "changes the interpreter "
                                              "or starts code")
            return f"{why} ({meaning}.{attr})"
        if _private_torch(f"{meaning}.{attr}"):
            return (f"reaches PyTorch's private internals "
                    f"({meaning}.{attr})")
    return None


def _private_torch(dotted: str) -> bool:
    """``torch._C``, ``torch.nn.functional._x``...: a private part of
    PyTorch (its internal operators and kernels)."""
    parts = dotted.split(".")
    return parts[0] == "torch" and any(
        p.startswith("_") and p not in PLAIN_DUNDERS for p in parts[1:])


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
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and _magic(node):
            found |= {id(node.func), id(node.func.value),
                      id(node.func.value.func)}
    return found


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


#: Methods that put a value into the object they are called on.
FILLING_METHODS = {"append", "extend", "insert", "update", "setdefault",
                   "add", "__setitem__", "__setattr__", "put"}


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
                    for inner in ast.walk(node):
                        root = _filled_root(inner) if isinstance(
                            inner, ast.Call) else None
                        if root is None and isinstance(
                                inner, (ast.Subscript, ast.Attribute)) and \
                                isinstance(inner.ctx, ast.Store):
                            root = _filled_root(inner)
                        if root in data and any(
                                isinstance(n, ast.Name) and n.id == root and
                                id(n) in outer for n in ast.walk(inner)):
                            writers.setdefault(root, set()).add(node.name)
                    continue
                for inner in _global_loads(node):
                    loaders.setdefault(inner.id, []).append((cell, node))
                for inner in ast.walk(node):
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
            declared = {n for g in ast.walk(node) if isinstance(g, ast.Global)
                        for n in g.names} & answers
            for inner in ast.walk(node):
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
                                for n in ast.walk(node.value)):
                    flag(cell, node, target.id, "to itself")
                elif not isinstance(target, ast.Name):
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name) and n.id in answers \
                                and isinstance(n.ctx, ast.Store):
                            flag(cell, node, n.id, "by unpacking")
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor,
                               ast.NamedExpr)):
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name) and n.id in answers:
                    flag(cell, node, n.id, "by a loop, `:=` or `+=`")
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                for n in ast.walk(item.optional_vars) \
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
    for inner in ast.walk(node):               # imports inside functions
        if isinstance(inner, (ast.Import, ast.ImportFrom)):
            local._statement(cell, inner)
            for dotted in _imported(inner):
                why = _meaning(dotted, refs)
                if why:
                    found.append(_finding(cell, inner, *why))
    outer = {id(n) for n in _global_loads(node)}
    for inner in ast.walk(node):
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


#: What a copy of a reference or a helper can be written as: a def (a
#: method, an inner one) or a lambda (read as a def returning its body).
_COPYABLE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _as_def(node):
    """A lambda as the def that returns its body (named ``lambda_``)."""
    if not isinstance(node, ast.Lambda):
        return node
    made = ast.FunctionDef(name="lambda_", args=node.args,
                           body=[ast.Return(value=node.body)],
                           decorator_list=[], returns=None)
    return ast.fix_missing_locations(ast.copy_location(made, node))


def _copies(cell: _Cell, node, refs, helpers) -> list[Finding]:
    """A function of a cell the student wrote (any def, method or lambda,
    whether an answer reaches it or not) that is a copy of a reference's
    code or of a judge's helper."""
    found = []
    node = _as_def(node)
    try:
        mine = _body_dump(node)
    except SyntaxError:
        mine = None
    shape = None
    for ref in refs:
        if ref.shape is not None and shape is None and \
                _size(node) >= SHAPE_NODES:
            shape = _shape_dump(node)
        if ref.code is not None and mine == ref.code.replace(
                f"'{ref.short}'", f"'{node.name}'", 1) or (
                ref.shape is not None and shape == ref.shape):
            found.append(_finding(
                cell, node, "reference",
                f"is a copy of {ref.dotted}, which this exercise asks you "
                f"to write yourself"))
    for helper in helpers:
        if helper.copied_by(node, mine):
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
        if len(rest) >= 2 and rest[0] != "core":
            module = _lookup(f"{CHECKS}.{rest[0]}")
            tools = set(getattr(module, "__all__", ())) if module else set()
            obj = getattr(module, rest[1], None) if module else None
            from selfattention.exercises.core import Exercise

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
        for label, (answers, references, *judge) in exercises.items():
            refs = [_reference(r) for r in references]
            helpers = _helpers(label, judge[0]) if judge and \
                judge[0] is not None else ()
            found = _odd_bindings(cells, set(answers))
            reached = set()
            for cell, node in _reach(names, answers, filled):
                where = cell
                reached.add(id(node))
                found += _uses(cell, node, names, refs, set(answers),
                               helpers)
            # copies are looked for in every function the student wrote,
            # reached or not (a dict, a registry, an object may hold it)
            for cell in own:
                where = cell
                for node in ast.walk(cell.tree):
                    if isinstance(node, _COPYABLE):
                        found += _copies(cell, node, refs, helpers)
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
