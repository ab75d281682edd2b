"""The built book's layout in Chromium, on a laptop and on a phone.

Every page of the site is opened (served from 127.0.0.1 with every other
host blocked, as in tests/e2e/test_browser.py) at 1366 x 900 and again at
390 x 844. A page fails when:

* it is wider than the window (``document.documentElement.scrollWidth``
  beyond ``window.innerWidth``): the whole page would pan sideways;
* a display equation, a code block, a cell output or a table is wider than
  its box (``scrollWidth > clientWidth``) while neither it nor an enclosing
  element inside the article scrolls sideways (computed ``overflow-x`` auto
  or scroll): its right end is cut; or it scrolls with no visible sign of
  it (no scroll bar taking room in the box and no scroll-shadow background);
* its text, outside code and typeset maths, holds TeX or MyST source
  (``\\sqrt``, ``\\_``, ``$``, ``{numref}``) or label text such as
  "Eq. eq-win-roll";
* a formula is a tab stop (MathJax's keyboard explorer or its "include in
  tab order" setting gives each formula ``tabindex``): a keyboard reader
  would pass every formula on the way to the controls.

Slow: it opens every page twice over. make test opens the sample's pages
(tests/support.py), make sweep the others.
"""

from __future__ import annotations

import pytest

from site_support import expected_pages
from support import sampled

pytestmark = pytest.mark.slow

LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
#: A chapter page holds at most this many laptop screens (about a lecture);
#: a longer chapter is read as more pages (lib/selfattention_book/pages.py).
MAX_SCREENS = 12

# What is measured on the page as laid out now.
LAYOUT_JS = r"""() => {
  const root = document.documentElement;
  const article = document.querySelector("article") || document.body;
  const scrolls = el => /^(auto|scroll)$/.test(getComputedStyle(el).overflowX);
  const visible = el => el.getClientRects().length > 0
    && getComputedStyle(el).visibility !== "hidden";
  const name = el => {
    const eqno = el.querySelector && el.querySelector(".eqno");
    const text = (eqno ? eqno.textContent : el.textContent || "")
      .replace(/\s+/g, " ").trim().slice(0, 50);
    return el.tagName.toLowerCase() + "." +
      Array.from(el.classList).slice(0, 2).join(".") + " '" + text + "'";
  };
  // A scroll container shows that it scrolls: a scroll bar takes room in
  // it (classic scroll bars), or it paints a scroll shadow (a background
  // image, as in the technique of background-attachment: local).
  const cue = el => {
    const style = getComputedStyle(el);
    const borders = parseFloat(style.borderTopWidth)
      + parseFloat(style.borderBottomWidth);
    return el.offsetHeight - el.clientHeight - borders > 0
      || style.backgroundImage.includes("gradient");
  };
  const boxes = [
    "div.math", "mjx-container[display=true]", "div.highlight pre",
    ".cell_output", ".cell_output > .output", ".cell_output pre",
    "div.output", ".pst-scrollable-table-container", "article table",
  ].join(", ");
  const cut = [], silent = [];
  for (const el of article.querySelectorAll(boxes)) {
    if (!visible(el) || el.scrollWidth <= el.clientWidth + 1) continue;
    let holder = null;
    for (let a = el; a && a !== article.parentElement; a = a.parentElement) {
      if (scrolls(a)) { holder = a; break; }
    }
    if (holder === null) cut.push(name(el));
    else if (holder === el && !cue(el)) silent.push(name(el));
  }
  // Text outside code, scripts and typeset maths.
  const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "TEXTAREA",
    "NOSCRIPT", "MJX-CONTAINER", "MJX-ASSISTIVE-MML", "KBD", "SAMP"]);
  const source = [
    /\\[A-Za-z]+/, /\\[_{}%&#$]/, /\$/, /[_^]\{/,
    /\{(numref|eq|ref|doc|cite|cite:[a-z]+|math|term)\}`?/,
    /\bEqs?\.\s*eq-/, /\((eq|fig|tab|sec|ex)-[a-z0-9-]+\)/,
  ];
  const raw = [];
  const walker = document.createTreeWalker(document.body,
                                           NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    let inside = false;
    for (let el = node.parentElement; el; el = el.parentElement) {
      if (skip.has(el.tagName) || el.classList.contains("highlight")
          || el.classList.contains("math")) { inside = true; break; }
    }
    const text = node.textContent;
    if (!inside && source.some(re => re.test(text))) {
      raw.push(text.replace(/\s+/g, " ").trim().slice(0, 80));
    }
  }
  // Tab stops: every element the Tab key reaches, and the formulas among
  // them.
  const stops = Array.from(document.querySelectorAll("*")).filter(el =>
    el.tabIndex >= 0 && !el.disabled && visible(el)
    && (el.hasAttribute("tabindex") || el.matches(
      "a[href], button, input, select, textarea, summary, [contenteditable]")));
  const formulas = stops.filter(el => el.closest("mjx-container"));
  // Pictures drawn with other proportions than their pixels'.
  const distorted = Array.from(article.querySelectorAll("img")).filter(
    img => visible(img) && img.naturalWidth > 0 && img.naturalHeight > 0
      && Math.abs((img.width / img.height)
                  / (img.naturalWidth / img.naturalHeight) - 1) > 0.02)
    .map(img => img.getAttribute("src").split("/").pop().slice(0, 16));
  // A chapter's figures (stored at twice their size) drawn smaller than
  // that size, their text with them.
  const shrunk = Array.from(article.querySelectorAll(".cell_output img"))
    .filter(img => visible(img) && img.naturalWidth > 0
      && img.width < 0.98 * img.naturalWidth / 2)
    .map(img => img.getAttribute("src").split("/").pop().slice(0, 16) + " "
      + Math.round(100 * img.width / (img.naturalWidth / 2)) + "%");
  return {width: root.scrollWidth, window: window.innerWidth, cut, silent,
          distorted, shrunk,
          raw: Array.from(new Set(raw)), stops: stops.length,
          formulaStops: formulas.length};
}"""


