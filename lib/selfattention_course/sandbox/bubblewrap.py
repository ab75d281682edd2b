"""The bubblewrap backend (the default; see
:mod:`selfattention_course.sandbox`)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..names import JOB_MOUNT, SCRATCH
from .backend import Backend, Limits, _sandbox_env
from .seccomp import seccomp_program


def _package_roots() -> list[str]:
    """Folders that must be visible for this package and the book's."""
    import selfattention

    import selfattention_course

    roots = []
    for module in (selfattention, selfattention_course):
        roots.append(str(Path(module.__file__).resolve().parents[1]))
    return roots


def _grader_only() -> list[str]:
    """Folders of the grader that a notebook must not see: the judges,
    their reference helpers and case generators
    (:mod:`selfattention_course.judges`)."""
    import selfattention_course

    judges = Path(selfattention_course.__file__).resolve().parent / "judges"
    return [str(judges)] if judges.is_dir() else []


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


@dataclass
class Bubblewrap(Backend):
    """Jobs in bubblewrap namespaces (see the module docstring)."""

    name: str = "bwrap"
    bwrap: str = field(default_factory=lambda: shutil.which("bwrap") or
                       "bwrap")
    setpriv: str = field(default_factory=lambda: shutil.which("setpriv") or
                         "setpriv")
    choom: str | None = field(default_factory=lambda: shutil.which("choom"))
    # Run as root, job ``slot`` runs as user ``uid_base + slot``: a range
    # drawn for each grader, so that concurrent runs share no process count.
    uid_base: int = field(default_factory=lambda: 100_000 + 64 *
                          secrets.randbelow(1_000_000))
    privileged: bool = field(default_factory=lambda: os.geteuid() == 0)

    def visible(self) -> list[str]:
        """Folders bound read-only at their own path, outside ``/usr``."""
        paths = [sys.base_prefix, sys.prefix, sys.exec_prefix,
                 os.path.realpath(self.python), *_package_roots(),
                 *self.python_path]
        out: list[str] = []
        for path in paths:
            real = os.path.realpath(path)
            if os.path.isfile(real):
                real = os.path.dirname(real)
            if real.startswith("/usr/") or real == "/usr":
                continue
            if not any(real == p or real.startswith(p + "/") for p in out):
                out = [p for p in out if not p.startswith(real + "/")]
                out.append(real)
        return sorted(out)

    def syscall_filter(self) -> int | None:
        program = seccomp_program()
        if program is None:
            return None
        read, write = os.pipe()
        os.write(write, program)                 # a few hundred bytes
        os.close(write)
        return read

    def command(self, job: Path, slot: int, limits: Limits,
                filter_fd: int | None = None) -> list[str]:
        cmd = [self.bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc",
               "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
               "--as-pid-1", "--new-session", "--clearenv",
               "--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                cmd += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                cmd += ["--ro-bind", top, top]
        if os.path.exists("/etc/ld.so.cache"):
            cmd += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        # The scratch tmpfs first: an environment that lives under /tmp
        # (a checkout or a virtualenv there) is then bound on top of it.
        cmd += ["--perms", "1777", "--size", str(limits.tmp_bytes),
                "--tmpfs", SCRATCH]
        made = {"/tmp", "/usr", "/etc", "/dev", "/proc"}
        for path in self.visible():
            for parent in _ancestors(path):
                if parent not in made:
                    cmd += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
            cmd += ["--ro-bind", path, path]
        for path in _grader_only():      # an empty folder over the judges
            cmd += ["--tmpfs", path, "--remount-ro", path]
        cmd += ["--ro-bind", str(job), JOB_MOUNT,
                "--dev", "/dev", "--proc", "/proc", "--chdir", SCRATCH]
        for key, value in _sandbox_env(self.python).items():
            cmd += ["--setenv", key, value]
        if filter_fd is not None:
            cmd += ["--seccomp", str(filter_fd)]
        if self.privileged:
            uid = str(self.uid_base + slot)
            cmd += ["--", self.setpriv, f"--reuid={uid}", f"--regid={uid}",
                    "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all", "--no-new-privs"]
        else:
            cmd[1:1] = ["--unshare-user", "--uid", "65534", "--gid", "65534",
                        "--disable-userns"]
            cmd += ["--"]
        first = [self.choom, "-n", "1000", "--"] if self.choom else []
        return first + cmd + self.runner(JOB_MOUNT)

    def works(self) -> bool:
        """Whether bubblewrap can start a sandbox here (a quick probe)."""
        if not shutil.which(self.bwrap):
            return False
        probe = [self.bwrap, "--ro-bind", "/", "/", "--unshare-pid",
                 "--unshare-net", "--die-with-parent", "true"]
        if not self.privileged:
            probe[1:1] = ["--unshare-user"]
        try:
            return subprocess.run(probe, capture_output=True,
                                  timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False


