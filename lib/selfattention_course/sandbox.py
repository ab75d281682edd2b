"""Running one grading job in isolation.

A job is a folder the grader prepares (the notebook, the list of
exercises); the sandbox sees it read-only at ``/job`` and runs
:mod:`selfattention_course.runner` there, which reads the hidden cases from
its standard input (they are in no file), executes the notebook and the
harvest and writes one frame (:mod:`selfattention_course.wire`) to its
standard output. The grader reads at most a fixed number of bytes of it
within the wall-clock limit, then kills whatever is left.

Backends:

``bwrap`` (bubblewrap, Linux; the default)
    A new mount namespace holding only ``/usr`` and the libraries' links,
    the Python installation, the environment that holds this package and
    the job, all read-only; a private ``/tmp`` of bounded size; new PID,
    network (loopback only), IPC and UTS namespaces; an empty environment
    but for a few variables; killed with the grader. The runner is the
    first process of its PID namespace (``--as-pid-1``): no process of the
    notebook can signal it, and none can reach the pipes to the grader
    through another process's ``/proc`` entry. A seccomp filter refuses
    the key management calls (keyrings are not separated by namespaces,
    and a job's user id may be a real user's elsewhere) and new user
    namespaces (``unshare`` and ``clone`` with ``CLONE_NEWUSER``;
    ``clone3``, whose flags a filter cannot read, answers "not
    implemented", so the C library falls back to ``clone``): without
    them a job cannot become "root" of a namespace of its own and mount a
    tmpfs that no limit caps. Started through
    ``choom``, the job's processes are the first the out-of-memory killer
    ends (run as root with ``CAP_SYS_RESOURCE``, a notebook cannot undo
    that). Run as root, bubblewrap works privileged and the job drops to a
    user id of its own (``setpriv``, no capabilities), so process limits
    count that job only; run as another user, bubblewrap uses a user
    namespace.
``docker`` / ``podman``
    The same job in a container of the image built from this package's
    ``Dockerfile``: no network, read-only root, a bounded ``/tmp``, no
    capabilities, memory and process limits.
``none``
    No isolation at all: only the resource limits and a minimal
    environment. The notebook runs as the instructor, sees the instructor's
    files and the network. It exists for a machine with neither bubblewrap
    nor a container engine, and is used only when asked for by name
    together with ``--exposing`` and the list :data:`EXPOSED` of what it
    exposes.

Every backend but the containers (which have their own) also puts each job
in a control group of its own (:class:`JobGroup`) where the machine lets
the grader make one, cgroup v2 or v1: a memory cap for the whole job
(processes, their threads and what they write to ``/tmp`` together), a cap
on its processes, and an account of its processor time. A job cannot leave
its group: ``/sys`` is not in the sandbox, and it has no capability. Where
neither version is writable (the grader is not root, or the hierarchy is
read-only), :func:`cgroup_support` says why, the grader prints it, and each
process keeps only its own limits (``RLIMIT_AS``, ``RLIMIT_NPROC``).
"""

from __future__ import annotations

import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .names import JOB_MOUNT, SCRATCH, Problem

__all__ = ["Limits", "Backend", "Bubblewrap", "Container", "Unisolated",
           "NoSandbox", "choose_backend", "Outcome", "JobGroup",
           "cgroup_support", "EXPOSED"]

#: What ``--sandbox none`` exposes; ``--exposing`` must name all of it.
EXPOSED = ("instructor-files", "network", "other-submissions")

_MB = 2 ** 20


@dataclass
class Limits:
    """Resource limits of one job."""

    cell_seconds: float = 60.0        # one cell of the notebook
    notebook_seconds: float = 600.0   # the whole job, harvest included
    harvest_seconds: float = 30.0     # one exercise's answer on its cases
    memory_bytes: int = 3 * 1024 * _MB   # address space of each process
    job_memory_bytes: int = 3 * 1024 * _MB   # the whole job (its cgroup)
    processes: int = 128              # processes and threads of the job
    file_bytes: int = 64 * _MB        # largest file the job may write
    tmp_bytes: int = 256 * _MB        # its /tmp
    cell_output_bytes: int = 1 * _MB
    notebook_output_bytes: int = 8 * _MB
    result_bytes: int = 256 * _MB     # what the grader reads back, at most

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Outcome:
    """What came back from a job.

    ``problem`` says why there is no usable output; its code is
    ``past-deadline`` (the job ran past the notebook's time limit and was
    killed) or ``results-too-large`` (it wrote more than the results may
    hold).
    """

    stdout: bytes | None              # None when killed or over the cap
    problem: Problem | None = None    # why there is no usable output
    seconds: float = 0.0
    returncode: int | None = None
    stderr: bytes = b""
    # The job's processor time (its control group's account, else what
    # the kernel reported for the waited-for process tree), and when it
    # started and ended (time.monotonic()).
    cpu_seconds: float | None = None
    started: float = 0.0
    ended: float = 0.0


