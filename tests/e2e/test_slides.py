"""Every chapter's slide deck (lib/selfattention_book/slides.py).

Without a browser: every chapter of ``_toc.yml`` has an outline, and every
outline builds (each name it gives still exists in its chapter); a deck's
figures are the very images its chapter prints; an outline that names what
the chapter lacks stops the build with the outline's file.

In Chromium (served from 127.0.0.1, every other host blocked): each deck of
the built site (``_build/html/slides/``, written by ``make book``) loads
without errors or outside requests, typesets its math from the site's
MathJax, and no slide's content overflows the 1280 x 720 slide. ``make
test`` opens the sample chapter's deck, ``make sweep`` the others. With
SLIDES_SHOTS=folder, a screenshot of every slide goes there.
"""

from __future__ import annotations

import base64
import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest
import yaml

from selfattention_book import slides
from selfattention_book.plain import BookIndex
from support import ROOT, sampled

INDEX = BookIndex(ROOT)
CHAPTERS = list(INDEX.chapters)


def test_every_chapter_of_the_toc_has_an_outline():
    missing = [doc for doc in CHAPTERS
               if not slides.outline_path(ROOT, doc).is_file()]
    assert not missing, f"chapters without a slide outline: {missing}"
    assert len(CHAPTERS) >= 11


def test_an_outline_without_its_chapter_is_reported(tmp_path):
    for name in ("_toc.yml", "_config.yml", "references.bib", "chapters",
                 "appendices", "intro.md"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / slides.DECKS).mkdir()
    with pytest.raises(slides.OutlineError, match=CHAPTERS[0]):
        slides.chapter_outline(tmp_path, CHAPTERS[0])


@pytest.mark.parametrize("entry", [
    {"figure": "fig-no-such-figure"}, {"equation": "eq-no-such-equation"},
    {"lead": "No such section"}, {"check": "no-such-cell"},
    {"points": "not a list"}, {"figure": "x", "lead": "y"}, "just text"])
def test_a_name_the_chapter_lacks_stops_the_build(tmp_path, entry):
    for name in ("_toc.yml", "_config.yml", "references.bib", "chapters",
                 "appendices", "intro.md"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / slides.DECKS).mkdir()
    doc = CHAPTERS[0]
    good = yaml.safe_load(slides.outline_path(ROOT, doc).read_text())
    slides.outline_path(tmp_path, doc).write_text(
        yaml.safe_dump(good[:2] + [entry]))
    with pytest.raises(slides.OutlineError) as err:
        slides.build_deck(tmp_path, doc, INDEX)
    assert f"{slides.DECKS}/{Path(doc).name}.yml" in str(err.value)


@pytest.mark.parametrize("doc", CHAPTERS, ids=lambda d: Path(d).name)
def test_the_deck_follows_its_chapter(doc):
    deck = slides.build_deck(ROOT, doc, INDEX)
    # about an hour: 15 to 25 slides, the title slide included
    assert 15 <= len(deck.slides) <= 25, len(deck.slides)
    nb = nbformat.read(ROOT / f"{doc}.ipynb", as_version=4)
    printed = {}
    for cell in nb.cells:
        name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
        for output in cell.get("outputs", []):
            if name and "image/png" in output.get("data", {}):
                printed[name] = base64.b64decode(output["data"]["image/png"])
    entries = slides.chapter_outline(ROOT, doc)
    figures = [e["figure"] for e in entries if "figure" in e]
    for label in figures:
        asset = f"{Path(doc).name}/{label}.png"
        if label in printed:
            assert deck.assets[asset] == printed[label], label
    # every figure and equation slide carries the number the book gives it
    text = "\n".join(s.body for s in deck.slides)
    for label in figures:
        assert f"Fig. {INDEX.targets[label].number}<" in text, label
    for entry in entries:
        if "equation" in entry:
            number = INDEX.targets[entry["equation"]].number
            assert f"\\tag{{{number}}}" in text, entry
    # MyST never reaches a slide as source text
    for marker in ("{numref}", "{eq}", "{cite", ":::", "(eq-", ")="):
        assert marker not in text, marker


