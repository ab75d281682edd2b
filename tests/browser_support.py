"""Where the tests find Chromium, and what they do when it is missing."""

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")            # Debian's chromium package
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu",
    "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(what: str):
    """Fail in CI (.ci/run installs what the tests need), skip elsewhere:
    ``what`` is not installed here."""
    message = f"{what} is missing: apt-get install -y chromium, or run .ci/run"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)
