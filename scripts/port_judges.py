"""Move the judges of one exercise module to the grader.

``python scripts/port_judges.py <module>`` reads
``lib/selfattention/exercises/<module>.py`` and

* moves every function named by a ``cases=``, ``judge=`` or ``replay=``
  keyword of an ``Exercise(...)``, and every top-level function, class or
  constant that only those use, into
  ``lib/selfattention_course/judges/<module>.py``, which imports back what
  the chapter's module keeps and ends with ``JUDGES = {label: Judge(...)}``;
* deletes those three keywords from the declarations.

What a ``run`` or a public tool of the chapter's module uses stays there
(the judges import it). Run ruff with ``--fix`` on both files afterwards
for the imports that became unused. The recipe is in the docstring of
:mod:`selfattention_course.judges`.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("cases", "judge", "replay")


def _span(node) -> tuple[int, int]:
    """First and last line (1-based) of a top-level statement, with its
    decorators and the comment lines just above it."""
    start = min([node.lineno] + [d.lineno for d in
                                 getattr(node, "decorator_list", [])])
    return start, node.end_lineno


def _names_bound(node) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                         ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target]
        return [n.id for t in targets for n in ast.walk(t)
                if isinstance(n, ast.Name)]
    return []


def _loads(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _deps(node) -> set[str]:
    """The names a statement uses, less the judges an ``Exercise(...)``
    names (those move)."""
    skip = set()
    for call in _exercise_calls(node):
        for k in call.keywords:
            if k.arg in KEYS:
                skip |= {id(n) for n in ast.walk(k.value)}
    return {n.id for n in ast.walk(node)
            if isinstance(n, ast.Name) and id(n) not in skip}


def _exercise_calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "Exercise":
            yield node


def _import_line(node, package: str) -> str:
    """A module-level import of the chapter's module, made absolute."""
    if isinstance(node, ast.ImportFrom) and node.level:
        base = package.split(".")
        base = base[:len(base) - node.level]
        module = ".".join(base + ([node.module] if node.module else []))
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "")
                          for a in node.names)
        line = f"from {module} import {names}"
    else:
        line = ast.unparse(node)
    if len(line) <= 79:
        return line
    head, _, names = line.partition(" import ")
    out, current = [], f"{head} import ("
    for name in names.split(", "):
        if len(current) + len(name) + 2 > 79:
            out.append(current.rstrip())
            current = " " * (len(head) + 9)
        current += name + ", "
    return "\n".join(out + [current.rstrip(", ") + ")"])