def _hanging_leads(deck) -> list[str]:
    """The lead slides of ``deck`` whose text ends without a full stop (with
    a colon, a comma) and nothing under it: a sentence leading into what is
    not on the slide."""
    out = []
    for slide in deck.slides:
        if slide.kind != "lead":
            continue
        # the lead's paragraphs (and list) hold no <div>
        lead, _, under = slide.body.partition('<div class="sa-lead">')[2] \
            .partition("</div>")
        text = re.sub(r"<[^>]+>", "", lead).strip()
        if not re.search(r"[.!?][\"')]*$", text) and not under.strip():
            out.append(f"{slide.title}: ...{text[-60:]}")
    return out


@pytest.mark.parametrize("doc", CHAPTERS, ids=lambda d: Path(d).name)
def test_no_lead_slide_ends_on_what_it_announces(doc):
    deck = slides.build_deck(ROOT, doc, INDEX)
    assert not _hanging_leads(deck)


#: A chapter of three sections whose first paragraphs lead into what
#: follows: an equation (with a colon, after another sentence), an equation
#: (mid-sentence, the paragraph's only sentence), a cell that prints.
ANNOUNCING = [
    nbformat.v4.new_markdown_cell(
        "(ch-definition)=\n# A made-up chapter\n\nIts introduction.\n\n"
        "## Projections\n\nEvery token gets three rows. Before the "
        "scores:\n\n$$\nQ = X W_Q\n$$ (eq-def-projections)\n\nAfter it.\n\n"
        "## Softmax\n\nThe weights are a softmax,\n\n$$\na = "
        "\\operatorname{softmax}(s)\n$$ (eq-def-softmax)\n\n"
        "## Printing\n\nA cell prints. It prints this:"),
    nbformat.v4.new_code_cell("print('forty-two')", outputs=[
        nbformat.v4.new_output("stream", name="stdout",
                               text="forty-two\n")]),
]


@pytest.fixture
def announcing_root(tmp_path):
    nb = nbformat.v4.new_notebook(cells=ANNOUNCING)
    nb.cells[1]["id"] = "prints"
    (tmp_path / "chapters").mkdir()
    nbformat.write(nb, tmp_path / f"{CHAPTERS[0]}.ipynb")
    (tmp_path / slides.DECKS).mkdir()
    return tmp_path


def _deck(root, entries):
    slides.outline_path(root, CHAPTERS[0]).write_text(
        yaml.safe_dump(entries))
    deck = slides.build_deck(root, CHAPTERS[0], INDEX)
    return deck, [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", s.body))
                  for s in deck.slides[1:]]


def test_a_lead_and_the_equation_it_announces_share_a_slide(announcing_root):
    number = INDEX.targets["eq-def-projections"].number
    deck, texts = _deck(announcing_root, [
        {"lead": "Projections", "notes": "one"},
        {"equation": "eq-def-projections", "notes": "two"},
        {"lead": "Printing"}, {"check": "prints"}])
    assert len(deck.slides) == 3
    projections, printing = texts
    assert "Every token gets three rows. Before the scores:" in projections
    assert projections.index("Before the scores:") < projections.index(
        f"\\tag{{{number}}}")
    assert projections.count("Before the scores:") == 1
    assert deck.slides[1].notes == "one\ntwo"
    assert printing.index("It prints this:") < printing.index("forty-two")
    assert not _hanging_leads(deck)


def test_a_lead_without_what_it_announces_leaves_its_sentence_out(
        announcing_root):
    deck, texts = _deck(announcing_root, [
        {"lead": "Projections"}, {"lead": "Printing"},
        {"equation": "eq-def-projections"}])
    assert len(deck.slides) == 4
    projections, printing, equation = texts
    assert "Every token gets three rows." in projections
    assert "Before the scores" not in projections + printing
    assert "tag" not in projections and "forty-two" not in printing
    assert "Before the scores:" in equation       # the equation's own lead
    assert not _hanging_leads(deck)


def test_a_lead_that_only_announces_carries_what_it_announces(
        announcing_root):
    number = INDEX.targets["eq-def-softmax"].number
    deck, texts = _deck(announcing_root, [{"lead": "Softmax"},
                                          {"lead": "Printing"}])
    assert len(deck.slides) == 3
    assert texts[0].index("a softmax,") < texts[0].index(
        f"\\tag{{{number}}}")
    assert "forty-two" not in texts[1]
    assert not _hanging_leads(deck)


