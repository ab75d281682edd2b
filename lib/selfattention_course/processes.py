"""The processes of a job as the runner sees them: the kernel's process id
and processor time, the processes the notebook started (stopped before the
harvest), and the end of the kernel."""


import os
import resource
import signal
import time


def _share(pid: int | None, cpu: float | None, since: float) -> float | None:
    """The share of a processor that ``pid`` got since ``since``."""
    now, wall = _cpu_seconds(pid), time.monotonic() - since
    if now is None or cpu is None or wall <= 0:
        return None
    return round((now - cpu) / wall, 3)


def _kernel_pid(client) -> int | None:
    try:
        return int(client.km.provisioner.process.pid)
    except Exception:
        return None


def _cpu_seconds(pid: int | None) -> float | None:
    """Processor time a process and its waited-for children have used."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().decode("ascii", "replace") \
                .rpartition(")")[2].split()
        ticks = sum(int(v) for v in fields[11:15])   # utime ... cstime
        return round(ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def _processes() -> dict[int, tuple[int, str]]:
    """Every process visible here: pid -> (parent pid, state)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                text = stat.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = text.rpartition(")")[2].split()   # after "pid (comm)"
        if len(fields) >= 2 and fields[1].isdigit():
            found[int(entry)] = (int(fields[1]), fields[0])
    return found


def _below(root: int, table: dict) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _stop_strays(keep: set, clamp: int | None = None,
                 rounds: int = 100) -> int:
    """Kill every process below this one but ``keep``; how many there were.

    This runner is a child subreaper (or the sandbox's first process), so
    a process that detached itself from the kernel is still below it.
    ``clamp``, the kernel, first loses the right to start processes and
    threads (its limit on processes drops to zero), so nothing it runs
    later can start a helper.
    """
    if clamp is not None:
        try:
            resource.prlimit(clamp, resource.RLIMIT_NPROC, (0, 0))
        except (OSError, ValueError):
            pass
    killed: set[int] = set()
    for _ in range(rounds):
        table = _processes()
        mine = [pid for pid in _below(os.getpid(), table) if pid not in keep]
        alive = [pid for pid in mine if table[pid][1] != "Z"]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        for pid in mine:                          # reap what is ours
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:
                pass
        if not alive:
            break
        time.sleep(0.005)
    return len(killed)


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
