"""Running one grading job in isolation.

A job is a folder the grader prepares (the notebook, the list of
exercises); the sandbox sees it read-only at ``/job`` and runs
:mod:`selfattention_course.runner` there, which reads the hidden cases from
its standard input (they are in no file), executes the notebook and the
harvest and writes one frame (:mod:`selfattention_course.wire`) to its
standard output. The grader reads at most a fixed number of bytes of it
within the wall-clock limit, then kills whatever is left.

Backends (one module each: :mod:`.bubblewrap`, :mod:`.container`, and
:class:`Unisolated` in :mod:`.backend`, which all share):

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

from pathlib import Path

from .backend import (EXPOSED, Backend, Limits, NoSandbox, Outcome,
                      Unisolated)
from .bubblewrap import Bubblewrap
from .cgroups import JobGroup, cgroup_support
from .container import Container
from .seccomp import CLONE_NEWUSER, seccomp_program

__all__ = ["Limits", "Backend", "Bubblewrap", "Container", "Unisolated",
           "NoSandbox", "choose_backend", "Outcome", "JobGroup",
           "cgroup_support", "EXPOSED", "CLONE_NEWUSER", "seccomp_program"]

# ------------------------------------------------------------------ cgroups
# ------------------------------------------------------------------ containers
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