# ------------------------------------------------------------- in Chromium
OVERFLOW_JS = r"""([w, h]) => {
  const out = [];
  const slides = Reveal.getSlides();
  for (let i = 0; i < slides.length; i++) {
    Reveal.slide(i);
    const box = slides[i].querySelector(".sa-slide");
    const frame = box.getBoundingClientRect();
    const scale = Reveal.getScale();
    if (Math.abs(frame.width / scale - w) > 1 ||
        Math.abs(frame.height / scale - h) > 1) {
      out.push(`slide ${i + 1}: box ${frame.width / scale} x ` +
               `${frame.height / scale}`);
    }
    // What MathJax hides for screen readers (assistive MathML) is clipped
    // to nothing, though it counts in scrollHeight: the visible boxes count.
    const parts = ":scope > *, mjx-container, img, pre, li, figcaption";
    for (const el of box.querySelectorAll(parts)) {
      if (el.closest("mjx-assistive-mml")) continue;
      const r = el.getBoundingClientRect();
      const wide = el.tagName === "PRE" && el.scrollWidth > el.clientWidth + 1;
      if (wide || r.right > frame.right + 1 || r.bottom > frame.bottom + 1 ||
          r.left < frame.left - 1 || r.top < frame.top - 1) {
        out.push(`slide ${i + 1}: ${el.tagName.toLowerCase()} ` +
                 `"${el.textContent.trim().slice(0, 40)}" leaves the slide ` +
                 `(${Math.round((r.right - frame.left) / scale)} x ` +
                 `${Math.round((r.bottom - frame.top) / scale)})`);
        break;
      }
    }
    for (const img of box.querySelectorAll("img")) {
      if (!img.complete || img.naturalWidth === 0)
        out.push(`slide ${i + 1}: image ${img.src} not loaded`);
      if (!(img.getAttribute("alt") || "").trim())
        out.push(`slide ${i + 1}: image without alt text`);
    }
  }
  return {problems: out, count: slides.length};
}"""

RAW_TEX_JS = r"""() => {
  const found = [];
  const walker = document.createTreeWalker(
    document.querySelector(".slides"), NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const n = walker.currentNode;
    if (n.parentElement.closest("pre, code, mjx-container, script, aside"))
      continue;
    if (/\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\{numref\}|:::/.test(n.textContent))
      found.push(n.textContent.trim().slice(0, 80));
  }
  return {raw: found, typeset: document.querySelectorAll("mjx-container")
          .length};
}"""

READY_JS = """() => new Promise(done => {
  const wait = () => (window.MathJax && MathJax.startup &&
                      MathJax.startup.promise)
    ? MathJax.startup.promise.then(() => document.fonts.ready)
        .then(() => done(true))
    : setTimeout(wait, 50);
  setTimeout(() => done(false), 60000);    // a deck that never typesets
  if (Reveal.isReady()) wait(); else Reveal.on("ready", wait);
})"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def decks_url():
    from site_support import built_site

    site = built_site()
    assert (site / slides.DECKS).is_dir(), "the site has no slides/ folder"
    handler = functools.partial(_Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/{slides.DECKS}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.slow     # builds the site if it is stale; Chromium
@pytest.mark.parametrize("name", sampled([Path(d).name for d in CHAPTERS]))
def test_the_deck_opens_offline_and_every_slide_fits(browser, decks_url,
                                                     name):
    origin = urlsplit(decks_url).netloc
    problems, blocked = [], []
    context = browser.new_context(viewport={"width": slides.WIDTH,
                                            "height": slides.HEIGHT})
    context.set_default_timeout(30_000)

    def route(r):
        if urlsplit(r.request.url).netloc == origin:
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and problems.append(
        f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(
        f"HTTP {r.status}: {r.url}"))
    page.goto(f"{decks_url}/{name}.html", wait_until="networkidle")
    assert page.evaluate(READY_JS), f"{name}: MathJax never typeset the deck"
    math = page.evaluate(RAW_TEX_JS)
    fit = page.evaluate(OVERFLOW_JS, [slides.WIDTH, slides.HEIGHT])
    shots = os.environ.get("SLIDES_SHOTS")
    if shots:
        folder = Path(shots) / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for i in range(fit["count"]):
            page.evaluate(f"Reveal.slide({i})")
            page.screenshot(path=str(folder / f"{i + 1:02d}.png"))
    context.close()
    assert not blocked, f"requests to other hosts: {blocked}"
    assert not problems, problems
    assert not math["raw"], f"math left as source: {math['raw']}"
    assert math["typeset"] > 0
    assert 15 <= fit["count"] <= 25
    assert not fit["problems"], "\n".join(fit["problems"])
