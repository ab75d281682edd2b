"""What every backend shares: the limits of a job, its outcome, and running
the job's command with its input, output and time bounded
(:class:`Backend`); :class:`Unisolated`, the backend that isolates nothing."""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..names import SCRATCH, Problem
from .cgroups import JobGroup

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

    def job_group(self, token: str, limits: Limits) -> JobGroup | None:
        """The job's control group, where the machine lets the grader
        make one (:class:`~selfattention_course.sandbox.cgroups.JobGroup`).
        """
        return JobGroup.make(token, limits)

    def named(self, cmd: list[str], token: str) -> list[str]:
        """The command, naming the job ``token`` where the backend names
        jobs (a container)."""
        return cmd

    def run(self, job: Path, slot: int, limits: Limits,
            given: bytes = b"") -> Outcome:
        """Run the job; return at most ``limits.result_bytes`` of output.

        ``given`` goes to the runner's standard input (the hidden cases).
        """
        token = self.token(slot)
        group = self.job_group(token, limits)
        filter_fd = self.syscall_filter()
        cmd = self.named(self.command(job, slot, limits, filter_fd), token)
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


def _sandbox_env(python: str) -> dict:
    return {"HOME": f"{SCRATCH}/home", "USER": "student", "LANG": "C.UTF-8",
            "PATH": f"{os.path.dirname(python)}:/usr/bin:/bin",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
