"""Time and peak memory (:ref:`ch-cost`): processor time of all threads, and the
bytes ``tracemalloc`` sees (NumPy's buffers, not BLAS's or PyTorch's)."""

import time
import tracemalloc

import numpy as np

from ._validate import boundary, function, generator, positive_int

__all__ = ["random_qkv", "best_time", "run_traced", "peak_bytes"]


@boundary(n=positive_int(), d=positive_int(), rng=generator())
def random_qkv(n, d, rng, dtype=np.float32):
    """``[Q, K, V]``, each (n, d), drawn in that order from ``rng``."""
    return [rng.standard_normal((n, d)).astype(dtype) for _ in range(3)]


@boundary(fn=function(), repeat=positive_int(), runs_user_code=True)
def best_time(fn, *args, repeat=3, **kwargs):
    """Fastest of ``repeat`` runs of ``fn(*args, **kwargs)``, in processor
    seconds; the result of ``fn`` is discarded."""
    best = np.inf
    for _ in range(repeat):
        start = time.process_time()
        fn(*args, **kwargs)
        best = min(best, time.process_time() - start)
    return float(best)


def _tracemalloc_idle() -> None:
    """Not tracing already: a state of the process, not of an argument, so
    a ``RuntimeError``."""
    if tracemalloc.is_tracing():
        raise RuntimeError("tracemalloc is already tracing; stop it first")


@boundary(fn=function(), checks=(_tracemalloc_idle,), runs_user_code=True)
def run_traced(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` once under ``tracemalloc``: its result
    and the most bytes traced at once during the call."""
    tracemalloc.start()
    try:
        result = fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, int(peak)


def peak_bytes(fn, *args, **kwargs):
    """Most bytes traced at once while ``fn(*args, **kwargs)`` runs."""
    return run_traced(fn, *args, **kwargs)[1]
