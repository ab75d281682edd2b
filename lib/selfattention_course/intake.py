"""Reading a folder of submissions that may be hostile.

Only regular files are read, through file descriptors opened relative to
their folder with ``O_NOFOLLOW`` (a symbolic link anywhere below the
submissions folder is refused, file or folder) and ``O_NONBLOCK`` (a FIFO
cannot block the grader), and checked again with ``fstat`` after opening. A
file larger than the limit is refused without being read. A refused file
gives a :class:`Submission` with a ``problem`` and no content; no message
ever quotes a file's content.

Layouts: ``SUBMISSIONS/<student>/<any name>.ipynb`` (subfolders allowed), and
loose notebooks ``SUBMISSIONS/<name>.ipynb``, which count as the
submission of a student called ``<name>``. Hidden entries (``.name``, such
as ``.ipynb_checkpoints``) are skipped.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Submission", "IntakeError", "collect", "display_name",
           "safe_file_name"]

MAX_DEPTH = 4
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
    problem: str | None = None


def display_name(name: str, limit: int = 80) -> str:
    """A file or folder name safe to print: no control characters."""
    text = "".join(ch if ch.isprintable() else "?" for ch in name)
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
        return None, f"{shown} could not be read ({err.strerror})"
    if stat.S_ISLNK(before.st_mode):
        return None, f"{shown} is a symbolic link; hand in the file itself"
    if not stat.S_ISREG(before.st_mode):
        return None, f"{shown} is {_kind(before.st_mode)}, not a regular file"
    if before.st_size > max_bytes:
        return None, (f"{shown} is larger than {max_bytes / 2 ** 20:g} MB; "
                      f"clear its outputs and hand it in again")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as err:
        return None, f"{shown} could not be opened ({err.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, (f"{shown} is {_kind(info.st_mode)}, not a regular "
                          f"file")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            return None, (f"{shown} is larger than {max_bytes / 2 ** 20:g} "
                          f"MB; clear its outputs and hand it in again")
        return b"".join(chunks), None
    except OSError as err:
        return None, f"{shown} could not be read ({err.strerror})"
    finally:
        os.close(fd)


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(name, flags, dir_fd=dir_fd)


def _walk(dir_fd: int, student: str, prefix: str, depth: int,
          max_bytes: int, found: list) -> None:
    with os.scandir(dir_fd) as it:
        entries = sorted(it, key=lambda e: e.name)
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
            found.append(Submission(student, shown, problem=(
                f"{shown} is a symbolic link; hand in the {what} itself")))
        elif stat.S_ISDIR(mode):
            if depth >= MAX_DEPTH:
                continue
            try:
                sub = _open_dir(name, dir_fd)
            except OSError:
                found.append(Submission(student, shown, problem=(
                    f"{shown} could not be opened")))
                continue
            try:
                _walk(sub, student, prefix + name + "/", depth + 1,
                      max_bytes, found)
            finally:
                os.close(sub)
        elif name.endswith(".ipynb"):
            data, problem = _read(dir_fd, name, shown, max_bytes)
            found.append(Submission(student, shown, data, problem))


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
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            student = display_name(name.removesuffix(".ipynb")
                                   if not stat.S_ISDIR(mode) else name)
            if stat.S_ISDIR(mode):
                try:
                    sub = _open_dir(name, root)
                except OSError:
                    found.append(Submission(student, display_name(name),
                                            problem="the folder could not "
                                                    "be opened"))
                    continue
                try:
                    _walk(sub, student, "", 1, max_bytes, found)
                finally:
                    os.close(sub)
            elif stat.S_ISLNK(mode):
                what = "file" if name.endswith(".ipynb") else "folder"
                found.append(Submission(student, display_name(name), problem=(
                    f"{display_name(name)} is a symbolic link; hand in the "
                    f"{what} itself")))
            elif name.endswith(".ipynb"):
                data, problem = _read(root, name, display_name(name),
                                      max_bytes)
                found.append(Submission(student, display_name(name), data,
                                        problem))
    finally:
        os.close(root)
    return found
