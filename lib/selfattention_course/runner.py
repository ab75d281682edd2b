"""Inside the sandbox: run a student's notebook, then harvest its answers.

``python -I -m selfattention_course.runner JOB`` reads the job folder
(``job.json``, the notebook) and, from its standard input, the hidden cases
(which are in no file the notebook could read); limits its own resources,
makes itself non-dumpable (the kernel, running as the same user, then
cannot read its memory or its file descriptors through ``/proc``), leaves
the session keyring it inherited (so no key of the instructor's session is
within reach), and

1. runs the notebook cell by cell in a fresh kernel with nbclient, errors
   allowed, with a time limit per cell and for the whole notebook and a
   limit on stored output (the rest is dropped as it arrives);
2. if the kernel still answers, stops every other process the notebook
   started and forbids the kernel new processes and threads; then runs the
   harvest of each exercise in the same kernel, one at a time and each with
   its own time limit (:mod:`selfattention_course.harvest`), handing it
   that exercise's hidden cases only now; the harvest writes plain data
   only;
3. accepts an exercise's result only when its harvest reports success for
   it (below); otherwise the exercise has no result, whatever files exist;
4. writes one frame to standard output: a report of the run, the harvested
   bundles and the executed notebook.

Results only the harvest can write (:mod:`selfattention_course.results`).
Each harvest gets a folder of its own, made just before its call under a
name drawn then (so nothing that ran earlier could prepare it), held open by
this process, and a secret of its own (a nonce drawn here after every cell
has run). The harvest writes its result to a file named after the nonce,
created exclusively (never replacing, never through a link), and its call's
value is the SHA-256 of the nonce and the bytes it wrote. This process reads
the file through the folder it holds open, refuses it unless it is a regular
file and the only entry of the folder besides the cases, and accepts it only
if the call ended "ok" with exactly that digest as its one result. An answer
that writes the result path itself, puts a folder or a link where the result
goes, swaps the folder or floods the call's output therefore leaves its
exercise with no result at all (0 points, "not graded"); it cannot make its
own.

Nothing here decides a score: the grader judges the harvested outputs in its
own process. The kernel's own standard output and error go nowhere.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from selfattention_exercises.core import GRADING_ENV

from .names import (
    HARVEST_DIR,
    JOB_FILE,
    JOB_NOTEBOOK,
    PART_EXECUTED,
    PART_HARVEST,
    PART_REPORT,
    SCRATCH,
    WORK_DIR,
)
from .processes import (
    _cpu_seconds,
    _kernel_pid,
    _share,
    _stop_kernel,
    _stop_strays,
)
from .results import (
    _littered,
    _oversized,
    _reported_result,
    _write_new,
    result_name,
)

SCRATCH_ENV = "SELFATTENTION_SCRATCH"
_TEXT = 200


# keyctl(2) by machine: Python has no wrapper for it.
_KEYCTL = {"x86_64": 250, "amd64": 250, "aarch64": 219, "arm64": 219,
           "riscv64": 219, "i386": 288, "i686": 288, "armv7l": 311,
           "ppc64le": 271, "s390x": 280}


def _harden(limits: dict, count_processes: bool) -> None:
    """Resource limits for this process and the kernel; non-dumpable; a
    keyring of its own; first in line for the out-of-memory killer."""
    pairs = [(resource.RLIMIT_AS, limits["memory_bytes"]),
             (resource.RLIMIT_FSIZE, limits["file_bytes"]),
             (resource.RLIMIT_CORE, 0)]
    if count_processes:
        pairs.append((resource.RLIMIT_NPROC, limits["processes"]))
    for which, value in pairs:
        resource.setrlimit(which, (value, value))
    try:
        with open("/proc/self/oom_score_adj", "w") as out:
            out.write("1000")
    except OSError:
        pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)                         # DUMPABLE 0
        libc.prctl(36, 1, 0, 0, 0)                        # CHILD_SUBREAPER
        number = _KEYCTL.get(platform.machine().lower())
        if number is not None:                  # JOIN_SESSION_KEYRING, new
            libc.syscall(ctypes.c_long(number), ctypes.c_long(1),
                         ctypes.c_void_p(None))
    except (OSError, AttributeError):
        pass


def _read_input(cap: int) -> bytes:
    """All of standard input (the hidden cases), then /dev/null in its
    place, so that nothing started later inherits it."""
    chunks, size = [], 0
    while size <= cap:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return b"".join(chunks) if size <= cap else b""


def _short(text) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _TEXT else text[:_TEXT - 3] + "..."


def _client_class():
    from nbclient import NotebookClient

    class CappedClient(NotebookClient):
        """nbclient that keeps a bounded amount of output."""

        def __init__(self, *args, cell_cap: int, total_cap: int, **kwargs):
            super().__init__(*args, **kwargs)
            self.cell_cap, self.total_cap = cell_cap, total_cap
            self.used_total = 0
            self.used_cell: dict[int, int] = {}
            self.truncated: set[int] = set()
            self.timed_out = False

        def process_message(self, msg, cell, cell_index):
            kind = msg.get("msg_type", "")
            if kind not in ("status", "execute_input", "clear_output"):
                size = _size(msg)
                used = self.used_cell.get(cell_index, 0)
                if (used + size > self.cell_cap
                        or self.used_total + size > self.total_cap):
                    if cell_index not in self.truncated:
                        self.truncated.add(cell_index)
                        cell.outputs.append(_note(
                            "[the grader dropped the rest of this cell's "
                            "output: over its limit]"))
                    return None
                self.used_cell[cell_index] = used + size
                self.used_total += size
            return super().process_message(msg, cell, cell_index)

        async def _async_handle_timeout(self, timeout, cell=None):
            self.timed_out = True
            return await super()._async_handle_timeout(timeout, cell)

    return CappedClient


def _size(msg) -> int:
    """Bytes a kernel message would add: its content, however deeply
    nested, and its binary buffers (a widget's)."""
    try:
        size = len(json.dumps(msg.get("content"), default=repr))
    except (TypeError, ValueError, RecursionError):
        return 1 << 62                      # not storable: over any limit
    for buffer in msg.get("buffers") or ():
        try:
            size += memoryview(buffer).nbytes
        except TypeError:
            size += 1 << 20
    return size


def _note(text: str):
    import nbformat

    return nbformat.v4.new_output("stream", name="stderr", text=text + "\n")


def _errors(cell) -> list[str]:
    found = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            value = str(out.get("evalue", "")).strip().splitlines()
            found.append(_short(f"{out.get('ename', 'Error')}: "
                                f"{value[0] if value else ''}".rstrip(": ")))
    return found


def run(job_dir: Path, cases: bytes = b"") -> bytes:
    """Run the job; the frame to write to standard output.

    ``cases`` is a frame of the hidden cases, one part per exercise, named
    as ``job.json`` names their files.
    """
    import nbformat
    from nbclient.exceptions import DeadKernelError

    from . import wire

    started = time.monotonic()
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    try:
        cases = wire.unpack(cases, len(job["exercises"]), wire.MAX_BUNDLE)
    except wire.WireError:
        cases = {}
    limits = job["limits"]
    scratch = Path(os.environ.get(SCRATCH_ENV, SCRATCH))
    work = scratch / Path(WORK_DIR).relative_to(SCRATCH)
    home = Path(os.environ.get("HOME", scratch / "home"))
    for folder in (work, home):
        folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.reads((job_dir / JOB_NOTEBOOK).read_text(encoding="utf-8"),
                        as_version=4)
    env = dict(os.environ)
    env.update({"MPLCONFIGDIR": str(home / ".matplotlib"),
                "IPYTHONDIR": str(home / ".ipython"),
                "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
                "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
                "JUPYTER_DATA_DIR": str(home / ".local"),
                "PYTHONPATH": os.pathsep.join(job.get("python_path", [])),
                "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                # The kernel never imports from its working folder, so a
                # module the notebook writes there cannot shadow an
                # installed one (IPython's shellapp.init_path honours it).
                "PYTHONSAFEPATH": "1",
                GRADING_ENV: "1"})
    env.update(job.get("kernel_env", {}))
    deadline = started + limits["notebook_seconds"]
    reserve = min(limits["harvest_seconds"] * max(len(job["exercises"]), 1),
                  limits["notebook_seconds"] / 3)

    def cell_timeout(cell):
        if "grader_seconds" in cell.metadata:
            return max(1, int(cell.metadata["grader_seconds"]))
        left = deadline - reserve - time.monotonic()
        return max(1, int(min(limits["cell_seconds"], left)))

    Client = _client_class()
    client = Client(nb, kernel_name="python3", allow_errors=True,
                    interrupt_on_timeout=True, timeout_func=cell_timeout,
                    error_on_timeout={"ename": "Timeout", "evalue": "",
                                      "traceback": []},
                    iopub_timeout=2, record_timing=False,
                    shutdown_kernel="immediate",
                    startup_timeout=60,
                    cell_cap=limits["cell_output_bytes"],
                    total_cap=limits["notebook_output_bytes"])
    report = {"cells_run": 0, "errors": [], "stopped": None, "harvest": {},
              "shares": {}, "truncated": [], "seconds": 0.0}
    parts = []
    try:
        client.km = client.create_kernel_manager()
        client.start_new_kernel(cwd=str(work), env=env,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        client.start_new_kernel_client()
    except Exception as err:                 # the kernel could not start
        report["stopped"] = {"cell": None, "why": "start",
                             "detail": _short(type(err).__name__)}
        client.kc = None
    if client.kc is not None:
        alive = _run_cells(client, nb, report, deadline - reserve,
                           DeadKernelError)
        kernel = _kernel_pid(client)
        if alive:
            report["strays"] = _stop_strays({kernel}, clamp=kernel)
            results = _harvest(client, job, job_dir, scratch, report,
                               deadline, cases)
            for index, data in sorted(results.items()):
                parts.append((PART_HARVEST.format(index=index), data))
        report["cpu"] = _cpu_seconds(kernel)
        _stop_kernel(client)
    _stop_strays(set())
    report["truncated"] = sorted(client.truncated)
    report["seconds"] = round(time.monotonic() - started, 3)
    # "replace": text a notebook made of lone surrogates cannot stop this.
    executed = nbformat.writes(nb).encode("utf-8", "replace")
    if len(executed) > limits["notebook_output_bytes"] + 4 * 2 ** 20:
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        executed = nbformat.writes(nb).encode("utf-8", "replace")
    parts.insert(0, (PART_REPORT, json.dumps(report).encode()))
    parts.append((PART_EXECUTED, executed))
    return wire.pack(parts)


def _run_cells(client, nb, report, deadline, DeadKernelError) -> bool:
    """Execute the cells; False once the kernel is gone or stuck."""
    kernel = _kernel_pid(client)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if time.monotonic() >= deadline:
            report["stopped"] = {"cell": index, "why": "deadline"}
            return True
        cpu, since = _cpu_seconds(kernel), time.monotonic()
        try:
            client.execute_cell(cell, index)
        except DeadKernelError:
            report["stopped"] = {"cell": index, "why": "dead kernel"}
            return False
        except Exception as err:             # nbclient's own failure
            traceback.print_exc()              # to the runner's stderr
            report["stopped"] = {"cell": index, "why": "error",
                                 "detail": _short(type(err).__name__)}
            return False
        report["cells_run"] += 1
        for text in _errors(cell):
            report["errors"].append([index, text])
        if client.timed_out:
            report["stopped"] = {"cell": index, "why": "timeout",
                                 "share": _share(kernel, cpu, since)}
            return _responds(client)
        client.timed_out = False
    return True


def _responds(client, seconds: float = 5.0) -> bool:
    """Whether the kernel answers a trivial request after an interrupt."""
    return _execute(client, "pass", seconds) == "ok"


def _execute(client, code: str, seconds: float,
             history: bool = False) -> str:
    """Run ``code`` in the kernel: "ok", "error", "timeout" or "dead"
    (``history``: kept in IPython's history, as a notebook's cells are)."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["grader_seconds"] = seconds
    client.nb.cells.append(cell)             # nbclient stores it by index
    client.timed_out = False
    try:
        client.execute_cell(cell, len(client.nb.cells) - 1,
                            store_history=history)
    except DeadKernelError:
        return "dead"
    except Exception:
        return "error"
    finally:
        client.nb.cells.pop()
    if client.timed_out:
        return "timeout"
    return "error" if _errors(cell) else "ok"


# The harvest runs from its file, executed afresh in a namespace of its own
# (the notebook may have replaced what ``import`` would find). The call's
# value is the harvest's report: the digest of what it wrote.
HARVEST_CALL = (
    "(lambda n: (exec(compile(open(n['__file__'], encoding='utf-8').read(), "
    "n['__file__'], 'exec'), n), n['harvest']({job!r}, {index}, {out!r}, "
    "{nonce!r}))[1])("
    "{{'__name__': '_selfattention_harvest', '__file__': {path!r}}})")


def _harvest(client, job, job_dir, scratch: Path, report, deadline,
             cases: dict) -> dict[int, bytes]:
    """Run every exercise's harvest; the results it reported, by index."""
    from . import harvest
    from .wire import MAX_BUNDLE

    path = str(Path(harvest.__file__).resolve())
    count = len(job["exercises"])
    results: dict[int, bytes] = {}
    # IPython 9's DisplayHook.quiet tokenizes the last cell kept in the
    # history to see whether it ends in ";": after a notebook whose last
    # cell does (plt.plot(x);) it hides the value of every harvest call
    # (which is not kept), and after one with an unclosed bracket (a
    # syntax error) it raises TokenError. One plain cell kept first.
    _execute(client, "pass", min(5.0, max(deadline - time.monotonic(), 1)),
             history=True)
    for index in range(count):
        left = deadline - time.monotonic()
        if left <= 1:
            report["harvest"][index] = "deadline"
            continue
        seconds = min(job["limits"]["harvest_seconds"], left)
        name = job["exercises"][index]["cases"]
        nonce = secrets.token_hex(16)
        folder = scratch / f"{Path(HARVEST_DIR).name}-{secrets.token_hex(8)}"
        try:
            folder.mkdir(mode=0o700)
            folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY |
                                os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:                    # the notebook filled the scratch
            report["harvest"][index] = "error"
            continue
        try:
            try:
                _write_new(folder_fd, name, cases[name])
            except (KeyError, OSError):
                report["harvest"][index] = "error"
                continue
            call = HARVEST_CALL.format(job=str(job_dir), index=index,
                                       out=str(folder), nonce=nonce,
                                       path=path)
            kernel = _kernel_pid(client)
            cpu, since = _cpu_seconds(kernel), time.monotonic()
            status, values = _execute_values(client, call, seconds)
            if status == "ok":
                data, why = _reported_result(folder_fd, nonce, name, values)
                if data is None:
                    status = why
                else:
                    results[index] = data
            elif status == "error" and _oversized(
                    folder_fd, result_name(nonce), MAX_BUNDLE - 1):
                status = "too-large"    # a write over the limit stopped
            elif status == "error" and _littered(folder_fd, name):
                status = "forged"       # the harvest could not write its own
            report["harvest"][index] = status
            if status == "timeout":
                report["shares"][index] = _share(kernel, cpu, since)
        finally:
            os.close(folder_fd)
            shutil.rmtree(folder, ignore_errors=True)
        if status == "timeout" and not _responds(client):
            status = "stuck"
        if status in ("dead", "stuck"):
            for rest in range(index + 1, count):
                report["harvest"][rest] = status
            return results
    return results


def _execute_values(client, code: str, seconds: float):
    """Run ``code`` like :func:`_execute`; also the text of its results."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["grader_seconds"] = seconds
    client.nb.cells.append(cell)
    client.timed_out = False
    try:
        client.execute_cell(cell, len(client.nb.cells) - 1,
                            store_history=False)
    except DeadKernelError:
        return "dead", []
    except Exception:
        return "error", []
    finally:
        client.nb.cells.pop()
    if client.timed_out:
        return "timeout", []
    if _errors(cell):
        return "error", []
    values = [out.get("data", {}).get("text/plain")
              for out in cell.get("outputs", [])
              if out.get("output_type") == "execute_result"]
    return "ok", values


def _ignore(signum, frame) -> None:
    pass


def main(argv: list[str] | None = None) -> int:
    from .wire import MAX_BUNDLE

    argv = sys.argv[1:] if argv is None else argv
    job_dir = Path(argv[0])
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    # Signals a notebook could send this process do nothing (a handler, not
    # SIG_IGN, which the kernel would inherit and could not be interrupted).
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1",
                 "SIGUSR2", "SIGALRM"):
        signal.signal(getattr(signal, name), _ignore)
    cases = _read_input(len(job["exercises"]) * (MAX_BUNDLE + 4096))
    _harden(job["limits"], count_processes=job.get("count_processes", True))
    frame = run(job_dir, cases)
    out = sys.stdout.buffer
    out.write(frame)
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
