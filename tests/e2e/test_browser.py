"""The built book in a real browser, with no network but its own.

Chromium (Debian's ``chromium`` package, driven by Playwright; Playwright's
own browser download is never used) opens every page of the built site,
served from 127.0.0.1 by a thread of this test, while every request to
another host is aborted. A page fails on: a load error, a console error or
uncaught exception, a failed or blocked request, math left as raw TeX or
without its spoken form and hidden MathML (MathJax's accessibility
components, served by the site), an image without alt text, headings that
skip a level, and any violation that axe-core finds, whatever its impact
(all its rules, the experimental ones included). A chapter page also fails
on missing or wrong launch links, or on a kernel-free figure (an element
with a ``data-testid`` and an ``aria-live`` region, such as the explorers of
selfattention.interactive) whose live text ignores clicks and choices, that
the Tab key cannot reach, whose focus is invisible, or that ignores its
keys (arrows, Home/End, Enter/Space on buttons, arrows in menus). Each kind
of figure is also rendered alone, straight from the library, and driven by
the keyboard: its script must say what Python says for the same selection.
A full-page screenshot of each chapter goes to _build/screenshots/ (next to
the site's html/ folder), which is emptied first.

Every page is also read at 1366 x 900 and at 390 x 844
(test_page_reads_on_laptop_and_phone, slow): no display equation cut,
scrolling or with its number out of view, no printed output that wraps or
has lines over 80 characters (beyond the committed budget of
tests/fixtures/long_outputs.json), no figure text under 9 CSS px, no figure
without a number and caption.

axe-core is the copy the PyPI package ``axe-playwright-python`` ships
(pinned in constraints.txt); it is injected into each page from disk, so
nothing is fetched while testing.

make test opens the sample's pages (tests/support.py: chapter 1's, the home,
introduction and instructors' pages), make sweep every other page.

Without /usr/bin/chromium the tests skip, except in CI (CI=true), where they
fail: `.ci/run` installs it.
"""

from __future__ import annotations

import html
import importlib.resources
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from playwright.sync_api import Error as PlaywrightError

from browser_support import MATHJAX_READY_JS, Visit
from selfattention import interactive
from site_support import (ROOT, chapter_documents, expected_pages,
                          notebook_in_launch_link, plain_notebook_of)
