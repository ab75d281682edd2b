"""The trained models of the book: the files that ``make train`` writes
(``selfattention_training``), loaded by the chapters.

Each model is ``trained/<name>.npz`` beside this file, with its SHA-256 in
``trained/MANIFEST.json``. :func:`load` refuses a file whose checksum is not
the manifest's, so what a chapter shows always comes from the file that the
recipes wrote. The files are package data: an install from the repository
(Colab, Binder) carries them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path

import numpy as np

__all__ = ["load", "torch_threads", "TRAINED_DIR", "MANIFEST"]

TRAINED_DIR = Path(__file__).resolve().parent / "trained"
MANIFEST = TRAINED_DIR / "MANIFEST.json"


def _manifest() -> dict:
    if not MANIFEST.exists():
        return {}
    return json.loads(MANIFEST.read_text())


def load(name: str) -> dict[str, np.ndarray]:
    """The arrays that ``make train`` saved for ``name``, after checking the
    file against the manifest's SHA-256."""
    entry = _manifest().get(name)
    if entry is None:
        raise KeyError(f"no trained model {name!r}; known: "
                       f"{sorted(_manifest())}. Run `make train`.")
    data = (TRAINED_DIR / entry["file"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ValueError(f"{entry['file']} does not match its checksum in "
                         f"{MANIFEST.name}; run `make train` again")
    with np.load(io.BytesIO(data)) as npz:
        return {key: npz[key] for key in npz.files}


@contextlib.contextmanager
def torch_threads(n: int):
    """PyTorch's intra-op threads set to ``n`` inside the block and put
    back after it: a training run pins its threads, so that running it
    again gives the same numbers."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