class NoSandbox(RuntimeError):
    """Neither bubblewrap nor a container engine can run a job here."""


@dataclass
class Backend:
    """How a job is started; subclasses build the command."""

    name: str = "none"
    python: str = field(default_factory=lambda: sys.executable)
    python_path: list[str] = field(default_factory=list)

    def command(self, job: Path, slot: int, limits: Limits,
                filter_fd: int | None = None) -> list[str]:
        raise NotImplementedError

    def syscall_filter(self) -> int | None:
        """A file descriptor holding a seccomp program for the job."""
        return None

    def kill(self, process: subprocess.Popen, token: str) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def token(self, slot: int) -> str:
        return f"selfattention-grade-{os.getpid()}-{slot}-" \
               f"{secrets.token_hex(4)}"

    def run(self, job: Path, slot: int, limits: Limits,
            given: bytes = b"") -> Outcome:
        """Run the job; return at most ``limits.result_bytes`` of output.

        ``given`` goes to the runner's standard input (the hidden cases).
        """
        token = self.token(slot)
        group = None
        if not isinstance(self, Container):
            group = JobGroup.make(token, limits)
        filter_fd = self.syscall_filter()
        cmd = self.command(job, slot, limits, filter_fd)
        if isinstance(self, Container):
            cmd = cmd[:2] + ["--name", token] + cmd[2:]
        if group is not None:
            cmd = group.enter(cmd)
        start = time.monotonic()
        deadline = start + limits.notebook_seconds + 20   # start-up, harvest
        try:
            process = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True,
                env=self.environment(job), close_fds=True,
                pass_fds=() if filter_fd is None else (filter_fd,))
        except BaseException:
            if group is not None:
                group.remove()
            raise
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
        feeder = threading.Thread(target=_feed, args=(process.stdin, given),
                                  daemon=True)
        feeder.start()
        out, err = bytearray(), bytearray()
        problem = None
        with selectors.DefaultSelector() as sel:
            sel.register(process.stdout, selectors.EVENT_READ, out)
            sel.register(process.stderr, selectors.EVENT_READ, err)
            open_streams = 2
            while open_streams:
                left = deadline - time.monotonic()
                if left <= 0:
                    problem = Problem(f"the notebook ran past the limit "
                                      f"of {limits.notebook_seconds:g} s and "
                                      f"was stopped", "past-deadline")
                    break
                for key, _ in sel.select(timeout=min(left, 1.0)):
                    chunk = os.read(key.fileobj.fileno(), 1 << 16)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        open_streams -= 1
                        continue
                    buffer = key.data
                    if buffer is err:
                        if len(err) < 64 * 1024:
                            err.extend(chunk[:64 * 1024 - len(err)])
                        continue
                    buffer.extend(chunk)
                    if len(buffer) > limits.result_bytes:
                        problem = Problem(
                            f"the run wrote more than "
                            f"{limits.result_bytes / _MB:g} MB of results "
                            f"and was stopped", "results-too-large")
                        break
                if problem:
                    break
        if problem:
            self.kill(process, token)
        used = _wait(process, 10.0)
        if used is None:
            self.kill(process, token)
            used = _wait(process, None)
        self.kill(process, token)        # nothing of the job outlives it
        if group is not None:
            counted = group.cpu_seconds()
            used = counted if counted is not None else used
            group.remove()               # kills whatever is still in it
        feeder.join(timeout=10)
        process.stdout.close()
        process.stderr.close()
        end = time.monotonic()
        times = {"cpu_seconds": used, "started": start, "ended": end}
        if problem:
            return Outcome(None, problem, end - start, process.returncode,
                           bytes(err), **times)
        return Outcome(bytes(out), None, end - start, process.returncode,
                       bytes(err), **times)

    def environment(self, job: Path) -> dict:
        return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    def describe(self) -> str:
        return self.name

    def runner(self, job_dir: str) -> list[str]:
        return [self.python, "-I", "-m", "selfattention_course.runner",
                job_dir]


