"""The built book in a real browser, with no network but its own.

Chromium (Debian's ``chromium`` package, driven by Playwright; Playwright's
own browser download is never used) opens every page of the built site,
served from 127.0.0.1 by a thread of this test, while every request to
another host is aborted. A page fails on: a load error, a console error or
uncaught exception, a failed or blocked request, math left as raw TeX, an
image without alt text, headings that skip a level; a chapter page also
fails on missing or wrong launch links or a kernel-free figure (an element
with a ``data-testid`` and an ``aria-live`` region, such as the explorers of
selfattention.interactive) whose live text ignores clicks and choices. A
full-page screenshot of each chapter goes to _build/screenshots/ (next to
the site's html/ folder), which is emptied first.

Without /usr/bin/chromium the tests skip, except in CI (CI=true), where they
fail: `.ci/run` installs it.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from test_launch_links import (
    BOOK_PATH, ROOT, built_site, chapter_documents,
    expected_pages, notebook_in_launch_link,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu",
    "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")
TIMEOUT_MS = 30_000

# Text of the page outside code, scripts and typeset math that still holds
# TeX delimiters: math MathJax did not typeset.
RAW_TEX_JS = r"""() => {
  const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "TEXTAREA",
                        "NOSCRIPT", "MJX-CONTAINER", "MJX-ASSISTIVE-MML"]);
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    let el = node.parentElement, inside = false;
    for (; el; el = el.parentElement) {
      if (skip.has(el.tagName) || el.classList.contains("highlight")) {
        inside = true; break;
      }
    }
    const text = node.textContent;
    if (!inside && /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{/.test(text)) {
      found.push(text.trim().slice(0, 80));
    }
  }
  const untypeset = Array.from(document.querySelectorAll(".math"))
    .filter(m => !m.querySelector("mjx-container")).length;
  return {raw: found, untypeset: untypeset,
          math: document.querySelectorAll(".math").length,
          typeset: document.querySelectorAll("mjx-container").length};
}"""

IMAGES_JS = r"""() => {
  const bad = [];
  for (const img of document.querySelectorAll("img")) {
    if (!(img.getAttribute("alt") || "").trim()) bad.push(img.src.slice(0, 80));
    else if (img.complete && img.naturalWidth === 0) {
      bad.push("broken " + img.src.slice(0, 80));
    }
  }
  for (const el of document.querySelectorAll("[role=img]:not([aria-hidden=true])")) {
    const named = (el.getAttribute("aria-labelledby") || "").split(/\s+/)
      .map(id => id && document.getElementById(id))
      .map(ref => ref ? ref.textContent : "").join("");
    const title = el.querySelector(":scope > title");
    const name = (el.getAttribute("aria-label") || "") + named +
      (title ? title.textContent : "");
    if (!name.trim()) bad.push(el.tagName + " role=img without a name");
  }
  return bad;
}"""

HEADINGS_JS = """() => Array.from(
  document.querySelectorAll(["h1", "h2", "h3", "h4", "h5", "h6"]
    .map(h => "article " + h).join(", ")))
  .map(h => [+h.tagName[1], h.textContent.trim().slice(0, 60)])"""

MATHJAX_READY_JS = """() =>
  (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => document.fonts.ready).then(() => true)
  : document.fonts.ready.then(() => false)"""


# ------------------------------------------------------------ fixtures
class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site() -> Path:
    return built_site()


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        message = (f"{CHROMIUM} not found: install Debian's chromium package "
                   "(apt-get install -y chromium; .ci/run does)")
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM),
                                      args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class Visit:
    """One page in a fresh browser context, with everything that went wrong."""

    def __init__(self, browser, base: str, page_path: str):
        self.problems: list[str] = []
        self.blocked: list[str] = []
        origin = urlsplit(base).netloc
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.set_default_timeout(TIMEOUT_MS)

        def route(r):
            if urlsplit(r.request.url).netloc == origin:
                r.continue_()
            else:
                self.blocked.append(r.request.url)
                r.abort()

        self.context.route("**/*", route)
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
            self.problems.append(f"page did not load: {response and response.status}")
        for attempt in range(3):  # index.html redirects to the first page
            try:
                self.has_mathjax = page.evaluate(MATHJAX_READY_JS)
                break
            except PlaywrightError as err:
                if "context was destroyed" not in str(err) or attempt == 2:
                    raise
                page.wait_for_load_state("networkidle")
        page.wait_for_load_state("networkidle")

    def close(self):
        self.context.close()

    def report(self) -> list[str]:
        return self.problems + [f"blocked request to another host: {u}"
                                for u in self.blocked]


@pytest.fixture(scope="module")
def shots(site) -> Path:
    folder = site.parent / "screenshots"  # _build/screenshots
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jpg"):  # chapters may have been renamed
        old.unlink()
    return folder


@pytest.fixture
def visit(browser, server):
    opened = []

    def open_page(page_path: str) -> Visit:
        opened.append(Visit(browser, server, page_path))
        return opened[-1]

    yield open_page
    for v in opened:
        v.close()


# ------------------------------------------------------------ every page
def page_problems(v: Visit) -> list[str]:
    """What is wrong with any page: errors, requests, math, images, headings."""
    tex = v.page.evaluate(RAW_TEX_JS)
    problems = v.report()
    if tex["raw"]:
        problems.append(f"raw TeX visible: {tex['raw'][:3]}")
    if tex["untypeset"]:
        problems.append(f"{tex['untypeset']} of {tex['math']} math elements "
                        "not typeset")
    if tex["math"] and not v.has_mathjax:
        problems.append("page has math but MathJax did not start")
    bad_images = v.page.evaluate(IMAGES_JS)
    if bad_images:
        problems.append(f"images without alt text or broken: {bad_images}")
    levels = v.page.evaluate(HEADINGS_JS)
    for (before, _), (level, text) in zip(levels, levels[1:]):
        if level > before + 1:
            problems.append(f"heading h{level} {text!r} follows h{before}")
    if levels and levels[0][0] != 1:
        problems.append(f"first heading is h{levels[0][0]}, not h1")
    return problems


CHAPTER_PAGES = {f"{d}.html" for d in chapter_documents()}


@pytest.mark.parametrize(
    "page_path", [p for p in expected_pages() if p not in CHAPTER_PAGES])
def test_page_renders_offline_without_errors(visit, page_path):
    problems = page_problems(visit(page_path))
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)


# ------------------------------------------------------------ chapter pages
def responds_to_input(figure) -> tuple[str, bool]:
    """Use the figure's buttons, menus and canvases until the text of its
    live region changes. Returns that text before, and whether it changed."""
    live = figure.locator("[aria-live]").first
    before = live.inner_text()

    def changed() -> bool:
        return live.inner_text() != before

    buttons = figure.locator("button")
    if buttons.count() > 1:
        for k in (buttons.count() - 1, 0):
            buttons.nth(k).click()
            if changed():
                return before, True
    selects = figure.locator("select")
    for k in range(selects.count()):
        menu = selects.nth(k)
        values = menu.locator("option").evaluate_all(
            "options => options.map(o => o.value)")
        current = menu.input_value()
        for value in reversed(values):
            if value != current:
                menu.select_option(value)
                if changed():
                    return before, True
    canvases = figure.locator("canvas")
    for k in range(canvases.count()):
        canvas = canvases.nth(k)
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        for fx, fy in ((0.93, 0.93), (0.07, 0.93), (0.93, 0.07)):
            canvas.click(position={"x": fx * box["width"],
                                   "y": fy * box["height"]})
            if changed():
                return before, True
    return before, False


@pytest.mark.parametrize("docname", chapter_documents())
def test_chapter_renders_launches_and_responds(shots, visit, docname):
    v = visit(f"{docname}.html")
    page = v.page
    page.screenshot(path=str(shots / f"{Path(docname).name}.jpg"),
                    full_page=True, type="jpeg", quality=80)
    problems = page_problems(v)

    # launch buttons: present, and naming this chapter's notebook
    want = f"{BOOK_PATH + '/' if BOOK_PATH else ''}{docname}.ipynb"
    services = {"Colab": "colab.research.google.com", "Binder": "mybinder.org"}
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(a => a.href)")
    for service, host in services.items():
        links = [h for h in hrefs if urlsplit(h).netloc == host]
        if not links:
            problems.append(f"no {service} launch link")
        for href in links:
            try:
                notebook = notebook_in_launch_link(href)
            except AssertionError as err:
                problems.append(f"{service} link: {err}")
                continue
            if notebook != want or not (ROOT / notebook).is_file():
                problems.append(f"{service} link opens {notebook}, not {want}")
    if not page.locator(".btn-launch-thebe, [onclick*=initThebe]").count():
        problems.append("no Live code (Thebe) button")

    # the math of the chapter is typeset
    if page.locator("mjx-container").count() == 0:
        problems.append("no typeset math (mjx-container) on the page")

    # every kernel-free figure (an element with a data-testid and an
    # aria-live region: patch-, bar-, frames-explorer, cost-calculator ...)
    # answers a click or a choice with new text
    figures = page.locator("[data-testid]:has([aria-live])")
    if figures.count() == 0:
        problems.append("no kernel-free interactive figure "
                        "([data-testid] with an [aria-live] region)")
    for i in range(figures.count()):
        figure = figures.nth(i)
        kind = figure.get_attribute("data-testid")
        before, changed = responds_to_input(figure)
        if not before.strip():
            problems.append(f"{kind} {i}: no text before any input")
        if not changed:
            problems.append(f"{kind} {i}: text unchanged after clicks and "
                            f"choices ({before[:80]!r})")
    assert not problems, f"{docname}:\n  " + "\n  ".join(problems)


def test_live_code_is_the_only_thing_fetched_from_outside(visit):
    """The "Live code" button loads Thebe from unpkg.com (then asks Binder
    for a kernel): the one asset the site does not serve itself, and it is
    requested only on click."""
    v = visit(f"{chapter_documents()[0]}.html")
    assert not v.blocked, f"requests to other hosts before any click: {v.blocked}"
    button = v.page.locator(".btn-launch-thebe")
    assert button.count() == 1, "no Live code button"
    with v.page.expect_event("requestfailed"):
        button.dispatch_event("click")
    hosts = {urlsplit(u).netloc for u in v.blocked}
    assert hosts == {"unpkg.com"}, f"Live code fetched from {sorted(hosts)}"
