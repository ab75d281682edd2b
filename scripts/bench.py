"""``make bench``: how long the book takes, as a table.

Executes every chapter and appendix notebook top to bottom in a fresh
kernel (a copy, so the committed outputs stay untouched), then times a full
HTML build. Budgets: 20 s per notebook and 130 s for the whole book on a
2-core CPU.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
CHAPTER_BUDGET = 20.0
BOOK_BUDGET = 130.0


def time_chapter(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def time_build() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "jupyter-book"),
                        "build", str(ROOT), "--path-output", tmp, "-q"],
                       check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> int:
    rows, total = [], 0.0
    for path in (sorted((ROOT / "chapters").glob("*.ipynb"))
                 + sorted((ROOT / "appendices").glob("*.ipynb"))):
        seconds = time_chapter(path)
        total += seconds
        rows.append((path.stem, seconds, CHAPTER_BUDGET))
    build = time_build()
    width = max(len(r[0]) for r in rows + [("whole book (sum)", 0, 0)])
    print(f"{'what':{width}s}  {'seconds':>8s}  {'budget':>7s}  status")
    rows += [("whole book (sum)", total, BOOK_BUDGET),
             ("HTML build", build, float("nan"))]        # no budget
    for name, seconds, budget in rows:
        judged = not math.isnan(budget)
        status = ("ok" if seconds <= budget else "OVER") if judged else ""
        shown = f"{budget:7.0f}" if judged else ""
        print(f"{name:{width}s}  {seconds:8.1f}  {shown:>7s}  {status}")
    extra = ROOT / "scripts" / "bench_attention.py"
    if extra.exists():
        print()
        subprocess.run([sys.executable, str(extra)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
