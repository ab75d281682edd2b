"""What the source review flags: the tables of names, modules, attributes
and magics that reach code, hooks or the interpreter, and the roots the
grader trusts to compare a name with a reference."""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import keyword
import re

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


#: IPython's output cache: the values earlier cells showed (``Out[3]``,
#: ``_``, ``_3``), among them functions and modules whose names the
#: notebook never reads again. Read as a global, it is dynamic code.
OUTPUT_CACHE = re.compile(r"Out|_oh|_{1,3}|_\d+")


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
    "linecache": "rewrites the source lines by which the tripwire knows "
                 "the code a chapter shows",
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


#: Top modules the grader imports to compare a name with a reference (the
#: trained models' package, such as ``photo_vit.masked_patch_loss``, and the
#: training recipes too: they import the library's functions and call them).
TRUSTED_ROOTS = {"selfattention", "selfattention_exercises",
                 "selfattention_models", "selfattention_training", "torch",
                 "numpy", "scipy", "math"}


#: Where the checks live: an answer may use only their student tools.
CHECKS = "selfattention_exercises"


GRADER = "selfattention_course"


BUILTIN_NAMES = set(dir(builtins)) - {"__name__", "__doc__", "_"}


#: Magics whose names students give their variables (``history =
#: model.fit(...)``) and that, run bare, only print or do nothing.
SHADOWABLE = {"history", "config", "page", "store", "env", "precision",
              "who", "whos", "dirs", "pwd"}


#: The standard streams, which an answer may print to.
STREAMS = {"stdout", "stderr"}


#: Methods that put a value into the object they are called on.
FILLING_METHODS = {"append", "extend", "insert", "update", "setdefault",
                   "add", "__setitem__", "__setattr__", "put"}