from support import sampled

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
  const pictures = "[role=img]:not([aria-hidden=true])";
  for (const el of document.querySelectorAll(pictures)) {
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

# Every typeset formula carries its spoken form (aria-label: MathJax 4's
# speech rule engine computes it, _static/layout.js makes it the formula's
# name) and a hidden MathML copy (assistive MathML).
MATH_SPEECH_JS = """() => Array.from(document.querySelectorAll("mjx-container"))
  .filter(c => !(c.getAttribute("aria-label") || "").trim()
               || !c.querySelector("mjx-assistive-mml math")).length"""


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def shots(site) -> Path:
    folder = site.parent / "screenshots"  # _build/screenshots
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jpg"):  # chapters may have been renamed
        old.unlink()
    return folder


# ------------------------------------------------------------ axe-core
AXE_JS = (importlib.resources.files("axe_playwright_python")
          / "axe.min.js").read_text(encoding="utf-8")
# Every rule, the experimental ones too (label-content-name-mismatch is
# one); only what a page fails on comes back. ``context`` is a selector
# list of what to leave out, or null for the whole page.
AXE_RUN_JS = """skip => {
  const rules = {};
  for (const r of axe.getRules(["experimental"])) {
    rules[r.ruleId] = {enabled: true};
  }
  const context = skip ? {exclude: skip.map(s => [s])} : document;
  return axe.run(context, {resultTypes: ["violations"], rules}).then(
    result => result.violations.map(v => ({
      id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
      where: v.nodes.slice(0, 3).map(n => n.target.join(" "))})));
}"""
# Every impact fails: minor and moderate ones included (the site has none).
BLOCKING = ("critical", "serious", "moderate", "minor")
# Syntax-highlighted code takes half of axe's time on a chapter page (its
# colour rule looks at every token), yet its markup and colours come from
# one template and one style sheet, the same on every page: it is checked
# in full on the first chapter (and in dark mode there), and left out of
# the other pages' checks.
CODE = "div.highlight"


def axe_violations(page, skip: list[str] | None = None) -> list[dict]:
    """axe-core's violations on the page as it is now, without ``skip``."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE_JS)
    return page.evaluate(AXE_RUN_JS, skip)


def axe_problems(page, skip: list[str] | None = None) -> list[str]:
    return [f"axe {v['impact']} {v['id']} ({v['help']}): {v['count']} "
            f"element(s), e.g. {v['where']}"
            for v in axe_violations(page, skip) if v["impact"] in BLOCKING]


# An equation becomes a tab stop when it overflows its box (layout.js), at
# most 150 ms after the change that made it overflow (MathJax's fonts may
# widen a formula after it was typeset). axe runs once that is done, or
# after 5 s, when it reports the box that is still not a tab stop.
UNSETTLED_EQUATIONS_JS = """() => [...document.querySelectorAll(
  "article div.math")].filter(b => b.scrollWidth > b.clientWidth + 1
                                   && !b.hasAttribute("tabindex")).length"""


def settle_scrolling_equations(page) -> None:
    try:
        page.wait_for_function(f"() => ({UNSETTLED_EQUATIONS_JS})() === 0",
                               timeout=5_000)
    except PlaywrightError:
        pass                 # axe names what is still wrong


# ------------------------------------------------------------ every page
def page_problems(v: Visit, full: bool = False) -> list[str]:
    """What is wrong with any page: errors, requests, math, images,
    headings, and what axe-core finds (in highlighted
    code too if ``full``)."""
    tex = v.page.evaluate(RAW_TEX_JS)
    problems = v.report()
    if tex["raw"]:
        problems.append(f"raw TeX visible: {tex['raw'][:3]}")
    if tex["untypeset"]:
        problems.append(f"{tex['untypeset']} of {tex['math']} math elements "
                        "not typeset")
    if tex["math"] and not v.has_mathjax:
        problems.append("page has math but MathJax did not start")
    if tex["typeset"]:
        try:      # speech comes when the rule engine's JSON has loaded
            v.page.wait_for_function(f"() => ({MATH_SPEECH_JS})() === 0",
                                     timeout=10_000)
        except PlaywrightError:
            unspoken = v.page.evaluate(MATH_SPEECH_JS)
            problems.append(f"{unspoken} of {tex['typeset']} formulas "
                            "without speech or assistive MathML")
    bad_images = v.page.evaluate(IMAGES_JS)
    if bad_images:
        problems.append(f"images without alt text or broken: {bad_images}")
    levels = v.page.evaluate(HEADINGS_JS)
    for (before, _), (level, text) in zip(levels, levels[1:]):
        if level > before + 1:
            problems.append(f"heading h{level} {text!r} follows h{before}")
    if levels and levels[0][0] != 1:
        problems.append(f"first heading is h{levels[0][0]}, not h1")
    if not v.redirected:     # index.html: its target is checked on its own
        settle_scrolling_equations(v.page)
        problems += axe_problems(v.page, None if full else [CODE])
    return problems


CHAPTER_PAGES = {f"{d}.html" for d in chapter_documents()}


@pytest.mark.parametrize(
    "page_path",
    sampled([p for p in expected_pages() if p not in CHAPTER_PAGES]))
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


# A focusable element placed just before a figure: one Tab from it must land
# inside the figure.
TAB_START_JS = """figure => {
  const start = document.createElement("span");
  start.tabIndex = -1;
  figure.before(start);
  start.focus();
}"""
INSIDE_JS = "figure => figure.contains(document.activeElement)"
FOCUSED_JS = """() => {
  const e = document.activeElement, style = getComputedStyle(e);
  return {tag: e.tagName.toLowerCase(), frame: e.getAttribute("data-frame"),
          pressed: e.getAttribute("aria-pressed"),
          outline: style.outlineStyle === "auto" || (
            style.outlineStyle !== "none"
            && parseFloat(style.outlineWidth) >= 2)};
}"""
PATCH = re.compile(r"patch \((\d+), (\d+)\)|pixel: held-out row (\d+) "
                   r"\(image row \d+\), column (\d+)")


def where(text: str) -> tuple[int, int] | None:
    """The query (row, column) a live text names first: a patch, or the
    stereo explorer's left pixel."""
    found = PATCH.search(text)
    if not found:
        return None
    row, col = found[1] or found[3], found[2] or found[4]
    return int(row), int(col)


def drive_with_keyboard(page, figure) -> list[str]:
    """Reach the figure with Tab and use every control it has with keys.

    Canvases that take focus: Home goes to the first position (patch
    (0, 0) on a patch grid), ArrowRight moves the query right along its
    row, ArrowDown down its column, End to the last position; in a second
    frame, Enter moves the query there without moving it within the frame.
    Buttons not pressed: Enter presses them. Menus: ArrowDown or ArrowUp
    picks another entry. Each must change the live text as said, and focus
    must be visible on each control.
    """
    problems = []
    live = figure.locator("[aria-live]").first
    figure.scroll_into_view_if_needed()
    figure.evaluate(TAB_START_JS)
    page.keyboard.press("Tab")
    if not figure.evaluate(INSIDE_JS):
        return ["Tab does not reach it"]
    used, last = 0, None
    for _ in range(60):
        if not figure.evaluate(INSIDE_JS):
            break
        focused = page.evaluate(FOCUSED_JS)
        tag = focused["tag"]
        if not focused["outline"]:
            problems.append(f"no visible focus on its {tag}")
        before = live.inner_text()
        if tag == "canvas":
            if focused["frame"] not in (None, "0") and last is not None:
                page.keyboard.press("Enter")
                if where(live.inner_text()) != last or \
                        live.inner_text() == before:
                    problems.append("Enter in another frame did not move the "
                                    f"query there: {live.inner_text()!r}")
            # Patch grids count from (0, 0) in steps of one; the stereo
            # explorer names pixels of its held-out rows, in steps of its
            # own: so each key is judged against the first position, Home's.
            page.keyboard.press("Home")
            home = where(live.inner_text())
            first = home if home is not None and min(home) >= 0 else None
            step = {"ArrowRight": lambda rc, p: rc[0] == p[0] and rc[1] > p[1],
                    "ArrowDown": lambda rc, p: rc[0] > p[0] and rc[1] == p[1],
                    "End": lambda rc, p, f=first: rc[0] > f[0] and rc[1] > f[1]}
            if first is None or (first != (0, 0) and "pixel" not in
                                 live.inner_text()):
                problems.append(f"Home on the canvas gave "
                                f"{live.inner_text()[:70]!r}")
            prev = first
            for key, expected in step.items():
                page.keyboard.press(key)
                rc = where(live.inner_text())
                if rc is None or prev is None or not expected(rc, prev):
                    problems.append(f"{key} on the canvas gave "
                                    f"{live.inner_text()[:70]!r}")
                prev = rc
            last = where(live.inner_text())
        elif tag == "button" and focused["pressed"] == "false":
            page.keyboard.press("Enter")
            pressed = page.evaluate(
                "() => document.activeElement.getAttribute('aria-pressed')")
            if pressed != "true" or live.inner_text() == before:
                problems.append("Enter on a button did not press it and "
                                "change the text")
        elif tag == "select":
            page.keyboard.press("ArrowDown")
            if live.inner_text() == before:
                page.keyboard.press("ArrowUp")
                page.keyboard.press("ArrowUp")
            if live.inner_text() == before:
                problems.append("arrow keys in a menu left the text as it was")
        else:
            used -= 1
        used += 1
        page.keyboard.press("Tab")
    if not used:
        problems.append("no control answers the keyboard")
    return problems


@pytest.mark.parametrize("docname", sampled(chapter_documents()))
def test_chapter_renders_launches_and_responds(shots, visit, docname):
    """Each page of a chapter: its own page (math typeset) and its further
    pages (selfattention_book.book_pages), the "Try it" one with its
    explorers."""
    v = visit(f"{docname}.html")
    page = v.page
    shot = docname.split("/", 1)[1].replace("/", "-")
    page.screenshot(path=str(shots / f"{shot}.jpg"),
                    full_page=True, type="jpeg", quality=80)
    problems = page_problems(v, full=docname == chapter_documents()[0])

    # launch buttons: present, and naming this chapter's notebook
    # selfattention_book.plain_launch: they open the plain notebook of
    # notebooks/
    want = plain_notebook_of(docname)
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
    # Live code runs a page's own cells: on a chapter's first page only, as
    # a further page's cells need the names of earlier pages
    # (lib/selfattention_book/plain_launch.py)
    live = page.locator(".btn-launch-thebe, [onclick*=initThebe]").count()
    if docname.count("/") == 1 and not live:
        problems.append("no Live code (Thebe) button")
    if docname.count("/") > 1 and live:
        problems.append("Live code on a further page, whose cells need "
                        "the names of the chapter's earlier pages")

    # the math of the chapter is typeset
    first = docname.count("/") == 1
    if first and page.locator("mjx-container").count() == 0:
        problems.append("no typeset math (mjx-container) on the page")

    # every kernel-free figure (an element with a data-testid and an
    # aria-live region: patch-, bar-, frames-explorer, cost-calculator ...)
    # answers the keyboard, and a click or a choice, with new text; the
    # "Try it" section has one
    figures = page.locator("[data-testid]:has([aria-live])")
    if page.locator("section#try-it").count() and figures.count() == 0:
        problems.append("no kernel-free interactive figure "
                        "([data-testid] with an [aria-live] region)")
    for i in range(figures.count()):
        figure = figures.nth(i)
        kind = figure.get_attribute("data-testid")
        problems += [f"{kind} {i}, keyboard: {p}"
                     for p in drive_with_keyboard(page, figure)]
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
    assert not v.blocked, (
        f"requests to other hosts before any click: {v.blocked}")
    button = v.page.locator(".btn-launch-thebe")
    assert button.count() == 1, "no Live code button"
    with v.page.expect_event("requestfailed"):
        button.dispatch_event("click")
    hosts = {urlsplit(u).netloc for u in v.blocked}
    assert hosts == {"unpkg.com"}, f"Live code fetched from {sorted(hosts)}"


def test_formulas_are_spoken_from_the_site(visit):
    """MathJax's speech rule engine, from the site's own copy, gives each
    formula a spoken form that follows its structure (a square root is read
    as one), and a hidden MathML copy; nothing comes from elsewhere."""
    v = visit(f"{chapter_documents()[0]}.html")
    v.page.wait_for_function(f"() => ({MATH_SPEECH_JS})() === 0",
                             timeout=10_000)
    roots = v.page.evaluate("""() => Array.from(
      document.querySelectorAll("mjx-container"))
      .filter(c => c.querySelector("mjx-assistive-mml msqrt"))
      .map(c => c.getAttribute("aria-label"))""")
    assert roots, "no formula with a square root on the first chapter"
    assert all("root" in label.lower() for label in roots), roots[:3]
    # the rule engine runs in a worker, whose requests the page's own
    # performance entries do not list: the browser's requests do
    loaded = [urlsplit(u) for u in v.requested]
    loaded = [u.netloc + u.path for u in loaded
              if re.search("sre|a11y", u.path)]
    origin = urlsplit(v.url).netloc
    assert any(p.endswith("/sre/mathmaps/en.json") for p in loaded), loaded
    assert all(p.startswith(origin + "/_vendor/mathjax/") for p in loaded)
    assert not v.report()


def test_dark_mode_keeps_the_contrast(visit):
    """The theme's dark mode (the reader's system setting) on the first
    chapter: axe-core's colour rules find nothing serious."""
    v = visit(f"{chapter_documents()[0]}.html")
    # The theme's colour transitions would let axe read a colour half-way
    # from light to dark: the check is on the settled colours.
    v.page.add_style_tag(content="*, *::before, *::after { transition: none "
                         "!important; animation: none !important; }")
    v.page.emulate_media(color_scheme="dark")
    v.page.wait_for_function(
        "() => document.documentElement.dataset.theme === 'dark'")
    v.page.evaluate(AXE_JS)
    found = v.page.evaluate("""() => axe.run(document, {
        resultTypes: ["violations"],
        runOnly: {type: "rule", values: ["color-contrast", "link-in-text-block",
                                          "non-text-contrast"].filter(
          id => axe.getRules().some(r => r.ruleId === id))}})
      .then(r => r.violations.map(v => [v.id, v.impact, v.nodes.length,
                                         v.nodes[0].target.join(" ")]))""")
    assert not [f for f in found if f[1] in BLOCKING], found


# ------------------------------------------------------------ figures alone
def live_caption(figure_html: str) -> str:
    """The live text Python wrote into a figure's HTML."""
    found = re.search(r'aria-live="polite">([^<]*)</p>', figure_html)
    return html.unescape(found[1])


def data_of(figure_html: str) -> dict:
    return json.loads(re.search(r"^  var D = (.*);$", figure_html,
                                re.MULTILINE)[1])


@pytest.fixture
def alone(browser):
    """Render one figure's HTML as a page of its own (no server, no
    network) and return the page."""
    contexts = []

    def render(figure_html: str):
        context = browser.new_context(viewport={"width": 1000, "height": 900})
        contexts.append(context)
        page = context.new_page()
        errors = []
        page.on("console", lambda m: m.type == "error" and errors.append(
            m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_content(f'<!doctype html><html lang="en"><head><title>'
                         f"figure</title></head><body><main><h1>figure</h1>"
                         f"{figure_html}</main></body></html>")
        page.errors = errors
        return page

    yield render
    for context in contexts:
        context.close()


def figure_inputs():
    rng = np.random.default_rng(11)
    img = np.zeros((24, 24))
    img[3:12, 3:12], img[14:22, 12:20] = 1.0, 0.6
    x = rng.normal(size=(2, 36, 36)) * 2
    A = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    return img, A


def test_patch_explorer_alone_says_what_python_says(alone):
    img, A = figure_inputs()

    def made(query, weights=A):
        return interactive.patch_explorer(img, weights, (6, 6), 4,
                                          query=query, title="t").data

    page = alone(made(8))
    live = page.locator("[aria-live]")
    assert live.inner_text() == live_caption(made(8))   # script == Python
    canvas = page.locator("canvas[tabindex='0']")
    canvas.focus()
    assert page.evaluate(FOCUSED_JS)["outline"]
    for key, query in (("ArrowRight", 9), ("ArrowDown", 15), ("ArrowLeft", 14),
                       ("ArrowUp", 8), ("Home", 0), ("ArrowLeft", 0),
                       ("End", 35), ("ArrowDown", 35)):
        page.keyboard.press(key)
        assert live.inner_text() == live_caption(made(query)), key
    page.keyboard.press("Tab")          # no trap: focus moves on
    assert page.evaluate("() => document.activeElement.tagName") != "CANVAS"
    page.locator("button[data-head='1']").focus()
    page.keyboard.press("Space")
    assert page.locator("button[data-head='1']").get_attribute(
        "aria-pressed") == "true"
    assert page.locator("button[data-head='0']").get_attribute(
        "aria-pressed") == "false"
    second = live_caption(made(35, A[::-1])).replace("head 1 of", "head 2 of")
    assert live.inner_text() == second
    assert axe_problems(page) == [] and page.errors == []


def test_patch_explorer_names_its_heads_as_python_does(alone):
    img, A = figure_inputs()
    names = ["edges", "neighbour"]

    def made(weights=A, names=names):
        return interactive.patch_explorer(img, weights, (6, 6), 4, query=8,
                                          head_names=names).data

    page = alone(made())
    live = page.locator("[aria-live]")
    assert live.inner_text() == live_caption(made())
    page.locator("button[data-head='1']").click()
    second = live_caption(made(A[::-1], names[::-1])).replace("head 1 of",
                                                              "head 2 of")
    assert "(neighbour)" in second and live.inner_text() == second
    assert page.errors == []


def test_frames_explorer_per_frame_says_what_python_says(alone):
    img, A = figure_inputs()
    frames = np.stack([img, img[::-1]])
    W = np.hstack([A[0], A[1]])
    W = np.vstack([W, W])                   # (72, 72): two maps per row

    def made(query):
        return interactive.frames_explorer(frames, W, (6, 6), 4, query=query,
                                           labels=["a", "b"],
                                           per_frame=True).data

    page = alone(made(7))
    live = page.locator("[aria-live]")
    assert live.inner_text() == live_caption(made(7))
    page.locator("canvas[tabindex='0']").nth(1).focus()
    page.keyboard.press("ArrowRight")
    assert live.inner_text() == live_caption(made(36 + 8))
    assert page.errors == []


def test_frames_explorer_alone_says_what_python_says(alone):
    img, A = figure_inputs()
    frames = np.stack([img, img[::-1], img[:, ::-1]])
    rng = np.random.default_rng(3)
    W = rng.random((108, 108)) ** 8
    W /= W.sum(1, keepdims=True)

    def made(query):
        return interactive.frames_explorer(frames, W, (6, 6), 4, query=query,
                                           labels=["a", "b", "c"]).data

    page = alone(made(7))
    live = page.locator("[aria-live]")
    assert live.inner_text() == live_caption(made(7))
    picks = page.locator("canvas[tabindex='0']")
    assert picks.count() == 3
    picks.nth(2).focus()
    page.keyboard.press("Enter")            # same patch, frame c
    assert live.inner_text() == live_caption(made(72 + 7))
    page.keyboard.press("ArrowRight")
    assert live.inner_text() == live_caption(made(72 + 8))
    picks.nth(0).focus()
    page.keyboard.press("ArrowUp")          # back to frame a, one row up
    assert live.inner_text() == live_caption(made(2))
    assert axe_problems(page) == [] and page.errors == []


def test_bar_explorer_alone_says_what_python_says(alone):
    values = np.random.default_rng(5).dirichlet(np.ones(8), size=(3, 2))

    def made(choice):
        return interactive.bar_explorer(values, ["x", "y", "z"], ["p", "q"],
                                        xlabel="key", choice=choice).data

    page = alone(made(0))
    live = page.locator("[aria-live]")
    assert live.inner_text() == live_caption(made(0))
    page.locator("button[data-choice='2']").focus()
    page.keyboard.press("Enter")
    assert live.inner_text() == live_caption(made(2))
    pressed = page.locator("button[aria-pressed='true']")
    assert pressed.count() == 1 and pressed.inner_text() == "z"
    assert axe_problems(page) == [] and page.errors == []


def test_bar_explorer_labels_its_axes_and_numbers_its_bars(alone):
    values = np.random.default_rng(5).dirichlet(np.ones(8), size=(1, 1))
    ink = {}
    for ylabel in ("", "attention weight"):
        page = alone(interactive.bar_explorer(
            values, ["x"], ["p"], xlabel="key", ylabel=ylabel).data)
        rgba = np.array(page.evaluate(
            "() => { const cv = document.querySelector('canvas'); return "
            "Array.from(cv.getContext('2d').getImageData(0, 0, cv.width, "
            "cv.height).data); }"), dtype=np.uint8).reshape(180, 300, 4)
        dark = rgba[..., :3].max(-1) < 128                 # text, not bars
        ink[ylabel] = (dark[40:140, :20].sum(),            # left of numbers
                       dark[142:160, 50:290].sum())        # under the bars
        assert page.errors == []
    assert ink[""][0] == 0 < ink["attention weight"][0]    # the y label
    assert ink[""][1] > 0 and ink["attention weight"][1] > 0   # 0 … 7


def test_cost_calculator_alone_computes_what_python_computes(alone):
    page = alone(interactive.cost_calculator(224, 16).data)
    live = page.locator("[aria-live]")

    def shown():
        return ([page.locator(f"td[data-row='{k}']").inner_text()
                 for k in range(4)], live.inner_text())

    def python(*setting):
        text = interactive.cost_calculator(*setting).data
        cells = [html.unescape(c) for c in re.findall(
            r'<td data-row="\d">([^<]*)</td>', text)]
        return cells, live_caption(text)

    assert shown() == python(224, 16)
    page.locator("[data-in='patch']").focus()
    page.keyboard.press("ArrowDown")            # 16 -> 28, the next divisor
    assert shown() == python(224, 28)
    page.locator("[data-in='side']").select_option("1024")   # patch -> 32
    assert shown() == python(1024, 32)
    page.locator("[data-in='heads']").focus()
    page.keyboard.press("ArrowDown")
    page.locator("[data-in='bytes']").focus()
    page.keyboard.press("ArrowDown")
    assert shown() == python(1024, 32, 2, "float64")
    page.locator("[data-in='patch']").select_option("1")     # 10¹² entries
    assert shown() == python(1024, 1, 2, "float64")
    assert axe_problems(page) == [] and page.errors == []


# ------------------------------------------------ the figures' scripts alone
STATIC = importlib.resources.files("selfattention") / "static"


@pytest.mark.parametrize("name", sorted(
    p.name for p in STATIC.iterdir() if p.name.endswith(".js")))
def test_each_figure_script_compiles_in_the_browser(alone, name):
    page = alone("")
    source = interactive._static(name)
    compiled = page.evaluate(
        "src => { new Function('D', 'root', 'cap', src); return true; }",
        source)
    assert compiled and not page.errors


def common_helpers(page, data: dict):
    """``common.js`` with the figure variables it reads, as an object of its
    functions."""
    return page.evaluate_handle(
        "([src, D]) => new Function('D', 's', 'side', src + "
        "'; return {colour, step, strongest, at};')(D, 1, 1)",
        [interactive._COMMON_JS, data])


def test_common_colours_follow_the_figure_scale(alone):
    page = alone("")
    lut = interactive._viridis_stops()
    js = common_helpers(page, {"lo": 0.0, "hi": 0.5, "lut": lut,
                               "rows": 2, "cols": 3, "top": 3})

    def colour(v):
        return page.evaluate("([h, v]) => h.colour(v)", [js, v])

    assert colour(0.0) == "rgb({},{},{})".format(*lut[0])
    assert colour(0.5) == "rgb({},{},{})".format(*lut[-1])
    assert colour(9.0) == colour(0.5) and colour(-1.0) == colour(0.0)
    assert colour(0.5 / 15) == "rgb({},{},{})".format(*lut[1])


def test_common_keys_move_within_the_grid(alone):
    page = alone("")
    js = common_helpers(page, {"lo": 0, "hi": 1, "lut": [[0, 0, 0]],
                               "rows": 2, "cols": 3, "top": 3})

    def step(key, r, c, **mods):
        event = {"key": key, "altKey": False, "ctrlKey": False,
                 "metaKey": False, **mods}
        return page.evaluate("([h, e, r, c]) => h.step(e, r, c)",
                             [js, event, r, c])

    assert step("ArrowRight", 0, 0) == [0, 1]
    assert step("ArrowLeft", 0, 0) == [0, 0]             # stays on the grid
    assert step("ArrowDown", 1, 2) == [1, 2]
    assert step("ArrowUp", 1, 2) == [0, 2]
    assert step("Home", 1, 2) == [0, 0] and step("End", 0, 0) == [1, 2]
    assert step("a", 0, 0) is None
    assert step("ArrowRight", 0, 0, ctrlKey=True) is None  # the browser's


def test_common_strongest_and_positions_say_what_python_says(alone):
    page = alone("")
    cols = 3
    js = common_helpers(page, {"lo": 0, "hi": 1, "lut": [[0, 0, 0]],
                               "rows": 2, "cols": cols, "top": 3})
    w = [0.1, 0.3, 0.3, 0.05, 0.2, 0.05]                  # a tie at the top
    got = page.evaluate("([h, w]) => h.strongest(w)", [js, w])
    assert [j for _, j in got] == interactive._strongest(w)
    for j in range(6):
        assert page.evaluate("([h, j]) => h.at(j)", [js, j]) == \
            interactive._at(j, cols)


# ------------------------------------------------- read on a laptop and a phone
#: The two screens every page is read on.
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
#: Smallest text a figure may show, in CSS pixels.
MIN_TEXT_PX = 9
#: Widest printed output line, in characters.
MAX_OUTPUT_CHARS = 80

# What a reader meets on the page as laid out now (async: the figures' own
# files are read back for the size of their smallest text).
#
# * equations: a display equation (div.math) whose formula (its glyphs) is
#   wider than its box (it scrolls or is cut), whose box is wider than the
#   text column, or whose number is not in view beside it;
# * outputs: a printed block (pre of a cell output) that wraps (it is taller
#   than the same text set without wrapping) or has a line over
#   MAX_OUTPUT_CHARS characters;
# * small text: a figure whose smallest text is shown under MIN_TEXT_PX CSS
#   pixels. A PNG says the size of its smallest text in its own pixels (a
#   tEXt chunk written by scripts/figure_text.py at `make execute`); a
#   diagram's SVG says it in points at a width it names (its description,
#   selfattention_book.diagrams.to_svg); each scales with the width it is
#   drawn at.
#   A picture that says neither is "unmeasured";
# * uncaptioned: a figure (an image in the article, outside the kernel-free
#   explorers, which say what they show in their own live text) not inside a
#   <figure> whose caption has a number.
SCREEN_JS = r"""async () => {
  const article = document.querySelector("article") || document.body;
  const visible = el => el.getClientRects().length > 0
    && getComputedStyle(el).visibility !== "hidden";
  const style = getComputedStyle(article);
  const frame = article.getBoundingClientRect();
  const column = frame.right - parseFloat(style.paddingRight);
  const short = text => (text || "").replace(/\s+/g, " ").trim().slice(0, 40);

  const equations = [];
  let equationCount = 0;
  for (const box of article.querySelectorAll("div.math")) {
    const formula = box.querySelector("mjx-math");
    if (!visible(box) || !formula) continue;
    equationCount++;
    const was = box.scrollLeft;
    box.scrollLeft = 0;
    // where the formula's glyphs are: a formula MathJax broke into lines
    // keeps a box as wide as it was before the break
    const b = box.getBoundingClientRect();
    const f = {left: Infinity, right: -Infinity};
    for (const glyph of formula.querySelectorAll("mjx-c")) {
      const g = glyph.getBoundingClientRect();
      if (g.width === 0) continue;
      f.left = Math.min(f.left, g.left);
      f.right = Math.max(f.right, g.right);
    }
    const right = Math.min(b.right, column) + 1;
    const why = [];
    if (f.right > right || f.left < b.left - 1) {
      why.push("formula cut or scrolls");
    }
    if (b.right > column + 1) why.push("box wider than the column");
    const eqno = box.querySelector(".eqno");
    if (eqno) {
      const n = eqno.getBoundingClientRect();
      if (n.width === 0 || n.right > right || n.left < b.left - 1) {
        why.push("number out of view");
      }
    }
    box.scrollLeft = was;
    if (why.length) {
      equations.push((eqno ? short(eqno.textContent) : short(box.textContent))
                     + ": " + why.join(", "));
    }
  }

  const outputs = [];
  const blocks = article.querySelectorAll(".cell_output pre, div.output pre");
  for (const pre of blocks) {
    if (!visible(pre)) continue;
    const lines = pre.textContent.replace(/\n$/, "").split("\n");
    const longest = Math.max(...lines.map(l => [...l].length));
    const height = pre.getBoundingClientRect().height;
    const was = pre.style.whiteSpace;
    pre.style.whiteSpace = "pre";
    const unwrapped = pre.getBoundingClientRect().height;
    pre.style.whiteSpace = was;
    const why = [];
    if (height > unwrapped + 1) why.push("wraps");
    if (longest > %(chars)d) why.push(longest + " characters");
    if (why.length) outputs.push(short(lines[0]) + ": " + why.join(", "));
  }

  const small = [], unmeasured = [], uncaptioned = [];
  let figureCount = 0;
  const chunkText = (bytes, key) => {
    const view = new DataView(bytes.buffer);
    const latin1 = new TextDecoder("latin1");
    const decode = (a, b) => latin1.decode(bytes.slice(a, b));
    for (let at = 8; at + 8 <= bytes.length;) {
      const length = view.getUint32(at), type = decode(at + 4, at + 8);
      if (type === "tEXt") {
        const body = decode(at + 8, at + 8 + length), nul = body.indexOf("\0");
        if (body.slice(0, nul) === key) return body.slice(nul + 1);
      }
      if (type === "IDAT" || type === "IEND") break;
      at += 12 + length;
    }
    return null;
  };
  for (const img of article.querySelectorAll("img")) {
    if (!visible(img) || img.closest("[data-testid]")) continue;
    figureCount++;
    const name = (img.getAttribute("src") || "").split("/").pop().slice(0, 24);
    const figure = img.closest("figure");
    if (!figure || !figure.querySelector("figcaption .caption-number")) {
      uncaptioned.push(name);
    }
    let textPx = null, measured = false;
    try {
      const response = await fetch(img.currentSrc || img.src);
      if (/\.svg($|\?)/.test(img.src) || /^data:image\/svg/.test(img.src)) {
        const said = (await response.text()).match(
          /smallest text ([\d.]+) pt when shown (\d+) CSS px wide/);
        if (said) {
          measured = true;
          textPx = (+said[1]) * 96 / 72 * img.width / (+said[2]);
        }
      } else {
        const said = chunkText(new Uint8Array(await response.arrayBuffer()),
                               "selfattention:smallest-text-px");
        if (said !== null) {
          measured = true;
          if (said !== "none") textPx = (+said) * img.width / img.naturalWidth;
        }
      }
    } catch { /* unmeasured */ }
    if (!measured) unmeasured.push(name);
    else if (textPx !== null && textPx < %(px)d) {
      small.push(name + " " + textPx.toFixed(1) + " px");
    }
  }
  return {equations, equationCount, outputs, outputCount: blocks.length,
          small, unmeasured, uncaptioned, figureCount};
}""" % {"chars": MAX_OUTPUT_CHARS, "px": MIN_TEXT_PX}


def screen_measures(page, size: dict) -> dict:
    """What :data:`SCREEN_JS` finds on ``page`` laid out at ``size``."""
    page.set_viewport_size(size)
    # loaded at that size, as a phone or a laptop loads it: MathJax breaks
    # long equations at the width the column has when it typesets them
    page.reload(wait_until="networkidle")
    page.evaluate(MATHJAX_READY_JS)
    page.wait_for_timeout(500)  # the theme re-measures after 300 ms
    page.evaluate("() => document.fonts.ready")
    return page.evaluate(SCREEN_JS)


#: Pages whose printed outputs still hold lines over MAX_OUTPUT_CHARS: page ->
#: {"blocks": how many such blocks at most, "why": the reason}. A page may
#: have fewer, never more; a page not listed has none.
LONG_OUTPUTS = ROOT / "tests" / "fixtures" / "long_outputs.json"


def screen_problems(measured: dict, size: str, page_path: str) -> list[str]:
    """What :func:`screen_measures` found, one line per kind."""
    kinds = (("equations", "display equation(s) cut, scrolling or with "
              "the number out of view"),
             ("small", f"figure(s) with text under {MIN_TEXT_PX} px"),
             ("unmeasured", "figure(s) that do not say their smallest text"),
             ("uncaptioned", "figure(s) without a number and caption"))
    problems = [f"{size}: {len(measured[key])} {what}: {measured[key][:6]}"
                for key, what in kinds if measured[key]]
    wrapped = [o for o in measured["outputs"] if "wraps" in o]
    if wrapped:
        problems.append(f"{size}: {len(wrapped)} printed output(s) wrap: "
                        f"{wrapped[:6]}")
    long = [o for o in measured["outputs"] if "characters" in o]
    allowed = json.loads(LONG_OUTPUTS.read_text()).get(page_path, {})
    if len(long) > allowed.get("blocks", 0):
        problems.append(
            f"{size}: {len(long)} printed output(s) with lines over "
            f"{MAX_OUTPUT_CHARS} characters, {allowed.get('blocks', 0)} "
            f"allowed ({LONG_OUTPUTS.name}): {long[:6]}")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("page_path", sampled(expected_pages()))
def test_page_reads_on_laptop_and_phone(visit, page_path):
    """Equations, printed outputs and figures as a reader meets them at
    1366 x 900 and at 390 x 844 (:data:`SCREEN_JS` says what fails)."""
    v = visit(page_path)
    if v.redirected:  # index.html: its target is checked on its own
        return
    problems = []
    for size, name in ((LAPTOP, "1366 px"), (PHONE, "390 px")):
        measured = screen_measures(v.page, size)
        print(f"SCREEN {page_path} {name} " + json.dumps(
            {k: len(x) if isinstance(x, list) else x
             for k, x in measured.items()}))
        problems += screen_problems(measured, name, page_path)
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)
