"""Attention over every pixel of a 224 × 224 image: the loop vs PyTorch.

Prints a table for n = 50,176 tokens of width d = 16 in float32 (the
chapter on cost, ch-cost): the wall-clock time and the peak memory of

* ``selfattention.blockwise.blockwise_attention`` (NumPy, the online
  softmax one block of keys at a time: the loop the chapter shows), and
* ``torch.nn.functional.scaled_dot_product_attention`` (PyTorch's fused
  CPU kernel, which the chapter runs beside the loop),

their time ratio, and whether the two outputs agree. ``make bench`` runs it
after the chapter timings; run it alone with ``python
scripts/bench_attention.py`` (``--n 12544`` for a quicker look).

How time and memory are measured, and why. Time is the processor time of
the process during the call (user + system, all threads), which other
programs running at the same time disturb less than the wall clock, from the
fastest of ``--repeat`` runs of each method; the wall clock is printed
beside it.
``tracemalloc`` sees NumPy's buffers but not PyTorch's, so it cannot compare
the two. Instead each method runs in a fresh Python process of its own: the
process imports its library, builds the inputs and runs a small warm-up
call, then reads its current resident set size (RSS, from /proc/self/statm)
as the baseline, runs the full attention once, and reads its peak RSS
(``resource.getrusage``, ``ru_maxrss``). The table shows peak minus
baseline: the memory the call itself touched. If imports had briefly peaked
above the baseline, the difference would overstate the call's memory, never
understate it. The inputs (3 × 3.2 MB) and the output are allocated before
the baseline. MB means 10^6 bytes.

The inputs come from ``selfattention.timing.random_qkv``, as in the chapter;
the chapter's own measurements (``selfattention.timing``: processor time,
``tracemalloc``) see NumPy only, hence the separate processes here.

Thread settings (OpenBLAS, PyTorch's intra-op threads) are left as the
environment sets them; timings vary between machines and with load, so
this is a benchmark to read, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from selfattention.timing import random_qkv

GOAL_MB = 512.0


def _rss_mb() -> float:
    """Current resident set size in MB (10^6 bytes)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _cpu_seconds() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def child(method: str, n: int, d: int, block: int, out: str) -> None:
    """Run one method in this (fresh) process and print a JSON line."""
    Q, K, V = random_qkv(n, d, np.random.default_rng(0))       # float32
    if method == "numpy":
        from selfattention.blockwise import blockwise_attention

        def run(q, k, v):
            return blockwise_attention(q, k, v, block=block)
    else:
        import torch
        from torch.nn.functional import scaled_dot_product_attention

        Q, K, V = (torch.from_numpy(x)[None, None] for x in (Q, K, V))

        def run(q, k, v):
            with torch.no_grad():
                return scaled_dot_product_attention(q, k, v)[0, 0].numpy()
    run(Q[..., :256, :], K[..., :1024, :], V[..., :1024, :])      # warm up
    Y = np.empty((n, d), dtype=np.float32)
    Y[:] = 0.0                                    # touch the output pages
    base = _rss_mb()
    cpu, start = _cpu_seconds(), time.perf_counter()
    Y[:] = run(Q, K, V)
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
    np.save(out, Y)
    print(json.dumps({"seconds": seconds, "cpu": cpu,
                      "mb": max(peak - base, 0.0)}))


def measure(method: str, args, out: str) -> dict:
    cmd = [sys.executable, __file__, "--child", method, "--n", str(args.n),
           "--d", str(args.d), "--block", str(args.block), "--out", out]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=224 * 224)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--block", type=int, default=256,
                        help="keys per block of the NumPy loop")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per method; the fastest is reported")
    parser.add_argument("--child", choices=["numpy", "torch"])
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.n, args.d, args.block, args.out)
        return 0

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in ("numpy", "torch"):
            out = str(Path(tmp) / f"{method}.npy")
            runs = [measure(method, args, out) for _ in range(args.repeat)]
            fastest = min(runs, key=lambda r: r["cpu"])
            results[method] = {"seconds": fastest["seconds"],
                               "cpu": fastest["cpu"],
                               "mb": max(r["mb"] for r in runs),
                               "Y": np.load(out)}
    ours, theirs = results["numpy"], results["torch"]
    ratio = ours["cpu"] / theirs["cpu"]
    dense_mb = args.n * args.n * 4 / 1e6
    err = float(np.abs(ours["Y"] - theirs["Y"]).max())

    print(f"Attention over n = {args.n:,} tokens, d = {args.d}, float32 "
          f"(one head; blocks of {args.block} keys for the loop)")
    print(f"{'method':40s}  {'wall s':>7s}  {'CPU s':>7s}  {'peak MB':>8s}")
    for name, r in (("selfattention.blockwise (NumPy loop)", ours),
                    ("torch scaled_dot_product_attention", theirs)):
        print(f"{name:40s}  {r['seconds']:7.2f}  {r['cpu']:7.2f}  "
              f"{r['mb']:8.1f}")
    print(f"{'ratio ours / PyTorch':40s}  "
          f"{ours['seconds'] / theirs['seconds']:7.2f}  {ratio:7.2f}")
    print(f"{'one dense n x n float32 matrix':40s}  {'':7s}  {'':7s}  "
          f"{dense_mb:8.0f}")
    print(f"(load average at the end: "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; other programs "
          f"running at the same time slow the wall clock)")
    print(f"goals: the loop under {GOAL_MB:g} MB: {ours['mb'] < GOAL_MB}; "
          f"outputs agree (max |diff| < 1e-5): {err < 1e-5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
