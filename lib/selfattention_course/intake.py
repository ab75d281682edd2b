"""Reading a folder of submissions that may be hostile.

Only regular files are read, through file descriptors opened relative to
their folder with ``O_NOFOLLOW`` (a symbolic link anywhere below the
submissions folder is refused, file or folder) and ``O_NONBLOCK`` (a FIFO
cannot block the grader), and checked again with ``fstat`` after opening. A
file larger than the limit is refused without being read. A refused file
gives a :class:`Submission` with a ``problem`` and no content; no message
ever quotes a file's content. A problem is a
:class:`~selfattention_course.names.Problem`, whose ``code`` says what was
refused (the diagnosis of the gradebook row it becomes):

* ``symlink``: a symbolic link, to a file or a folder;
* ``not-a-file``: a FIFO, a device, a socket or a folder named ``.ipynb``;
* ``too-large``: a file over the size limit (it is not read);
* ``too-large-in-all``: a notebook past :data:`MAX_STUDENT_BYTES` of the
  student's notebooks together;
* ``unreadable``: a file or folder that could not be opened or read;
* ``two-sources``: a loose notebook beside a folder of the same student;
* ``too-many-entries``: the student's notebooks or folder entries past
  :data:`MAX_PER_STUDENT` or :data:`MAX_ENTRIES` (one row says that more
  were not read).

Layouts: ``SUBMISSIONS/<student>/<any name>.ipynb`` (subfolders allowed), and
loose notebooks ``SUBMISSIONS/<name>.ipynb``, which count as the
submission of a student called ``<name>``. Hidden entries (``.name``, such
as ``.ipynb_checkpoints``) are skipped. One source per student: a loose
``victim.ipynb`` beside a folder ``victim/`` is refused as a whole (neither
is read), with a row that names both, since anyone who can drop a file in
the folder could otherwise add a worse notebook to a classmate's.

A student's name is the folder's (or loose file's) name, shown as it is
when it is printable, short and in Unicode's composed form; any other name
is shown cleaned and followed by ``~`` and a digest of the real name, so
two folders whose names would look alike never merge into one student.
One student may hand in at most :data:`MAX_PER_STUDENT` notebooks and
:data:`MAX_STUDENT_BYTES` bytes; a folder is read up to
:data:`MAX_ENTRIES` entries.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .names import Problem

__all__ = ["Submission", "IntakeError", "collect", "display_name",
           "student_name", "safe_file_name", "mixed_scripts"]

MAX_DEPTH = 4
#: Notebooks, bytes and folder entries read for one student.
MAX_PER_STUDENT = 20
MAX_STUDENT_BYTES = 60 * 2 ** 20
MAX_ENTRIES = 10_000
_KINDS = [(stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder")]


class IntakeError(ValueError):
    """The submissions folder itself cannot be read safely."""


@dataclass
class Submission:
    """One notebook handed in, or a file the grader refused to read."""

    student: str
    name: str                    # the file's path below the student folder
    data: bytes | None = None
    problem: Problem | None = None       # with its code (module docstring)


def display_name(name: str, limit: int = 80) -> str:
    """A file or folder name safe to print: no control characters."""
    text = "".join(ch if ch.isprintable() else "?" for ch in name)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")) \
        .hexdigest()[:8]


def student_name(name: str, limit: int = 64) -> str:
    """A student's name safe to print, and distinct for distinct ``name``.

    A printable name of at most ``limit`` characters in composed Unicode
    (NFC) stays as it is; any other is cleaned by :func:`display_name` and
    followed by ``~`` and a digest of the real name.
    """
    if (len(name) <= limit and display_name(name, limit) == name
            and unicodedata.normalize("NFC", name) == name):
        return name
    return display_name(name, limit - 9) + "~" + _digest(name)


# Scripts written together in one name as a matter of course: Japanese
# (kanji, hiragana, katakana) and Korean (hangul, hanja).
_ONE_SCRIPT = {"CJK": "HAN", "HIRAGANA": "HAN", "KATAKANA": "HAN",
               "HANGUL": "HAN", "IDEOGRAPHIC": "HAN"}


def _script(ch: str) -> str | None:
    """The script of a letter, by the first word of its Unicode name."""
    if not ch.isalpha():
        return None
    try:
        word = unicodedata.name(ch).split()[0]
    except ValueError:
        return "UNKNOWN"
    return _ONE_SCRIPT.get(word, word)


def mixed_scripts(name: str) -> list[str]:
    """The scripts of the letters of ``name`` when there are two or more
    (``["CYRILLIC", "LATIN"]``), else ``[]``."""
    found = {_script(ch) for ch in unicodedata.normalize("NFC", name)}
    found.discard(None)
    return sorted(found) if len(found) > 1 else []


def safe_file_name(name: str) -> str:
    """A name for a file of the gradebook made from a student's name."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._") or "student"
    if slug != name:
        slug += "-" + hashlib.sha256(name.encode("utf-8", "replace")) \
            .hexdigest()[:8]
    return slug[:100]


