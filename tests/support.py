"""Small helpers that several test files share."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_from_file(relative: str, name: str | None = None):
    """Import the script or extension at ``ROOT / relative`` (a file that is
    not part of a package, such as ``scripts/diagrams.py``) as a module."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module           # for dataclasses defined in it
    spec.loader.exec_module(module)
    return module
