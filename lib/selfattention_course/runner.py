"""Inside the sandbox: run a student's notebook, then harvest its answers.

``python -I -m selfattention_course.runner JOB`` reads the job folder
(``job.json``, the notebook, the hidden cases), limits its own resources,
makes itself non-dumpable (the kernel, running as the same user, then
cannot read its memory or its file descriptors through ``/proc``), and

1. runs the notebook cell by cell in a fresh kernel with nbclient, errors
   allowed, with a time limit per cell and for the whole notebook and a
   limit on stored output (the rest is dropped as it arrives);
2. if the kernel still answers, runs the harvest of each exercise in the
   same kernel, one at a time and each with its own time limit
   (:mod:`selfattention_course.harvest`), which writes plain data only;
3. writes one frame to standard output: a report of the run, the harvested
   bundles and the executed notebook.

Nothing here decides a score: the grader judges the harvested outputs in its
own process. The kernel's own standard output and error go nowhere.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import subprocess
import sys
import time
import traceback
from pathlib import Path

from selfattention.exercises.core import GRADING_ENV

from .names import (HARVEST_DIR, JOB_FILE, JOB_NOTEBOOK, PART_EXECUTED,
                    PART_HARVEST, PART_REPORT, SCRATCH, WORK_DIR)

SCRATCH_ENV = "SELFATTENTION_SCRATCH"
_TEXT = 200


def _harden(limits: dict, count_processes: bool) -> None:
    """Resource limits for this process and the kernel; non-dumpable."""
    pairs = [(resource.RLIMIT_AS, limits["memory_bytes"]),
             (resource.RLIMIT_FSIZE, limits["file_bytes"]),
             (resource.RLIMIT_CORE, 0)]
    if count_processes:
        pairs.append((resource.RLIMIT_NPROC, limits["processes"]))
    for which, value in pairs:
        resource.setrlimit(which, (value, value))
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # DUMPABLE 0
    except (OSError, AttributeError):
        pass


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
                size = _size(msg.get("content"))
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


def _size(content, depth: int = 0) -> int:
    if isinstance(content, str):
        return len(content)
    if depth > 6:
        return 0
    if isinstance(content, dict):
        return sum(_size(v, depth + 1) for v in content.values())
    if isinstance(content, list):
        return sum(_size(v, depth + 1) for v in content)
    return 8


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


def run(job_dir: Path) -> bytes:
    """Run the job; the frame to write to standard output."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    from . import wire

    started = time.monotonic()
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    limits = job["limits"]
    scratch = Path(os.environ.get(SCRATCH_ENV, SCRATCH))
    work = scratch / Path(WORK_DIR).relative_to(SCRATCH)
    # Made only once the cells have run, under a name they cannot guess,
    # so that no cell can leave a result there in advance.
    harvest_dir = scratch / f"{Path(HARVEST_DIR).name}-{secrets.token_hex(8)}"
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
              "truncated": [], "seconds": 0.0}
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
        try:
            harvest_dir.mkdir(mode=0o700)
        except OSError:                    # the notebook filled the scratch
            alive = False
        if alive:
            _harvest(client, job, job_dir, harvest_dir, report, deadline)
        _stop_kernel(client)
    report["truncated"] = sorted(client.truncated)
    report["seconds"] = round(time.monotonic() - started, 3)
    for index in range(len(job["exercises"])):
        data = _read_result(harvest_dir / f"{index}.bin",
                            wire.MAX_BUNDLE)
        if data is not None:
            parts.append((PART_HARVEST.format(index=index), data))
    executed = nbformat.writes(nb).encode()
    if len(executed) > limits["notebook_output_bytes"] + 4 * 2 ** 20:
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        executed = nbformat.writes(nb).encode()
    parts.insert(0, (PART_REPORT, json.dumps(report).encode()))
    parts.append((PART_EXECUTED, executed))
    return wire.pack(parts)


def _run_cells(client, nb, report, deadline, DeadKernelError) -> bool:
    """Execute the cells; False once the kernel is gone or stuck."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if time.monotonic() >= deadline:
            report["stopped"] = {"cell": index, "why": "deadline"}
            return True
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
            report["stopped"] = {"cell": index, "why": "timeout"}
            return _responds(client)
        client.timed_out = False
    return True


def _responds(client, seconds: float = 5.0) -> bool:
    """Whether the kernel answers a trivial request after an interrupt."""
    return _execute(client, "pass", seconds) == "ok"


def _execute(client, code: str, seconds: float) -> str:
    """Run ``code`` in the kernel: "ok", "error", "timeout" or "dead"."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["grader_seconds"] = seconds
    client.nb.cells.append(cell)             # nbclient stores it by index
    client.timed_out = False
    try:
        client.execute_cell(cell, len(client.nb.cells) - 1,
                            store_history=False)
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
# (the notebook may have replaced what ``import`` would find).
HARVEST_CALL = (
    "(lambda n: (exec(compile(open(n['__file__'], encoding='utf-8').read(), "
    "n['__file__'], 'exec'), n), n['harvest']({job!r}, {index}, {out!r})))("
    "{{'__name__': '_selfattention_harvest', '__file__': {path!r}}})")


def _harvest(client, job, job_dir, harvest_dir, report, deadline) -> None:
    from . import harvest

    path = str(Path(harvest.__file__).resolve())
    count = len(job["exercises"])
    for index in range(count):
        left = deadline - time.monotonic()
        if left <= 1:
            report["harvest"][index] = "deadline"
            continue
        seconds = min(job["limits"]["harvest_seconds"], left)
        call = HARVEST_CALL.format(job=str(job_dir), index=index,
                                   out=str(harvest_dir), path=path)
        status = _execute(client, call, seconds)
        report["harvest"][index] = status
        if status == "timeout" and not _responds(client):
            status = "stuck"
        if status in ("dead", "stuck"):
            for rest in range(index + 1, count):
                report["harvest"][rest] = status
            return


def _stop_kernel(client) -> None:
    """Kill the kernel's process group at once (nothing is kept)."""
    try:
        process = client.km.provisioner.process
        os.killpg(process.pid, 9)
    except Exception:
        pass
    try:
        client.kc.stop_channels()
    except Exception:
        pass


def _read_result(path: Path, cap: int) -> bytes | None:
    """A harvest file, if it is a regular file within the cap."""
    import stat

    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
            return None
        data = os.read(fd, cap + 1)
        return data if len(data) <= cap else None
    except OSError:
        return None
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_dir = Path(argv[0])
    job = json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8"))
    _harden(job["limits"], count_processes=job.get("count_processes", True))
    frame = run(job_dir)
    out = sys.stdout.buffer
    out.write(frame)
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
