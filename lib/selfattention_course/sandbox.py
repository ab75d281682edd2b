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
    and a job's user id may be a real user's elsewhere). Started through
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
    nor a container engine, and is used only when asked for by name.
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

from .names import JOB_MOUNT, SCRATCH

__all__ = ["Limits", "Backend", "Bubblewrap", "Container", "Unisolated",
           "NoSandbox", "choose_backend", "Outcome"]

_MB = 2 ** 20


@dataclass
class Limits:
    """Resource limits of one job."""

    cell_seconds: float = 60.0        # one cell of the notebook
    notebook_seconds: float = 600.0   # the whole job, harvest included
    harvest_seconds: float = 30.0     # one exercise's answer on its cases
    memory_bytes: int = 3 * 1024 * _MB   # address space of each process
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
    """What came back from a job."""

    stdout: bytes | None              # None when killed or over the cap
    problem: str | None = None        # why there is no usable output
    seconds: float = 0.0
    returncode: int | None = None
    stderr: bytes = b""


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
        filter_fd = self.syscall_filter()
        cmd = self.command(job, slot, limits, filter_fd)
        if isinstance(self, Container):
            cmd = cmd[:2] + ["--name", token] + cmd[2:]
        start = time.monotonic()
        deadline = start + limits.notebook_seconds + 20   # start-up, harvest
        try:
            process = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True,
                env=self.environment(job), close_fds=True,
                pass_fds=() if filter_fd is None else (filter_fd,))
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
                    problem = (f"the notebook ran past the limit of "
                               f"{limits.notebook_seconds:g} s and was "
                               f"stopped")
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
                        problem = (f"the run wrote more than "
                                   f"{limits.result_bytes / _MB:g} MB of "
                                   f"results and was stopped")
                        break
                if problem:
                    break
        if problem:
            self.kill(process, token)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill(process, token)
            process.wait()
        self.kill(process, token)        # nothing of the job outlives it
        feeder.join(timeout=10)
        process.stdout.close()
        process.stderr.close()
        seconds = time.monotonic() - start
        if problem:
            return Outcome(None, problem, seconds, process.returncode,
                           bytes(err))
        return Outcome(bytes(out), None, seconds, process.returncode,
                       bytes(err))

    def environment(self, job: Path) -> dict:
        return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    def describe(self) -> str:
        return self.name

    def runner(self, job_dir: str) -> list[str]:
        return [self.python, "-I", "-m", "selfattention_course.runner",
                job_dir]


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
_X32 = 0x40000000                    # x86_64's x32 calls: refused as a whole


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A classic BPF seccomp program that refuses the key management calls
    with EPERM and allows everything else; None for an unknown machine."""
    import struct

    machine = machine or os.uname().machine
    if machine not in _KEY_CALLS:
        return None
    allow, deny = 0x7FFF0000, 0x00050000 | 1       # RET_ALLOW, ERRNO(EPERM)
    code: list[tuple] = []                          # (op, k, jt, jf) labels

    def load(offset):
        code.append((0x20, offset, None, None))     # ld [offset]

    def jump(op, k, true, false):
        code.append((op, k, true, false))

    for arch, calls in _KEY_CALLS[machine]:
        mine = f"next{arch}"
        load(4)                                      # seccomp_data.arch
        jump(0x15, arch, None, mine)                 # jeq
        load(0)                                      # seccomp_data.nr
        if machine == "x86_64" and arch == 0xC000003E:
            jump(0x35, _X32, "deny", None)           # jge
        for number in calls:
            jump(0x15, number, "deny", None)
        code.append(("ret", allow, None, None))
        code.append(("label", mine, None, None))
    code.append(("ret", allow, None, None))
    code.append(("label", "deny", None, None))
    code.append(("ret", deny, None, None))
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
