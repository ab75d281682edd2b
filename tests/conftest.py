"""Shared pytest configuration: deterministic hypothesis runs."""

import os

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


# ------------------------------------------------------------ the browser
import pytest  # noqa: E402
from browser_support import CHROMIUM, CHROMIUM_ARGS, missing  # noqa: E402


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, driven by playwright: one per test process, for
    every test that reads a page (browser, layout, stills, clients)."""
    if not CHROMIUM.exists():
        missing("chromium")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM),
                                      args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()
