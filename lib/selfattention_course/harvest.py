"""In the student's kernel: run one exercise's answers on its hidden cases.

The runner calls :func:`harvest` once per exercise after the notebook has
run, in the same kernel. The runner executes this file afresh from the
read-only installation (not through ``import``, which the notebook could
have redirected), and :func:`harvest` likewise loads its own copies of
:mod:`selfattention_exercises.core` (with the plain data, the tripwire and
the feedback it uses), of :mod:`selfattention_course.wire` and of the
exercise's module from their files: whatever the notebook replaced in the
modules it imported (a check, ``Feedback``, ``Exercise.attempt``) is not
what runs here.

It reads the answers by name from the notebook's namespace, runs them on
the hidden cases (which the runner writes into this call's own folder just
before the call) with ``Exercise.attempt`` (the references' tripwire armed
with the signatures the grader computed, anything printed thrown away),
writes the plain-data result to a new file of that folder named after the
call's nonce (created exclusively: it never replaces a file, never follows
a link), and returns the digest of the nonce and the bytes written, which
the runner compares with the file it reads (:mod:`selfattention_course.
runner`, "Results only the harvest can write"). The grader judges the
result in its own process.

This still runs inside a process the student controls, so it proves
nothing by itself: a notebook that changes Python or NumPy themselves could
forge what is written here. What it cannot do is know the right outputs for
the hidden cases without running a correct implementation.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

# Bound when this file is executed, before any answer runs.
_open, _write, _close = os.open, os.write, os.close
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

__all__ = ["harvest", "fresh_modules"]

CHECKS = "selfattention_exercises"
#: The checks' modules that every exercise module uses, in the order they
#: import each other: ``selfattention_exercises.CORE_MODULES``, written
#: here because the kernel's copy of that package may be the notebook's.
CHECKS_CORE = ("plain", "tripwire", "feedback", "core")
CORE = f"{CHECKS}.core"
WIRE = "selfattention_course.wire"


class _Discard:
    """A text stream that keeps nothing."""

    encoding = "utf-8"

    def write(self, text) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _load(name: str, path: Path):
    """A new module ``name`` executed from ``path`` (registered meanwhile)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def fresh_modules(exercise_module: str, here: Path | None = None):
    """Fresh copies of the checks' core (:data:`CHECKS_CORE`), the wire
    format and an exercise module.

    ``here`` is the folder of this file; the book's modules are found next
    to it. The kernel's own modules are put back afterwards.
    """
    here = Path(here or Path(__file__).resolve().parent)
    root = here.parent
    shared = tuple(f"{CHECKS}.{stem}" for stem in CHECKS_CORE)
    names = (*shared, WIRE, exercise_module)
    saved = {name: sys.modules.get(name) for name in names}
    try:
        for name in shared:
            _load(name, root.joinpath(*name.split(".")).with_suffix(".py"))
        core = sys.modules[CORE]
        wire = _load(WIRE, here / "wire.py")
        if exercise_module.startswith(("selfattention.",
                                        "selfattention_exercises.")):
            path = root.joinpath(*exercise_module.split(".")).with_suffix(
                ".py")
        else:
            path = Path(importlib.util.find_spec(exercise_module).origin)
        module = _load(exercise_module, path)
    finally:
        for name, module_before in saved.items():
            if module_before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module_before
    return core, wire, module


def _namespace() -> dict:
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            return shell.user_ns
    except ImportError:
        pass
    return vars(sys.modules["__main__"])


def harvest(job_dir: str, index: int, out_dir: str, nonce: str) -> str:
    """Run exercise ``index`` of the job, write its result file; return
    its digest (the runner accepts nothing else)."""
    from selfattention_course.names import JOB_FILE

    job = json.loads(Path(job_dir, JOB_FILE).read_text(encoding="utf-8"))
    spec = job["exercises"][index]
    module_name, _, name = spec["ref"].partition(":")
    core, wire, module = fresh_modules(module_name)
    exercise = getattr(module, name)
    # The runner puts the hidden cases next to the result only now.
    cases = wire.load_cases(Path(out_dir, spec["cases"]).read_bytes())
    namespace = _namespace()
    answers = [namespace[a] if a in namespace else core.Missing(a)
               for a in spec["answers"]]
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = _Discard()
    try:
        result = exercise.attempt(answers, cases,
                                  [tuple(p) for p in spec["places"]])
    finally:
        sys.stdout, sys.stderr = saved
    data = wire.dump_result(result)
    if len(data) > wire.MAX_BUNDLE:
        # Too large to send: one byte past the limit says so (the runner
        # reads the size before anything else) and stays far below the
        # sandbox's file size limit, whatever the answer returned.
        data = data[:wire.MAX_BUNDLE + 1]
    fd = _open(os.path.join(out_dir, f"result-{nonce}.bin"), _NEW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[_write(fd, view):]
    finally:
        _close(fd)
    return hashlib.sha256(nonce.encode() + b"\0" + data).hexdigest()
