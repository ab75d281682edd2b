"""``make train``: retrain every model of the book (or those named) from its
recipe (``lib/selfattention_training/``), write the weights and curves into
``lib/selfattention_models/trained/`` with their checksums, and print the time.

    python scripts/train.py            # every recipe
    python scripts/train.py NAME ...   # only these

Two recipes run at a time, each in a worker process of its own (most
recipes pin PyTorch to one thread); a recipe that reads another's file
(``after=`` in its ``recipe``) starts once that file is written.
The rows come in the order the recipes finish, each with its seconds on the
clock and on the CPU (a busy machine stretches the first, not the second).
"""

import sys
import time

from selfattention_training import recipes

JOBS = 2


def main(names: list[str]) -> int:
    known = recipes.recipes()
    unknown = sorted(set(names) - set(known))
    if unknown:
        print(f"unknown recipe(s) {unknown}; known: {sorted(known)}",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    print(f"{'recipe':32s} {'seconds':>8s} {'cpu s':>8s} {'bytes':>10s}  "
          f"sha256", flush=True)
    cpu = 0.0

    def done(name, arrays, seconds):
        nonlocal cpu
        cpu += seconds.cpu
        entry = recipes.write(name, arrays)
        print(f"{name:32s} {seconds.wall:8.1f} {seconds.cpu:8.1f} "
              f"{entry['bytes']:10d}  {entry['sha256'][:16]}", flush=True)

    recipes.retrain_all(sorted(names) or list(known), JOBS, done)
    print(f"make train: {time.perf_counter() - start:.0f} s in all, "
          f"{cpu:.0f} s of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
