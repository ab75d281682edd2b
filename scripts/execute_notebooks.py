"""Execute notebooks in place and normalise their metadata (``make execute``).

Each notebook runs top to bottom in a fresh kernel started in its own folder
(``nbclient``), exactly as nbval will re-run it, without recording execution
times and without writing widget state (the book shows a static figure
of each live widget, see CONTRIBUTING.md). nbconvert's
``ClearMetadataPreprocessor`` then keeps only the metadata the book
reads: cell tags, MyST-NB figure captions and alt text, the cells that
show library code (``scripts/sync_code.py``), the kernelspec and the
language. So a re-run of unchanged code on the same day gives an
unchanged file.

Every figure the kernel draws as PNG records the size of its smallest text
in the PNG itself (``scripts/figure_text.py``, run in the kernel before the
first cell), for the browser test and for the book's figure script.

It also stamps the notebook with the date and the versions the kernel ran
with, ``metadata.selfattention = {executed, python, numpy, torch}``; the book
prints them under each chapter's title
(:mod:`selfattention_book.book_assets`). nbval ignores notebook metadata, so
the stamp never makes a test fail.

Usage: python scripts/execute_notebooks.py chapters/01_definition.ipynb ...
       python scripts/execute_notebooks.py appendices/pytorch.ipynb
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import (ClearMetadataPreprocessor,
                                     CoalesceStreamsPreprocessor)

KERNEL = "python3"
TIMEOUT = 300          # seconds per cell
# Figures at twice their pixels, shown at their size (the output's width
# metadata): sharp on a 2x screen. nbval compares no image.
# Each PNG figure records the size of its smallest text (scripts/figure_text.py,
# run in the kernel before the first cell; tests/e2e/test_layout.py reads it).
FIGURE_TEXT = Path(__file__).resolve().with_name("figure_text.py")
KERNEL_ARGUMENTS = ["--InlineBackend.figure_formats=retina",
                    f"--IPKernelApp.exec_files={[str(FIGURE_TEXT)]}"]
STAMP_MARK = "selfattention-versions:"

# Run in the notebook's own kernel after its last cell, then removed again:
# the versions of what the chapter really ran with. Installed versions come
# from the package metadata, so the query itself imports nothing heavy.
VERSIONS_CELL = f"""\
import json as _json, platform as _platform
from importlib import metadata as _metadata

def _version(name):
    try:
        return _metadata.version(name)
    except _metadata.PackageNotFoundError:
        return "not installed"

print({STAMP_MARK!r} + _json.dumps({{
    "python": _platform.python_version(),
    "numpy": _version("numpy"),
    "torch": _version("torch").split("+")[0],
}}))
"""


CLEAN = ClearMetadataPreprocessor(
    preserve_cell_metadata_mask={"tags", "mystnb", "selfattention",
                                 "maintainer"},
    preserve_nb_metadata_mask={"kernelspec", "language_info", "selfattention"})


class Client(NotebookClient):
    """nbclient's notebook runner, writing no widget state into the notebook.

    Its front end for Output widgets, which keeps a live widget's drawings
    out of the cell's outputs as Jupyter does, records them in the widget
    state it collects (nbclient 0.11 fails without it); the state is
    collected but never written.
    """

    def set_widgets_metadata(self) -> None:
        """Leave ``metadata.widgets`` unset."""


def normalise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Keep only the metadata the book reads, with a fixed kernelspec, and
    one output per stream of a cell however the kernel flushed it."""
    nb, _ = CLEAN.preprocess(nb, {})
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    nb.metadata["language_info"].pop("version", None)   # of the machine
    nb.metadata["kernelspec"] = {"display_name": "Python 3",
                                 "language": "python", "name": KERNEL}
    return nb


def stamp(nb: nbformat.NotebookNode, cell: nbformat.NotebookNode) -> None:
    """Record the executed versions printed by VERSIONS_CELL in ``nb``."""
    text = "".join(out.get("text", "") for out in cell.outputs
                   if out.output_type == "stream")
    line = next(ln for ln in text.splitlines() if ln.startswith(STAMP_MARK))
    versions = json.loads(line[len(STAMP_MARK):])
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    nb.metadata["selfattention"] = {"executed": today, **versions}


def execute(path: Path) -> float:
    """Run one notebook in place; return its wall-clock time in seconds."""
    nb = nbformat.read(path, as_version=4)
    query = nbformat.v4.new_code_cell(VERSIONS_CELL)
    nb.cells.append(query)
    start = time.perf_counter()
    Client(nb, timeout=TIMEOUT, kernel_name=KERNEL,
           resources={"metadata": {"path": str(path.parent)}},
           extra_arguments=KERNEL_ARGUMENTS, record_timing=False).execute()
    elapsed = time.perf_counter() - start
    nb.cells.remove(query)
    stamp(nb, query)
    nbformat.write(normalise(nb), path)
    return elapsed


def main(paths: list[str]) -> int:
    for name in paths:
        seconds = execute(Path(name))
        print(f"{name:45s} {seconds:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