def port(stem: str) -> tuple[Path, Path]:
    source_path = ROOT / "lib" / "selfattention" / "exercises" / f"{stem}.py"
    target = ROOT / "lib" / "selfattention_course" / "judges" / f"{stem}.py"
    if target.exists():
        raise SystemExit(f"{target} exists already")
    text = source_path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    top = {}                               # name -> statement
    for node in tree.body:
        for name in _names_bound(node):
            top[name] = node
    table = []                             # (label, {key: function name})
    for call in _exercise_calls(tree):
        label = call.args[0].value if call.args and isinstance(
            call.args[0], ast.Constant) else None
        given = {k.arg: k.value.id for k in call.keywords
                 if k.arg in KEYS and isinstance(k.value, ast.Name)}
        if label and "judge" in given:
            table.append((label, given))
    if not table:
        raise SystemExit(f"{source_path}: no Exercise with a judge")
    # What the judges reach.
    moved, todo = set(), [f for _, g in table for f in g.values()]
    while todo:
        name = todo.pop()
        if name in moved or name not in top:
            continue
        moved.add(name)
        todo += [n for n in _loads(top[name]) if n in top]
    # What the code that stays reaches stays too.
    public = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in node.targets):
            public = {e.value for e in node.value.elts}
    staying_roots = [node for node in tree.body
                     if not set(_names_bound(node)) & moved
                     and not isinstance(node, (ast.Import, ast.ImportFrom))]
    keep, todo = set(), list(public)
    for node in staying_roots:
        todo += [n for n in _deps(node) if n in top]
    while todo:
        name = todo.pop()
        if name in keep or name not in top:
            continue
        keep.add(name)
        todo += [n for n in _deps(top[name]) if n in top]
    moved -= keep
    # A statement moves when all it binds moves (``GRID, PATCH = 8, 4``
    # stays if a tool uses PATCH).
    moved = {n for n in moved if set(_names_bound(top[n])) <= moved}
    shared = sorted(n for n in keep if n in top and any(
        n in _loads(top[m]) for m in moved))
    # The judges module.
    package = f"selfattention.exercises.{stem}"
    imports = [_import_line(n, package) for n in tree.body
               if isinstance(n, (ast.Import, ast.ImportFrom))
               and not (isinstance(n, ast.ImportFrom)
                        and n.module == "__future__")]
    chunks, cut = [], []
    for node in tree.body:
        if set(_names_bound(node)) & moved:
            start, end = _span(node)
            while start > 1 and lines[start - 2].startswith("#") and \
                    not lines[start - 2].startswith("# ---"):
                start -= 1
            chunk = "".join(lines[start - 1:end])
            # imports inside functions, made absolute
            chunk = re.sub(r"(?m)^(\s+)from \.\.(\w)",
                           r"\1from selfattention.\2", chunk)
            chunk = re.sub(r"(?m)^(\s+)from \.(\w)",
                           r"\1from selfattention.exercises.\2", chunk)
            chunks.append(chunk)
            cut.append((start, end))
    title = ast.get_docstring(tree) or stem
    head = title.splitlines()[0].rstrip(".").replace("Exercises of ", "")
    out = [f'"""The judges of {head}: hidden cases, judges and\nthe '
           f'reference helpers they use (see\n'
           f':mod:`selfattention_course.judges`)."""\n\n',
           "from __future__ import annotations\n\n"]
    out += [line + "\n" for line in imports]
    if shared:
        out.append(f"from {package} import (\n    "
                   + ", ".join(shared) + ")\n")
    out.append("\nfrom . import Judge\n\n\n")
    previous_plain = False
    for i, chunk in enumerate(chunks):
        plain = not chunk.lstrip().startswith(("def ", "class ", "@"))
        if i and not (plain and previous_plain):
            out.append("\n\n")
        out.append(chunk.rstrip("\n") + "\n")
        previous_plain = plain
    out.append("\n\nJUDGES = {\n")
    for label, given in table:
        args = ", ".join(f"{k}={v}" for k, v in
                         sorted(given.items(), key=lambda kv:
                                KEYS.index(kv[0])))
        entry = f'    "{label}": Judge({args}),\n'
        if len(entry) > 80:
            entry = f'    "{label}": Judge(\n        {args}),\n'
        out.append(entry)
    out.append("}\n")
    target.write_text("".join(out), encoding="utf-8")
    # The chapter's module without them.
    drop = set()
    for start, end in cut:
        drop |= set(range(start, end + 1))
        # the blank lines after a removed block
        line = end + 1
        while line <= len(lines) and not lines[line - 1].strip():
            drop.add(line)
            line += 1
    removals = []                          # (line, col, end line, end col)
    for call in _exercise_calls(tree):
        kws = call.keywords
        for i, k in enumerate(kws):
            if k.arg in KEYS:
                start = (k.value.lineno, k.value.col_offset - len(k.arg) - 1)
                if i + 1 < len(kws):
                    nxt = kws[i + 1]
                    end = (nxt.value.lineno,
                           nxt.value.col_offset - len(nxt.arg) - 1)
                else:
                    end = (k.value.end_lineno, k.value.end_col_offset)
                removals.append(start + end)
    kept = [list(line) for line in lines]
    for sl, sc, el, ec in sorted(removals, reverse=True):
        if sl == el:
            kept[sl - 1][sc:ec] = []
        else:
            kept[sl - 1][sc:] = ["\n"]
            for ln in range(sl + 1, el):
                kept[ln - 1] = []
            indent = len(lines[el - 1]) - len(lines[el - 1].lstrip())
            kept[el - 1][indent:ec] = []
    result = []
    for number, chars in enumerate(kept, start=1):
        if number in drop:
            continue
        line = "".join(chars)
        if not line.strip() and lines[number - 1].strip():
            continue                   # a line that held only keywords
        result.append(re.sub(r"[ \t]+\n$", "\n", line))
    text = "".join(result)
    text = re.sub(r"\n{3,}(# -{10,})", r"\n\n\n\1", text)
    source_path.write_text(text, encoding="utf-8")
    return source_path, target


if __name__ == "__main__":
    for stem in sys.argv[1:]:
        print(*port(stem))
