"""Execute chapters in place and normalise their metadata (``make execute``).

Each notebook runs top to bottom in a fresh kernel started in its own folder,
exactly as nbval will re-run it. Afterwards the file keeps its cell tags and
kernelspec and loses what changes from run to run (execution timestamps,
widget state (the book shows a static figure instead, see README), per-cell ``execution`` metadata), so a re-run of unchanged code
gives an unchanged file.

Usage: python scripts/execute_notebooks.py chapters/01_definition.ipynb ...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

KERNEL = "python3"
TIMEOUT = 300          # seconds per cell


def normalise(nb: nbformat.NotebookNode) -> None:
    """Drop volatile metadata; keep tags, kernelspec and language info."""
    keep = {"kernelspec", "language_info", "selfattention"}
    for key in list(nb.metadata):
        if key not in keep:
            del nb.metadata[key]
    nb.metadata.get("language_info", {}).pop("version", None)
    nb.metadata.kernelspec = {"display_name": "Python 3", "language": "python",
                              "name": KERNEL}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("collapsed", None)
        cell.metadata.pop("scrolled", None)
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                out.get("metadata", {}).pop("execution", None)


def execute(path: Path) -> float:
    """Run one notebook in place; return its wall-clock time in seconds."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=TIMEOUT, kernel_name=KERNEL,
                   resources={"metadata": {"path": str(path.parent)}},
                   store_widget_state=True).execute()
    elapsed = time.perf_counter() - start
    normalise(nb)
    nbformat.write(nb, path)
    return elapsed


def main(paths: list[str]) -> int:
    for name in paths:
        seconds = execute(Path(name))
        print(f"{name:45s} {seconds:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
