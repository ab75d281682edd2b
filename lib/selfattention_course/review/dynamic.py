"""Findings of dynamic code and hooks: what in a cell the student wrote
reaches code built at run time, the interpreter, IPython or other processes
(see :mod:`selfattention_course.review`)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import types

from .cells import _automagic, _call, _Cell, _dotted, _magic_nodes, walk
from .findings import Finding
from .likeness import _lookup
from .rules import (
    ALLOWED_MODULES,
    ATTRIBUTE_BUILTINS,
    BUILTIN_NAMES,
    DYNAMIC_ATTRS,
    DYNAMIC_MODULES,
    DYNAMIC_NAMES,
    MODULE_ATTRS,
    MODULE_REASONS,
    OUTPUT_CACHE,
    PLAIN_DUNDERS,
    PLATFORM_PLAIN,
    SHADOWABLE,
    SHELL_ATTRS,
    STREAMS,
    TRUSTED_ROOTS,
    WRITE_ATTRS,
)
from .scope import _global_loads, _module_level, _Names


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
    called = {id(n.func) for n in walk(cell.tree)
              if isinstance(n, ast.Call)}
    magics = _magic_nodes(cell.tree)
    outer = {id(n) for n in _global_loads(cell.tree)}
    printed = _stream_reads(cell.tree) if streams else set()
    helped = _plain_help(cell.tree, names)
    for node in walk(cell.tree):
        if id(node) in magics:
            continue
        if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES and \
                id(node) not in asked:
            found.append(_finding(cell, node, "dynamic",
                                  f"{DYNAMIC_NAMES[node.id]} ({node.id})"))
        elif isinstance(node, ast.Name) and id(node) in outer and \
                OUTPUT_CACHE.fullmatch(node.id):
            found.append(_finding(cell, node, "dynamic",
                                  f"reads IPython's output cache "
                                  f"({node.id}), which keeps what earlier "
                                  f"cells showed"))
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
    for node in walk(cell.tree):
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
    for node in walk(tree):
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


def _stream_reads(tree) -> set[int]:
    """The ids of the reads ``x.stderr`` (``x.stdout``) that only print:
    the value of ``file=`` of a call of ``print``, or the object whose
    ``write``/``flush`` is called. Reading them otherwise (``e =
    sys.stderr``, ``sys.stderr.session``) stays flagged."""
    found = set()
    for node in walk(tree):
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
        for node in walk(cell.tree) if cell.tree is not None else ():
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
    for node in walk(tree):
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
        return [n.id for t in targets for n in walk(t)
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
        real = _module_named(name)
        flagged = _flagged_module(name) or (_flagged_module(real) if real
                                            else None)
        if flagged:
            found.append(_finding(cell, node, "dynamic",
                                  f"{flagged[1]} ({flagged[0]})"))
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
    # a module read as another module's attribute is that module
    meanings |= {real for real in map(_module_named, meanings) if real}
    for meaning in sorted(meanings):
        real = _module_named(f"{meaning}.{attr}")
        flagged = _flagged_module(real) if real else None
        if flagged:
            return f"{flagged[1]} ({flagged[0]}, read as {meaning}.{attr})"
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


def _module_named(dotted: str) -> str | None:
    """The name of the module that ``dotted`` stands for where it reads a
    module as another module's attribute (``os.sys`` is ``sys``,
    ``traceback.linecache`` is ``linecache``), or None: read from the
    modules the grader has imported, by their namespaces (no import, no
    module ``__getattr__`` runs)."""
    import sys

    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        obj = sys.modules.get(".".join(parts[:cut]))
        if not isinstance(obj, types.ModuleType):
            continue
        for attr in parts[cut:]:
            obj = vars(obj).get(attr) if isinstance(
                obj, types.ModuleType) else None
        name = getattr(obj, "__name__", None) if isinstance(
            obj, types.ModuleType) else None
        return name if isinstance(name, str) and name != dotted else None
    return None


def _flagged_module(name: str) -> tuple[str, str] | None:
    """``(module, why)`` when ``name`` or a package of it is one of
    :data:`DYNAMIC_MODULES` flagged on import."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        mod = ".".join(parts[:cut])
        if DYNAMIC_MODULES.get(mod):
            return mod, DYNAMIC_MODULES[mod]
    return None


def _private_torch(dotted: str) -> bool:
    """``torch._C``, ``torch.nn.functional._x``...: a private part of
    PyTorch (its internal operators and kernels)."""
    parts = dotted.split(".")
    return parts[0] == "torch" and any(
        p.startswith("_") and p not in PLAIN_DUNDERS for p in parts[1:])