def layout_problems(measured: dict, size: str) -> list[str]:
    problems = []
    if measured["width"] > measured["window"]:
        problems.append(f"{size}: page is {measured['width']} px wide in a "
                        f"{measured['window']} px window")
    if measured["cut"]:
        problems.append(f"{size}: {len(measured['cut'])} block(s) cut at the "
                        f"right, e.g. {measured['cut'][:4]}")
    if measured["distorted"]:
        problems.append(f"{size}: {len(measured['distorted'])} picture(s) "
                        f"drawn out of proportion, e.g. "
                        f"{measured['distorted'][:4]}")
    if measured.get("shrunk") and size == "1366 px":
        problems.append(f"{size}: {len(measured['shrunk'])} figure(s) drawn "
                        f"below their size, their text below its points, "
                        f"e.g. {measured['shrunk'][:4]}")
    if measured["silent"]:
        problems.append(f"{size}: {len(measured['silent'])} block(s) scroll "
                        f"without a visible cue, e.g. {measured['silent'][:4]}")
    return problems


@pytest.mark.parametrize("page_path", sampled(expected_pages()))
def test_page_fits_laptop_and_phone(visit, page_path):  # noqa: F811
    v = visit(page_path)
    if v.redirected:  # index.html: its target is checked on its own
        return
    problems = []
    v.page.set_viewport_size(LAPTOP)
    v.page.wait_for_timeout(500)  # the theme re-measures after 300 ms
    laptop = v.page.evaluate(LAYOUT_JS)
    problems += layout_problems(laptop, "1366 px")
    screens = v.page.evaluate("document.documentElement.scrollHeight") \
        / LAPTOP["height"]
    if page_path.startswith("chapters/") and screens > MAX_SCREENS:
        problems.append(f"{screens:.1f} laptop screens long, more than "
                        f"{MAX_SCREENS}: split the chapter into more pages "
                        "(lib/selfattention_book/pages.py)")
    v.page.set_viewport_size(PHONE)
    v.page.wait_for_timeout(500)
    phone = v.page.evaluate(LAYOUT_JS)
    problems += layout_problems(phone, "390 px")
    if laptop["raw"]:
        problems.append(f"TeX or label source in the text: {laptop['raw']}")
    if laptop["formulaStops"]:
        problems.append(f"{laptop['formulaStops']} of {laptop['stops']} tab "
                        "stops are formulas")
    print(f"{page_path}: {screens:.1f} screens at 1366 px, "
          f"390 px page width {phone['width']}, "
          f"{laptop['stops']} tab stops, {laptop['formulaStops']} formulas")
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)
