"""The trained models of the book (``trained/<name>.npz``, package data),
loaded only when their SHA-256 matches ``trained/MANIFEST.json``.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np

__all__ = ["load", "load_weight_arrays", "TRAINED_DIR", "MANIFEST"]

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


def load_weight_arrays(model, arrays):
    """Load the ``w/<name>`` arrays a recipe saved into
    ``model`` (float64) and return it in evaluation mode."""
    import torch

    model.double().load_state_dict(
        {k[2:]: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in arrays.items() if k.startswith("w/")})
    return model.eval()
