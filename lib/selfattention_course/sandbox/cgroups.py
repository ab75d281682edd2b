"""A control group per job, cgroup v2 or v1: a memory cap for the whole job,
a cap on its processes and an account of its processor time
(:class:`JobGroup`), where the machine lets the grader make one
(:func:`cgroup_support` says why not)."""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .backend import Limits

_CGROUP_ROOT = "/sys/fs/cgroup"


def _own_groups() -> dict[str, str]:
    """This process's control groups: controller (or "" for v2) -> path."""
    found = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _mounts() -> dict[str, str]:
    """Mount points of the cgroup hierarchies: controller (or "" for v2)
    -> folder."""
    found = {}
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2":
            found.setdefault("", fields[1])
        elif fields[2] == "cgroup":
            for option in fields[3].split(","):
                if option in ("memory", "pids", "cpuacct", "cpu"):
                    found.setdefault(option, fields[1])
    return found


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _v2_parent() -> tuple[Path | None, str]:
    """A cgroup v2 folder below which jobs get memory and process caps.

    cgroup v2 gives a child a controller only where its parent enables it
    (``cgroup.subtree_control``), and a group that holds processes (as the
    grader's own usually does) cannot enable any for its children. So this
    is the nearest of the grader's group and its ancestors that enables
    memory and pids already, or else the hierarchy's root, which may
    enable them whatever it holds.
    """
    mounts, own = _mounts(), _own_groups()
    if "" not in mounts:
        return None, "no cgroup v2 hierarchy is mounted"
    root = Path(mounts[""])
    try:
        available = (root / "cgroup.controllers").read_text().split()
    except OSError:
        return None, f"{root} cannot be read"
    if not {"memory", "pids"} <= set(available):
        return None, (f"cgroup v2 at {root} offers "
                      f"{' '.join(available) or 'no controller'} here, not "
                      f"memory and pids")
    folder = root / own.get("", "/").lstrip("/")
    while True:
        try:
            enabled = (folder / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        if {"memory", "pids"} <= set(enabled) and _writable_dir(folder):
            return folder, ""
        if folder == root or root not in folder.parents:
            break
        folder = folder.parent
    if not _writable_dir(root):
        return None, f"{root} is not writable (run the grader as root)"
    try:
        (root / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError as err:
        return None, (f"{root}/cgroup.subtree_control refused memory and "
                      f"pids ({err.strerror})")
    return root, ""


def _v1_parents() -> tuple[dict[str, Path] | None, str]:
    """cgroup v1 folders (memory, pids, cpuacct) below which jobs go."""
    mounts, own = _mounts(), _own_groups()
    missing = [c for c in ("memory", "pids") if c not in mounts]
    if missing:
        return None, f"no cgroup v1 {' or '.join(missing)} hierarchy"
    found = {}
    for name in ("memory", "pids", "cpuacct"):
        if name not in mounts:
            continue
        base = Path(mounts[name]) / own.get(name, "/").lstrip("/")
        if not _writable_dir(base):
            if name == "cpuacct":
                continue
            return None, (f"{base} is not writable (run the grader as "
                          f"root)")
        found[name] = base
    return found, ""


def cgroup_support() -> tuple[str | None, str]:
    """``("v2" | "v1", where)`` if jobs can get control groups here, else
    ``(None, why not)``."""
    if sys.platform != "linux":
        return None, "control groups are a Linux feature"
    v2, why2 = _v2_parent()
    if v2 is not None:
        return "v2", str(v2)
    v1, why1 = _v1_parents()
    if v1 is not None:
        return "v1", ", ".join(str(p) for p in v1.values())
    return None, f"{why2}; {why1}"


@dataclass
class JobGroup:
    """The control group(s) of one job: memory, processes, processor time.

    ``folders`` holds one folder (v2) or one per controller (v1).
    """

    version: str
    folders: dict[str, Path]

    @classmethod
    def make(cls, token: str, limits: Limits) -> "JobGroup | None":
        """A new group for a job, its limits written; None if the machine
        has no writable cgroup hierarchy (see :func:`cgroup_support`)."""
        if sys.platform != "linux":
            return None
        v2, _ = _v2_parent()
        try:
            if v2 is not None:
                return cls._make_v2(v2, token, limits)
            v1, _ = _v1_parents()
            if v1 is not None:
                return cls._make_v1(v1, token, limits)
        except OSError:
            return None
        return None

    @classmethod
    def _make_v2(cls, base: Path, token: str, limits: Limits):
        # Jobs go in a group of their own below a folder that holds no
        # process (cgroup v2 enables controllers for children only there).
        holder = base / "selfattention-grade"
        holder.mkdir(exist_ok=True)
        try:                        # the processor account too, if offered
            (holder / "cgroup.subtree_control").write_text(
                "+memory +pids +cpu")
        except OSError:
            (holder / "cgroup.subtree_control").write_text("+memory +pids")
        folder = holder / token
        folder.mkdir()
        group = cls("v2", {"": folder})
        try:
            (folder / "memory.max").write_text(str(limits.job_memory_bytes))
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
            (folder / "pids.max").write_text(str(limits.processes))
        except OSError:
            group.remove()
            raise
        return group

    @classmethod
    def _make_v1(cls, bases: dict[str, Path], token: str, limits: Limits):
        folders = {}
        group = cls("v1", folders)
        try:
            for name, base in bases.items():
                folder = base / token
                folder.mkdir()
                folders[name] = folder
            memory = folders["memory"]
            (memory / "memory.limit_in_bytes").write_text(
                str(limits.job_memory_bytes))
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(limits.job_memory_bytes))
            (folders["pids"] / "pids.max").write_text(str(limits.processes))
        except OSError:
            group.remove()
            raise
        return group

    def enter(self, cmd: list[str]) -> list[str]:
        """``cmd`` started from inside the group: a shell writes its own
        process id into each ``cgroup.procs``, then becomes ``cmd``; it
        exits with 97 if the group refuses it."""
        script = ('while [ "$1" != -- ]; do echo $$ > "$1" || exit 97; '
                  'shift; done; shift; exec "$@"')
        procs = [str(f / "cgroup.procs") for f in self.folders.values()]
        return ["/bin/sh", "-c", script, "sh", *procs, "--", *cmd]

    def cpu_seconds(self) -> float | None:
        """Processor time the job's processes used, by the group's own
        account."""
        try:
            if self.version == "v2":
                for line in (self.folders[""] / "cpu.stat").read_text() \
                        .splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return round(int(value) / 1e6, 3)
                return None
            if "cpuacct" in self.folders:
                usage = (self.folders["cpuacct"] / "cpuacct.usage") \
                    .read_text()
                return round(int(usage) / 1e9, 3)
        except (OSError, ValueError):
            return None
        return None

    def pids(self) -> list[int]:
        found = set()
        for folder in self.folders.values():
            try:
                text = (folder / "cgroup.procs").read_text()
            except OSError:
                continue
            found.update(int(p) for p in text.split() if p.isdigit())
        return sorted(found)

    def remove(self) -> None:
        """Kill every process still in the group, then remove it."""
        kill = self.folders.get("", Path("/nonexistent")) / "cgroup.kill"
        if kill.exists():
            try:
                kill.write_text("1")
            except OSError:
                pass
        for _ in range(200):
            alive = self.pids()
            if not alive:
                break
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)
        for folder in self.folders.values():
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
