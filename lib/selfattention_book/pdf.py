"""The book, and its course edition, as PDF; and each chapter alone.

``make pdf`` (``python -m selfattention_book.pdf``) does, per edition:

1. **One page of HTML.** Jupyter Book builds the whole book with Sphinx's
   ``singlehtml`` builder into ``_build/pdf/<edition>/`` (the course edition
   with ``SELFATTENTION_SOLUTIONS=hidden``, as ``make book
   SOLUTIONS=hidden``). Sphinx numbers chapters, sections, figures and
   equations there exactly as on the site, and every cross-reference and
   citation becomes a link inside that one page.
2. **Print.** Chromium (Debian's, driven by Playwright, every other host
   blocked) opens the page from 127.0.0.1, waits for MathJax (the site's
   own copy) to typeset, applies :data:`PRINT_CSS` and
   :data:`PREPARE_JS` (a contents list that links to every chapter and
   section; solutions' dropdowns opened; each explorer shown as the still
   it opens with, its buttons hidden, and a line with the address of its
   page in the online book; no sidebars or launch buttons) and prints to
   A4 with the PDF's outline (bookmarks) and page numbers.
3. **Chapters alone.** The book's PDF is cut at its chapters' bookmarks
   (pypdf) into ``pdf/chapters/NN_name.pdf``, one file a chapter with its
   sections, figures and exercises, so a chapter can be printed alone.

The files go into ``_build/html/pdf/`` (the site offers them for download;
:mod:`.book_editions` links them) and, for the course edition, into
``_build/course/_build/html/pdf/``.

Why Chromium rather than weasyprint or LaTeX: the book's math is typeset by
MathJax in the browser, which weasyprint does not run (its PDF would show
raw TeX); Sphinx's LaTeX builder would need a TeX distribution (Debian's
``texlive`` packages, over a gigabyte) and a LaTeX rendering of every MyST
directive and kernel-free figure the book uses. Chromium is already
installed for the browser tests.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pypdf import PdfReader, PdfWriter

# Chapters of the toc and the online book's address, as the plain notebooks
# number and link them (book tooling that still lives with the course).
from .plain import BookIndex

__all__ = ["Edition", "EDITIONS", "build_single_html", "print_pdf",
           "split_chapters", "build", "BOOK_PDF", "COURSE_PDF"]

CHROMIUM = Path("/usr/bin/chromium")
BOOK_PDF = "self-attention-in-vision.pdf"
COURSE_PDF = "self-attention-in-vision-course.pdf"
TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class Edition:
    name: str          # "book" or "course"
    solutions: str     # the value of SELFATTENTION_SOLUTIONS
    pdf: str           # the file name of its PDF
    site: str          # its HTML site, where the PDFs are offered
    title_note: str    # under the title on the first page
    leave_out: tuple[str, ...] = ()   # documents not printed in it


EDITIONS = {
    "book": Edition("book", "shown", BOOK_PDF, "_build/html",
                    "The book, with the solutions of its exercises."),
    # The instructors' guide quotes a rubric in its sample gradebook: the
    # students' printed copy leaves it out.
    "course": Edition("course", "hidden", COURSE_PDF,
                      "_build/course/_build/html",
                      "The course edition: the exercises without their "
                      "solutions.", ("appendices/instructors",)),
}

PRINT_CSS = """
@page { size: A4; margin: 18mm 16mm 18mm 16mm; }
html { font-size: 10.5pt; }
body { background: #fff !important; }
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer,
.header-article, .prev-next-area, .bd-header-article, footer,
.sa-editions, .sa-executed, .headerlink, .toggle-button, .skip-link,
.sa-fig button, .sa-fig select, .sa-fig .sa-help, .sa-fig input,
.copybtn, .bd-search, #pst-back-to-top, .sa-still-note,
div.cell.tag_remove-output, .search-button-field { display: none !important; }
.bd-container, .bd-container__inner, .bd-main, .bd-content,
.bd-article-container, .bd-page-width, article.bd-article {
  max-width: none !important; width: auto !important;
  padding: 0 !important; margin: 0 !important; display: block !important;
  overflow: visible !important; }
.sa-print-break { break-before: page; }
h1, h2, h3, h4 { break-after: avoid; }
figure, img, .sa-fig, div.math, mjx-container[display="true"], pre,
table { break-inside: avoid; }
pre, .highlight pre { white-space: pre-wrap !important;
  word-break: break-all; font-size: 0.82em; }
.cell_output pre { max-height: none !important; overflow: visible !important; }
a { color: #1f4f80; text-decoration: none; }
.sa-print-title { text-align: center; padding-top: 30%; }
.sa-print-title .sa-print-name { font-size: 2.6em; font-weight: 600; }
.sa-print-title p { font-size: 1.2em; }
.sa-print-toc { break-before: page; break-after: page; }
.sa-print-toc ol { list-style: none; padding-left: 0; }
.sa-print-toc li.sa-toc-1 { font-weight: 600; margin-top: 0.5em; }
.sa-print-toc li.sa-toc-2 { margin-left: 2em; font-size: 0.95em; }
.sa-print-online { font-size: 0.9em; font-style: italic; }
details, .toggle-hidden { display: block !important;
  visibility: visible !important; }
"""

#: Run in the page before printing; returns what it changed.
PREPARE_JS = r"""
([baseurl, title, note, leaveOut]) => {
  const article = document.querySelector("article.bd-article") ||
    document.querySelector("main") || document.body;
  // The site's navigation, sidebars and buttons: not on paper.
  const chrome = [".bd-header", ".bd-sidebar-primary", ".bd-sidebar-secondary",
    ".bd-footer", ".header-article", ".bd-header-article", ".prev-next-area",
    ".sa-editions", ".skip-link", "#pst-back-to-top", ".sa-still-note"];
  for (const el of document.querySelectorAll(chrome.join(", "))) el.remove();
  // Solutions folded in dropdowns (sphinx-togglebutton, <details>): open.
  for (const d of document.querySelectorAll("details")) d.open = true;
  for (const el of document.querySelectorAll(".toggle-hidden"))
    el.classList.remove("toggle-hidden");
  // Documents this edition does not print.
  for (const doc of leaveOut) {
    const start = document.getElementById("document-" + doc);
    if (!start) throw new Error("no document " + doc + " to leave out");
    const section = start.nextElementSibling;
    if (section && section.tagName === "SECTION") section.remove();
    start.remove();
  }
  // Each explorer: the still it opens with, and where it can be explored.
  const starts = Array.from(document.querySelectorAll('span[id^="document-"]'));
  let explorers = 0;
  for (const fig of document.querySelectorAll(".sa-fig")) {
    let doc = "";
    for (const s of starts) {
      if (s.compareDocumentPosition(fig) & Node.DOCUMENT_POSITION_FOLLOWING)
        doc = s.id.slice("document-".length);
    }
    const url = baseurl + "/" + doc + ".html";
    const p = document.createElement("p");
    p.className = "sa-print-online";
    p.append("A still of an interactive figure; explore it in the " +
             "online book: ");
    const a = document.createElement("a");
    a.href = url; a.textContent = url;
    p.append(a);
    fig.after(p);
    explorers += 1;
  }
  // Each chapter and appendix starts a page; the contents list links to
  // it and to its sections and further pages.
  const toc = document.createElement("nav");
  toc.className = "sa-print-toc";
  toc.innerHTML = "<h2>Contents</h2>";
  const list = document.createElement("ol");
  let entries = 0;
  const add = (section, level) => {
    const h = section.querySelector(":scope > h1, :scope > h2, " +
                                    ":scope > h3, :scope > h4");
    if (!h || !section.id) return;
    const li = document.createElement("li");
    li.className = "sa-toc-" + level;
    const a = document.createElement("a");
    a.href = "#" + section.id;
    const copy = h.cloneNode(true);
    for (const x of copy.querySelectorAll(".headerlink, mjx-assistive-mml"))
      x.remove();
    a.append(...copy.childNodes);
    li.append(a);
    list.append(li);
    entries += 1;
  };
  for (const s of starts) {
    const doc = s.id.slice("document-".length);
    const section = s.nextElementSibling;
    if (!section || section.tagName !== "SECTION") continue;
    const top = doc.split("/").length === 2;
    if (top) section.classList.add("sa-print-break");
    add(section, top ? 1 : 2);
    if (top) {
      for (const sub of section.querySelectorAll(":scope > section"))
        add(sub, 2);
    }
  }
  toc.append(list);
  const first = document.createElement("div");
  first.className = "sa-print-title";
  first.innerHTML = "<p class='sa-print-name'></p><p></p>";
  first.querySelector(".sa-print-name").textContent = title;
  first.querySelector("p:last-child").textContent = note;
  article.prepend(first, toc);
  // A display equation wider than the page would be cut, its number with
  // it: it is drawn smaller until it fits.
  let narrowed = 0;
  for (const eq of document.querySelectorAll("div.math")) {
    if (eq.scrollWidth > eq.clientWidth + 1) {
      const ratio = eq.clientWidth / eq.scrollWidth;
      eq.style.fontSize = Math.floor(100 * ratio) + "%";
      eq.style.overflow = "visible";
      narrowed += 1;
    }
  }
  return {explorers, entries, narrowed};
}
"""

#: Before the page's scripts: the site's MathJax configuration without the
#: speech rule engine, whose spoken forms (for screen readers on the site)
#: take most of the typesetting time of the whole book on one page and do
#: not reach paper; the assistive MathML copy stays.
QUIET_MATHJAX_JS = """(() => {
  let value;
  Object.defineProperty(window, "MathJax", {configurable: true,
    get: () => value,
    set: v => {
      if (v && !v.version && v.options) {
        v.options.enrichSpeech = "none";
        if (v.loader && v.loader.load) {
          v.loader.load = v.loader.load.filter(x => x !== "a11y/explorer");
        }
      }
      value = v;
    }});
})();"""
MATHJAX_STARTED_JS = """() =>
  !!(window.MathJax && MathJax.startup && MathJax.startup.promise)"""
MATHJAX_READY_JS = """() => Promise.race([
  (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => document.fonts.ready).then(() => true)
  : document.fonts.ready.then(() => false),
  new Promise(done => setTimeout(() => done(false), 300000))])"""

FOOTER = ('<div style="font-size:8pt;width:100%;text-align:center;'
          'color:#444"><span class="pageNumber"></span> / '
          '<span class="totalPages"></span></div>')


def build_single_html(root: Path, edition: Edition) -> Path:
    """Jupyter Book's ``singlehtml`` build of ``edition``; its page."""
    root = Path(root)
    out = root / "_build" / "pdf" / edition.name
    jb = Path(sys.executable).parent / "jupyter-book"
    env = dict(os.environ, SELFATTENTION_SOLUTIONS=edition.solutions)
    done = subprocess.run(
        [str(jb), "build", str(root), "--builder", "singlehtml", "-W", "-n",
         "--keep-going", "--path-output", str(out)],
        env=env, capture_output=True, text=True)
    page = out / "_build" / "singlehtml" / f"{_root_doc(root)}.html"
    if done.returncode != 0 or not page.is_file():
        raise RuntimeError(f"the singlehtml build of the {edition.name} "
                           f"edition failed:\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-3000:]}")
    return page


def _log(message: str) -> None:
    print(f"pdf: {time.strftime('%H:%M:%S')} {message}", file=sys.stderr,
          flush=True)


def _root_doc(root: Path) -> str:
    import yaml

    return yaml.safe_load((root / "_toc.yml").read_text())["root"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def print_pdf(page: Path, target: Path, baseurl: str, title: str,
              note: str, leave_out: tuple[str, ...] = ()) -> dict:
    """Print ``page`` (served from its folder on 127.0.0.1) to ``target``
    in Chromium; every request to another host is refused and reported."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        raise FileNotFoundError("make pdf needs Chromium: apt-get install -y "
                                "chromium")
    handler = functools.partial(_Quiet, directory=str(page.parent))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    origin = f"127.0.0.1:{httpd.server_address[1]}"
    blocked: list[str] = []

    def record(request):
        url = urlsplit(request.url)
        if url.scheme in ("http", "https", "ws", "wss") and \
                url.netloc != origin:
            blocked.append(request.url)

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM), headless=True,
                # Every other host is unreachable: its name resolves to
                # nothing. (Playwright's request interception, which the
                # browser tests use, stalls on a page of this size.)
                args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--disable-background-networking",
                      "--host-resolver-rules=MAP * ~NOTFOUND, "
                      "EXCLUDE 127.0.0.1"])
            context = browser.new_context(viewport={"width": 900,
                                                    "height": 1200})
            context.set_default_timeout(TIMEOUT_MS)
            context.add_init_script(QUIET_MATHJAX_JS)
            tab = context.new_page()
            tab.on("request", record)
            tab.goto(f"http://{origin}/{page.name}", wait_until="networkidle")
            # A page of 4 MB: the deferred MathJax starts after the network
            # is idle; wait for it, then for its typesetting.
            _log("page loaded")
            tab.wait_for_function(MATHJAX_STARTED_JS)
            _log("MathJax started")
            typeset = tab.evaluate(MATHJAX_READY_JS)
            _log("MathJax typeset")
            tab.add_style_tag(content=PRINT_CSS)
            tab.emulate_media(media="print")
            changed = tab.evaluate(PREPARE_JS, [baseurl, title, note,
                                                list(leave_out)])
            _log(f"prepared for print: {changed}")
            target.parent.mkdir(parents=True, exist_ok=True)
            tab.pdf(path=str(target), format="A4", print_background=True,
                    display_header_footer=True,
                    header_template="<span></span>", footer_template=FOOTER,
                    margin={"top": "16mm", "bottom": "18mm", "left": "14mm",
                            "right": "14mm"},
                    outline=True, tagged=True)
            _log(f"printed {target.name}")
            browser.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    if blocked:
        raise RuntimeError(f"printing {page} asked other hosts: {blocked[:5]}")
    return {"typeset": typeset, **changed}


def _outline_pages(reader: PdfReader) -> list[tuple[str, int, int]]:
    """The PDF's outline, flattened: (title, depth, first page index)."""
    out = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                out.append((item.title.strip(), depth,
                            reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return out


def undoubled(title: str) -> str | None:
    """The title a bookmark meant, if Chromium wrote its text runs twice,
    as it does for some headings it moves to the next page: "1.2. 1.2. The
    formal definitionThe formal definition" for "1.2. The formal
    definition" (a heading's second line may be written once, without the
    space it broke at); None for a title that is not so doubled.

    A doubled title starts with segments of at least two characters, each
    written twice in a row, that make at least two thirds of it; a title of
    English words never does.
    """
    n = len(title)
    came_from = {0: None}                 # position -> (previous, segment)
    frontier = [0]
    while frontier:
        i = frontier.pop()
        for size in range(2, (n - i) // 2 + 1):
            j = i + 2 * size
            if j not in came_from and \
                    title[i:i + size] == title[i + size:j]:
                came_from[j] = (i, title[i:i + size])
                frontier.append(j)
    end = max(came_from)
    if end == 0 or 3 * end < 2 * n:
        return None
    parts, at = [], end
    while came_from[at] is not None:
        at, segment = came_from[at]
        parts.append(segment)
    meant = "".join(reversed(parts))
    tail = title[end:]
    # The tail began a new line, at a space that the join dropped.
    if tail and not meant[-1].isspace() and meant[-1] != "-" and \
            not tail[0].isspace():
        meant += " "
    return meant + tail


def mend_outline(path: Path) -> int:
    """Write each doubled bookmark of the PDF at ``path`` once
    (:func:`undoubled`); returns how many were mended."""
    from pypdf.generic import NameObject, TextStringObject

    writer = PdfWriter(str(path), incremental=True)
    mended = 0
    stack = [writer.root_object["/Outlines"].get_object()]
    while stack:
        item = stack.pop().get("/First")
        while item is not None:
            entry = item.get_object()
            meant = undoubled(str(entry.get("/Title", "")))
            if meant is not None:
                entry[NameObject("/Title")] = TextStringObject(meant)
                mended += 1
            stack.append(entry)
            item = entry.get("/Next")
    if mended:
        fresh = path.with_suffix(".mended.pdf")
        with open(fresh, "wb") as f:
            writer.write(f)
        fresh.replace(path)
    return mended


def _chapter_titles(root: Path) -> dict[str, str]:
    """Each chapter's document and its heading as the PDF's outline shows
    it (number, space, title)."""
    from selfattention_book.slides import Chapter

    index = BookIndex(root)
    titles = {}
    for doc in index.chapters:
        chapter = Chapter.read(root, doc)
        number = index.targets[chapter.label].number
        titles[doc] = f"{number}. {chapter.title}"
    return titles


def split_chapters(root: Path, book: Path, folder: Path) -> dict[str, Path]:
    """One PDF per chapter of ``book``, cut at the outline's top-level
    entries; raises if a chapter's entry is missing."""
    reader = PdfReader(str(book))
    marks = _outline_pages(reader)
    written = {}
    folder.mkdir(parents=True, exist_ok=True)
    for doc, heading in _chapter_titles(root).items():
        starts = [i for i, (title, _, _) in enumerate(marks)
                  if _same_heading(title, heading)]
        if not starts:
            raise RuntimeError(f"{book.name} has no bookmark for {doc} "
                               f"({heading!r})")
        i = starts[0]
        _, depth, first = marks[i]
        after = [page for _, d, page in marks[i + 1:] if d <= depth]
        last = after[0] if after else len(reader.pages)
        writer = PdfWriter()
        for number in range(first, max(last, first + 1)):
            writer.add_page(reader.pages[number])
        target = folder / f"{Path(doc).name}.pdf"
        with open(target, "wb") as f:
            writer.write(f)
        written[doc] = target
    return written


def _normal(text: str) -> str:
    import re

    text = re.sub(r"\\sqrt\{([^}]*)\}", r"√\1", text)
    text = re.sub(r"[$\\{}#]", "", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def _same_heading(bookmark: str, heading: str) -> bool:
    """Whether an outline entry is a chapter's heading (its TeX written as
    MathJax's text: compare the words outside math)."""
    import re

    a, b = _normal(bookmark), _normal(heading)
    if a == b:
        return True
    words = [w for w in re.findall(r"[a-z]{3,}", b)]
    number = b.split(" ", 1)[0]
    return a.startswith(number + " ") and all(w in a for w in words)


def build(root: Path, names: list[str]) -> list[tuple[Path, int, int]]:
    """Each edition's PDF and its chapters' PDFs in
    ``_build/pdf/<edition>/``, copied into the edition's site under
    ``pdf/``; (file, pages, bytes) of each."""
    root = Path(root).resolve()
    index = BookIndex(root)
    made = []
    for name in names:
        edition = EDITIONS[name]
        started = time.perf_counter()
        page = build_single_html(root, edition)
        folder = root / "_build" / "pdf" / edition.name
        target = folder / edition.pdf
        print_pdf(page, target, index.baseurl, "Self-Attention in Vision",
                  edition.title_note, edition.leave_out)
        _log(f"bookmarks written once: {mend_outline(target)}")
        if (folder / "chapters").exists():
            shutil.rmtree(folder / "chapters")
        files = [target, *split_chapters(root, target,
                                         folder / "chapters").values()]
        site = root / edition.site / "pdf"
        for file in files:
            copy = site / file.relative_to(folder)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, copy)
            made.append((file, len(PdfReader(str(file)).pages),
                         file.stat().st_size))
        print(f"pdf: the {name} edition in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m selfattention_book.pdf")
    parser.add_argument("editions", nargs="*",
                        help="book, course (default: both)")
    parser.add_argument("--root", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    unknown = set(args.editions) - set(EDITIONS)
    if unknown:
        parser.error(f"unknown editions {sorted(unknown)}; choose from "
                     f"{sorted(EDITIONS)}")
    for file, pages, size in build(args.root,
                                   args.editions or list(EDITIONS)):
        print(f"{file}: {pages} pages, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