def _kind(mode: int) -> str:
    for test, text in _KINDS:
        if test(mode):
            return text
    return "not a regular file"


def _read(dir_fd: int, name: str, shown: str, max_bytes: int):
    """``(bytes, None)`` or ``(None, problem)`` for one entry."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as err:
        return None, Problem(f"{shown} could not be read ({err.strerror})",
                             "unreadable")
    if stat.S_ISLNK(before.st_mode):
        return None, Problem(f"{shown} is a symbolic link; hand in the file "
                             f"itself", "symlink")
    if not stat.S_ISREG(before.st_mode):
        return None, Problem(f"{shown} is {_kind(before.st_mode)}, not a "
                             f"regular file", "not-a-file")
    if before.st_size > max_bytes:
        return None, _too_large(shown, max_bytes)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as err:
        return None, Problem(f"{shown} could not be opened "
                             f"({err.strerror})", "unreadable")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, Problem(f"{shown} is {_kind(info.st_mode)}, not a "
                                 f"regular file", "not-a-file")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            return None, _too_large(shown, max_bytes)
        return b"".join(chunks), None
    except OSError as err:
        return None, Problem(f"{shown} could not be read ({err.strerror})",
                             "unreadable")
    finally:
        os.close(fd)


def _too_large(shown: str, max_bytes: int) -> Problem:
    return Problem(f"{shown} is larger than {max_bytes / 2 ** 20:g} MB; "
                   f"clear its outputs and hand it in again", "too-large")


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(name, flags, dir_fd=dir_fd)


class _Budget:
    """What is left to read of one student's submission."""

    def __init__(self):
        self.notebooks, self.bytes = MAX_PER_STUDENT, MAX_STUDENT_BYTES
        self.entries = MAX_ENTRIES
        self.skipped = 0


def _scan(dir_fd: int, budget: _Budget) -> list:
    """The entries of a folder, sorted, within the budget of entries."""
    entries = []
    with os.scandir(dir_fd) as it:
        for entry in it:
            if budget.entries <= 0:
                budget.skipped += 1
                break
            budget.entries -= 1
            entries.append(entry)
    return sorted(entries, key=lambda e: e.name)


def _take(dir_fd: int, name: str, shown: str, max_bytes: int,
          student: str, budget: _Budget) -> Submission | None:
    """Read one notebook within the student's budget (None: over it)."""
    if budget.notebooks <= 0:
        budget.skipped += 1
        return None
    budget.notebooks -= 1
    data, problem = _read(dir_fd, name, shown, min(max_bytes, budget.bytes))
    if data is None and problem and budget.bytes < max_bytes and \
            problem.code == "too-large":
        problem = Problem(f"{shown} was not read: the notebooks of one "
                          f"student may hold {MAX_STUDENT_BYTES / 2 ** 20:g} "
                          f"MB in all", "too-large-in-all")
    budget.bytes -= len(data or b"")
    return Submission(student, shown, data, problem)


