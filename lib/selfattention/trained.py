"""The trained models of the book (``trained/<name>.npz``, package data),
loaded only when their SHA-256 matches ``trained/MANIFEST.json``.
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
