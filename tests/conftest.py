"""Shared pytest configuration and helpers: deterministic hypothesis runs,
strict library calls, and the book's files (``from conftest import ROOT``)."""

import os
from pathlib import Path

# Every call the library makes to its own public functions is checked too:
# an internal call must pass arguments in the form the maths receives
# (selfattention._validate). Chapters run by nbval inherit it.
os.environ["SELFATTENTION_STRICT_CALLS"] = "1"

from hypothesis import HealthCheck, settings

# Derandomized so that a failure in CI reproduces locally; no deadline because
# the 2-core machines are shared with the notebook runs.
settings.register_profile(
    "book", derandomize=True, deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))

#: The repository, and its chapters in reading order.
ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