def _walk(dir_fd: int, student: str, prefix: str, depth: int,
          max_bytes: int, found: list, budget: _Budget) -> None:
    entries = _scan(dir_fd, budget)
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        shown = display_name(prefix + name)
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            what = "folder" if not name.endswith(".ipynb") else "file"
            found.append(Submission(student, shown, problem=Problem(
                f"{shown} is a symbolic link; hand in the {what} itself",
                "symlink")))
        elif stat.S_ISDIR(mode):
            if depth >= MAX_DEPTH:
                continue
            try:
                sub = _open_dir(name, dir_fd)
            except OSError:
                found.append(Submission(student, shown, problem=Problem(
                    f"{shown} could not be opened", "unreadable")))
                continue
            try:
                _walk(sub, student, prefix + name + "/", depth + 1,
                      max_bytes, found, budget)
            finally:
                os.close(sub)
        elif name.endswith(".ipynb"):
            taken = _take(dir_fd, name, shown, max_bytes, student, budget)
            if taken is not None:
                found.append(taken)


def collect(folder: Path, max_bytes: int = 20 * 2 ** 20) -> list[Submission]:
    """Every notebook (or refused file) under ``folder``, sorted.

    Raises :class:`IntakeError` when ``folder`` is not a real folder (a
    symbolic link to one is refused too).
    """
    folder = Path(folder)
    try:
        info = os.lstat(folder)
    except OSError as err:
        raise IntakeError(f"{folder}: {err.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise IntakeError(f"{folder} is a symbolic link; give the folder "
                          f"itself")
    if not stat.S_ISDIR(info.st_mode):
        raise IntakeError(f"{folder} is not a folder")
    root = _open_dir(str(folder))
    found: list[Submission] = []
    budgets: dict[str, _Budget] = {}
    sources: dict[str, dict[str, str]] = {}      # student -> kind -> name
    try:
        entries = _scan(root, _class_budget())
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            student = student_name(name.removesuffix(".ipynb")
                                   if not stat.S_ISDIR(mode) else name)
            if stat.S_ISDIR(mode) or name.endswith(".ipynb"):
                kind = "folder" if stat.S_ISDIR(mode) else "file"
                sources.setdefault(student, {})[kind] = display_name(name)
            budget = budgets.setdefault(student, _Budget())
            if stat.S_ISDIR(mode):
                try:
                    sub = _open_dir(name, root)
                except OSError:
                    problem = Problem("the folder could not be opened",
                                      "unreadable")
                    found.append(Submission(student, display_name(name),
                                            problem=problem))
                    continue
                try:
                    _walk(sub, student, "", 1, max_bytes, found, budget)
                finally:
                    os.close(sub)
            elif stat.S_ISLNK(mode):
                what = "file" if name.endswith(".ipynb") else "folder"
                problem = Problem(f"{display_name(name)} is a symbolic link; "
                                  f"hand in the {what} itself", "symlink")
                found.append(Submission(student, display_name(name),
                                        problem=problem))
            elif name.endswith(".ipynb"):
                taken = _take(root, name, display_name(name), max_bytes,
                              student, budget)
                if taken is not None:
                    found.append(taken)
    finally:
        os.close(root)
    for student, kinds in sources.items():
        if len(kinds) > 1:
            found = [s for s in found if s.student != student]
            found.append(Submission(student, "", problem=Problem(
                f"two sources for {display_name(student)}: a loose notebook "
                f"{kinds['file']} and a folder {kinds['folder']}/; one "
                f"student hands in one of them, so neither was graded (move "
                f"the notebook into the folder, or remove one, and grade "
                f"again)", "two-sources")))
            budgets.pop(student, None)
    for student, budget in budgets.items():
        if budget.skipped:
            found.append(Submission(student, "", problem=Problem(
                f"more entries were not read: one student may hand in at "
                f"most {MAX_PER_STUDENT} notebooks, in folders of at most "
                f"{MAX_ENTRIES} entries in all", "too-many-entries")))
    return found


def _class_budget() -> _Budget:
    """The budget of the submissions folder itself: entries only."""
    budget = _Budget()
    budget.entries = 100 * MAX_ENTRIES
    return budget
