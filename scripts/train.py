"""``make train``: retrain every model of the book (or those named) from its
recipe in the library, write the weights and curves into
``lib/selfattention/trained/`` with their checksums, and print the time.

    python scripts/train.py            # every recipe
    python scripts/train.py NAME ...   # only these
"""

import sys
import time

from selfattention import trained


def main(names: list[str]) -> int:
    known = trained.recipes()
    unknown = sorted(set(names) - set(known))
    if unknown:
        print(f"unknown recipe(s) {unknown}; known: {sorted(known)}",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    print(f"{'recipe':32s} {'seconds':>8s} {'bytes':>10s}  sha256")
    # Sorted, as the full run is: a recipe that reads another's file
    # (vit-mnist-ablation reads vit-mnist) comes after it.
    for name in sorted(names) or known:
        arrays, seconds = trained.retrain(name)
        entry = trained.write(name, arrays)
        print(f"{name:32s} {seconds:8.1f} {entry['bytes']:10d}  "
              f"{entry['sha256'][:16]}", flush=True)
    print(f"make train: {time.perf_counter() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
