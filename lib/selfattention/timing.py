"""Time and peak memory of a computation, measured the same way everywhere
(chapter 7).

What is measured, and how:

* **Time** is processor time, ``time.process_time``: the seconds the
  processor spent on this process, user and system, summed over all its
  threads. Unlike the wall clock it hardly changes when other programs share
  the machine; a computation spread over two threads shows about twice its
  wall-clock time. :func:`best_time` keeps the fastest of a few runs, the one
  least disturbed by the rest of the system.
* **Peak memory** is what Python's ``tracemalloc`` sees: the largest
  number of bytes allocated at once through Python's allocators while the
  call runs, counted from the start of the call. NumPy allocates its arrays
  there, so every temporary of a NumPy computation is counted, byte for byte
  and the same on every machine. Memory allocated outside them, by BLAS
  workspaces or PyTorch's tensors, is not seen: to compare with PyTorch,
  ``scripts/bench_attention.py`` measures the resident memory of a fresh
  process instead.
* :func:`selfattention.plots.loglog_slope` fits a straight line to such
  measurements on log–log axes: a slope of 2 means that doubling the size
  multiplies the cost by four.

Thread counts are not changed here; limit them around the call (for example
with ``threadpoolctl.threadpool_limits(1)``) to time the work rather than
threads waiting for each other.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from ._validate import boundary, function, generator, positive_int

__all__ = ["random_qkv", "best_time", "run_traced", "peak_bytes"]


@boundary(n=positive_int(), d=positive_int(), rng=generator())
def random_qkv(n, d, rng, dtype=np.float32):
    """Queries, keys and values of ``n`` random tokens of width ``d``.

    Entries are standard normal, drawn from ``rng`` in the order Q, K, V and
    then cast to ``dtype`` (chapter 7 and ``scripts/bench_attention.py``).

    Returns
    -------
    [Q, K, V] : list of three ndarrays, each of shape (n, d)
    """
    return [rng.standard_normal((n, d)).astype(dtype) for _ in range(3)]


@boundary(fn=function(), repeat=positive_int(), runs_user_code=True)
def best_time(fn, *args, repeat=3, **kwargs):
    """Fastest of ``repeat`` runs of ``fn(*args, **kwargs)``, in processor
    seconds (``time.process_time``, all threads of this process).

    The result of ``fn`` is discarded (chapter 7).
    """
    best = np.inf
    for _ in range(repeat):
        start = time.process_time()
        fn(*args, **kwargs)
        best = min(best, time.process_time() - start)
    return float(best)


def _not_tracing(args) -> None:
    if tracemalloc.is_tracing():
        raise RuntimeError("tracemalloc is already tracing; stop it first")


@boundary(fn=function(), checks=(_not_tracing,), runs_user_code=True)
def run_traced(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` once under ``tracemalloc``.

    Returns
    -------
    result
        What ``fn`` returned.
    peak : int
        The most bytes traced at once during the call (chapter 7). Objects
        that exist before the call are not counted; the result is, since it
        is allocated during the call.

    Raises
    ------
    RuntimeError
        If ``tracemalloc`` is already tracing: two measurements would
        disturb each other.
    """
    tracemalloc.start()
    try:
        result = fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, int(peak)


def peak_bytes(fn, *args, **kwargs):
    """Most bytes traced at once while ``fn(*args, **kwargs)`` runs
    (see :func:`run_traced`; chapter 7)."""
    return run_traced(fn, *args, **kwargs)[1]
