"""Which names a cell binds and uses, and which top-level names a function
reaches, within a budget of work (:class:`TooInvolved` past it)."""

from __future__ import annotations

import ast
import importlib
import importlib.util

from .cells import _Cell, _dotted, walk
from .rules import TRUSTED_ROOTS

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
                        for n in walk(c.tree) if isinstance(n, ast.Name)
                        and isinstance(n.ctx, ast.Del)} | {
            n.name for c in cells if c.tree is not None
            for n in walk(c.tree)
            if isinstance(n, ast.ExceptHandler) and n.name}
        for cell in cells:
            if cell.tree is None:
                continue
            for stmt in cell.tree.body:
                self._statement(cell, stmt)
                self._sure.add(id(stmt))
            for node in walk(cell.tree):      # `global x` in a function
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    declared = {n for g in walk(node)
                                if isinstance(g, ast.Global) for n in g.names}
                    for inner in walk(node):
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
                    for name in walk(target):
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
                    for name in walk(holder) if holder else ():
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
