"""The tripwire: a profiling hook that notices, while an answer runs, calls
of the library's own version of what the exercise asks for, of the copies a
chapter shows on its page (by :func:`fingerprint`), and of the checks' own
code.

It runs in the student's kernel, in the notebook's check and in the grader's
harvest alike (:meth:`~selfattention_exercises.core.Exercise.attempt`): in
the notebook it tells a student at once that an answer calls the library;
in the grader it adds evidence to the source review and never clears an
answer. :func:`signatures` names where the references' code lives, so that
a graded kernel need not import what only an answer could reach.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import linecache
import os
import sys
import threading
import types



#: The package of the checks: an answer may not call into it.
CHECKS_PACKAGE = "selfattention_exercises"


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
