"""Attention over every pixel of a 224 × 224 image: our blocks vs PyTorch.

Prints a table for n = 50,176 tokens of width d = 16 in float32 (chapter 6):
the wall-clock time and the peak memory of

* ``selfattention.blockwise.blockwise_attention`` (NumPy, online softmax,
  query blocks spread over both cores), and
* ``torch.nn.functional.scaled_dot_product_attention`` (PyTorch's fused
  CPU kernel),

their time ratio, and whether the two outputs agree. ``make bench`` runs it
after the chapter timings; run it alone with ``python
scripts/bench_attention.py`` (``--n 12544`` for a quicker look).

How memory is measured, and why. ``tracemalloc`` sees NumPy's buffers but
not PyTorch's, so it cannot compare the two. Instead each method runs in a
fresh Python process of its own: the process imports its library, builds
the inputs and runs a small warm-up call, then reads its current resident
set size (RSS, from /proc/self/statm) as the baseline, runs the full
attention once, and reads its peak RSS (``resource.getrusage``,
``ru_maxrss``). The table shows peak minus baseline: the memory the call
itself touched. If imports had briefly peaked above the baseline, the
difference would overstate the call's memory, never understate it. The
inputs (3 × 3.2 MB) and the output are allocated before the baseline.

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

GOAL_RATIO = 2.0
GOAL_MB = 512.0


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _inputs(n: int, d: int):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((n, d)).astype(np.float32) for _ in range(3)]


def child(method: str, n: int, d: int, workers: int, block_q: int,
          block_k: int, out: str) -> None:
    """Run one method in this (fresh) process and print a JSON line."""
    Q, K, V = _inputs(n, d)
    if method == "numpy":
        from selfattention.blockwise import blockwise_attention

        def run(q, k, v):
            return blockwise_attention(q, k, v, block_q=block_q,
                                       block_k=block_k, workers=workers)
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
    start = time.perf_counter()
    Y[:] = run(Q, K, V)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB
    np.save(out, Y)
    print(json.dumps({"seconds": seconds, "mb": max(peak - base, 0.0)}))


def measure(method: str, args, out: str) -> dict:
    cmd = [sys.executable, __file__, "--child", method, "--n", str(args.n),
           "--d", str(args.d), "--workers", str(args.workers),
           "--block-q", str(args.block_q), "--block-k", str(args.block_k),
           "--out", out]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=224 * 224)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--block-q", type=int, default=256)
    parser.add_argument("--block-k", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per method; the fastest is reported")
    parser.add_argument("--child", choices=["numpy", "torch"])
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.n, args.d, args.workers, args.block_q,
              args.block_k, args.out)
        return 0

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in ("numpy", "torch"):
            out = str(Path(tmp) / f"{method}.npy")
            runs = [measure(method, args, out) for _ in range(args.repeat)]
            results[method] = {"seconds": min(r["seconds"] for r in runs),
                               "mb": max(r["mb"] for r in runs),
                               "Y": np.load(out)}
    ours, theirs = results["numpy"], results["torch"]
    ratio = ours["seconds"] / theirs["seconds"]
    dense_mb = args.n * args.n * 4 / 2**20
    err = float(np.abs(ours["Y"] - theirs["Y"]).max())

    print(f"Attention over n = {args.n:,} tokens, d = {args.d}, float32 "
          f"(one head; {args.workers} worker thread(s) for ours)")
    print(f"{'method':38s}  {'seconds':>8s}  {'peak MB':>8s}")
    print(f"{'selfattention.blockwise (NumPy)':38s}  {ours['seconds']:8.2f}  "
          f"{ours['mb']:8.0f}")
    print(f"{'torch scaled_dot_product_attention':38s}  "
          f"{theirs['seconds']:8.2f}  {theirs['mb']:8.0f}")
    print(f"{'ratio ours / PyTorch':38s}  {ratio:8.2f}")
    print(f"{'dense n x n float32 matrix (not run)':38s}  {'':8s}  "
          f"{dense_mb:8.0f}")
    print(f"goals: ratio <= {GOAL_RATIO:g}: {ratio <= GOAL_RATIO}; "
          f"ours under {GOAL_MB:g} MB: {ours['mb'] < GOAL_MB}; "
          f"outputs agree (max |diff| < 1e-5): {err < 1e-5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
