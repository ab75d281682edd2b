"""Where the tests find Chromium, what they do when it is missing, and
:class:`Visit`, one page of the built site opened in it."""

import http.server
import os
from pathlib import Path
from urllib.parse import urlsplit

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


# ------------------------------------------------------------ a page
TIMEOUT_MS = 30_000

MATHJAX_READY_JS = """() =>
  (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => document.fonts.ready).then(() => true)
  : document.fonts.ready.then(() => false)"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Visit:
    """One page in a fresh browser context, with everything that went wrong."""

    def __init__(self, browser, base: str, page_path: str):
        from playwright.sync_api import Error as PlaywrightError

        self.problems: list[str] = []
        self.blocked: list[str] = []
        origin = urlsplit(base).netloc
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900})
        self.context.set_default_timeout(TIMEOUT_MS)

        def route(r):
            if urlsplit(r.request.url).netloc == origin:
                r.continue_()
            else:
                self.blocked.append(r.request.url)
                r.abort()

        self.context.route("**/*", route)
        self.requested: list[str] = []      # by the page and its workers
        self.context.on("request", lambda r: self.requested.append(r.url))
        self.page = page = self.context.new_page()
        page.on("console", lambda m: m.type == "error" and self.problems.append(
            f"console error: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(
            f"request failed: {r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url}"))
        response = page.goto(f"{base}/{page_path}", wait_until="networkidle")
        if response is None or not response.ok:
            self.problems.append(
                f"page did not load: {response and response.status}")
        self.url = f"{base}/{page_path}"
        for attempt in range(3):  # index.html redirects to the first page
            try:
                self.has_mathjax = page.evaluate(MATHJAX_READY_JS)
                break
            except PlaywrightError as err:
                if "context was destroyed" not in str(err) or attempt == 2:
                    raise
                page.wait_for_load_state("networkidle")
        page.wait_for_load_state("networkidle")
        self.redirected = page.url != self.url

    def close(self):
        self.context.close()

    def report(self) -> list[str]:
        return self.problems + [f"blocked request to another host: {u}"
                                for u in self.blocked]