def _wait(process: subprocess.Popen, seconds: float | None):
    """Wait for ``process`` (at most ``seconds``; None: as long as it
    takes); its tree's processor seconds, or None if it is still running.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    while True:
        try:
            pid, status, usage = os.wait4(process.pid,
                                          0 if deadline is None else
                                          os.WNOHANG)
        except ChildProcessError:          # already waited for
            return 0.0
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return round(usage.ru_utime + usage.ru_stime, 3)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def _feed(stream, data: bytes) -> None:
    """Write ``data`` to a child's standard input, then close it."""
    try:
        stream.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except (BrokenPipeError, OSError):
            pass


# ------------------------------------------------------------------ seccomp
# The key management calls (add_key, request_key, keyctl) by machine, native
# and 32-bit compatible: keyrings are the one kernel object that namespaces
# do not separate, and a user id drawn for a job may be a real user's.
_KEY_CALLS = {
    "x86_64": ((0xC000003E, (248, 249, 250)), (0x40000003, (286, 287, 288))),
    "aarch64": ((0xC00000B7, (217, 218, 219)), (0x40000028, (309, 310, 311))),
}
# The calls that make a user namespace, by the same machines and in the
# same order: (clone, unshare) whose flags say CLONE_NEWUSER are refused;
# clone3 passes its flags in memory that a filter cannot read, so it
# answers ENOSYS (the C library then uses clone); setns is refused.
_USERNS_CALLS = {
    "x86_64": ({"clone": 56, "unshare": 272, "clone3": 435, "setns": 308},
               {"clone": 120, "unshare": 310, "clone3": 435, "setns": 346}),
    "aarch64": ({"clone": 220, "unshare": 97, "clone3": 435, "setns": 268},
                {"clone": 120, "unshare": 337, "clone3": 435, "setns": 375}),
}
CLONE_NEWUSER = 0x10000000
_X32 = 0x40000000                    # x86_64's x32 calls: refused as a whole
_ENOSYS = 38


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A classic BPF seccomp program that refuses the key management calls
    and new user namespaces with EPERM (``clone3`` with ENOSYS) and allows
    everything else; None for an unknown machine."""
    import struct

    machine = machine or os.uname().machine
    if machine not in _KEY_CALLS:
        return None
    allow, deny = 0x7FFF0000, 0x00050000 | 1       # RET_ALLOW, ERRNO(EPERM)
    nosys = 0x00050000 | _ENOSYS
    code: list[tuple] = []                          # (op, k, jt, jf) labels

    def load(offset):
        code.append((0x20, offset, None, None))     # ld [offset]

    def jump(op, k, true, false):
        code.append((op, k, true, false))

    for (arch, calls), userns in zip(_KEY_CALLS[machine],
                                     _USERNS_CALLS[machine]):
        mine = f"next{arch}"
        flags = f"flags{arch}"
        load(4)                                      # seccomp_data.arch
        jump(0x15, arch, None, mine)                 # jeq
        load(0)                                      # seccomp_data.nr
        if machine == "x86_64" and arch == 0xC000003E:
            jump(0x35, _X32, "deny", None)           # jge
        for number in calls:
            jump(0x15, number, "deny", None)
        jump(0x15, userns["setns"], "deny", None)
        jump(0x15, userns["clone3"], "nosys", None)
        jump(0x15, userns["clone"], flags, None)
        jump(0x15, userns["unshare"], flags, None)
        code.append(("ret", allow, None, None))
        code.append(("label", flags, None, None))
        load(16)                    # the low word of the first argument
        jump(0x45, CLONE_NEWUSER, "deny", None)      # jset
        code.append(("ret", allow, None, None))
        code.append(("label", mine, None, None))
    code.append(("ret", allow, None, None))
    code.append(("label", "deny", None, None))
    code.append(("ret", deny, None, None))
    code.append(("label", "nosys", None, None))
    code.append(("ret", nosys, None, None))
    places, index = {}, 0
    for op, k, _, _ in code:
        if op == "label":
            places[k] = index
        else:
            index += 1
    out, index = [], 0
    for op, k, true, false in code:
        if op == "label":
            continue
        if op == "ret":
            out.append(struct.pack("<HBBI", 0x06, 0, 0, k))
        else:
            skip = [0 if t is None else places[t] - index - 1
                    for t in (true, false)]
            out.append(struct.pack("<HBBI", op, skip[0], skip[1], k))
        index += 1
    return b"".join(out)


# ------------------------------------------------------------------ cgroups
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


# ------------------------------------------------------------------ bubblewrap
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


def _sandbox_env(python: str) -> dict:
    return {"HOME": f"{SCRATCH}/home", "USER": "student", "LANG": "C.UTF-8",
            "PATH": f"{os.path.dirname(python)}:/usr/bin:/bin",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}


# ------------------------------------------------------------------ containers
@dataclass
class Container(Backend):
    """Jobs in a docker or podman container (see the module docstring)."""

    name: str = "docker"
    engine: str = "docker"
    image: str = "selfattention-grader"

    def command(self, job: Path, slot: int, limits: Limits,
                filter_fd: int | None = None) -> list[str]:
        memory = str(limits.memory_bytes)
        cmd = [self.engine, "run", "--rm", "--interactive",
               "--network", "none",
               "--read-only", "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges",
               "--user", "65534:65534",
               "--pids-limit", str(limits.processes),
               "--memory", memory, "--memory-swap", memory,
               "--ulimit", f"fsize={limits.file_bytes}:{limits.file_bytes}",
               "--ulimit", "core=0:0",
               "--tmpfs", f"{SCRATCH}:rw,size={limits.tmp_bytes},mode=1777",
               "--mount", f"type=bind,source={job},target={JOB_MOUNT},"
                          f"readonly",
               "--workdir", SCRATCH]
        for key, value in _sandbox_env("/usr/local/bin/python").items():
            cmd += ["--env", f"{key}={value}"]
        return cmd + [self.image, "python", "-I", "-m",
                      "selfattention_course.runner", JOB_MOUNT]

    def kill(self, process: subprocess.Popen, token: str) -> None:
        super().kill(process, token)
        subprocess.run([self.engine, "kill", token], capture_output=True,
                       timeout=30, check=False)

    def works(self) -> bool:
        if not shutil.which(self.engine):
            return False
        try:
            done = subprocess.run([self.engine, "image", "inspect",
                                   self.image], capture_output=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def describe(self) -> str:
        return f"{self.engine} (image {self.image})"


# ------------------------------------------------------------------ none
@dataclass
class Unisolated(Backend):
    """No isolation: limits and a minimal environment only."""

    name: str = "none"

    def command(self, job: Path, slot: int, limits: Limits,
                filter_fd: int | None = None) -> list[str]:
        return self.runner(str(job))

    def environment(self, job: Path) -> dict:
        env = _sandbox_env(self.python)
        scratch = job.parent / f"{job.name}-scratch"
        scratch.mkdir(mode=0o700, exist_ok=True)
        env["HOME"] = str(scratch / "home")
        env["SELFATTENTION_SCRATCH"] = str(scratch)
        return env


def choose_backend(requested: str = "auto", python_path=(),
                   image: str = "selfattention-grader") -> Backend:
    """The backend to use, or :class:`NoSandbox` when none can isolate.

    ``auto`` tries bubblewrap, then docker, then podman. ``none`` must be
    asked for by name.
    """
    python_path = [str(Path(p).resolve()) for p in python_path]
    if requested == "none":
        return Unisolated(python_path=python_path)
    candidates = []
    if requested in ("auto", "bwrap"):
        candidates.append(Bubblewrap(python_path=python_path))
    for engine in ("docker", "podman"):
        if requested in ("auto", engine):
            candidates.append(Container(name=engine, engine=engine,
                                        image=image, python_path=python_path))
    for backend in candidates:
        if backend.works():
            return backend
    raise NoSandbox(
        "no sandbox is available: install bubblewrap (Debian/Ubuntu: "
        "apt-get install bubblewrap), or build the grader image for docker "
        "or podman (see the page for instructors). --sandbox none grades "
        "without isolation: students' code then runs as you, can read your "
        "files (the chapters' solutions included) and reach the network.")
