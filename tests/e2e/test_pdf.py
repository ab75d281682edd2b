"""The PDFs of ``make pdf`` (lib/selfattention_book/pdf.py), read back with
pypdf and compared with the HTML book (``_build/html``, ``make book``), the
course edition's with the course edition's site (``_build/course``, ``make
book SOLUTIONS=hidden``).

* Each edition's PDF has every chapter title, every figure number and every
  equation number that its HTML edition shows, the reference list with every
  entry of the book's references page, and no raw TeX or MyST markup in
  its text (TeX in code, such as a plot's label, is the book's code).
* Its contents page links into the document (internal links), and its
  bookmarks hold every chapter.
* Each explorer is a still with a line giving its page in the online book.
* The book's PDF has the solutions and their rubrics; the course edition's
  has neither (the first half makes the second a test that can fail).
* Each chapter has a PDF of its own with its title and its figures.

Every test here is in ``make sweep``'s lane (``make sweep`` runs ``make
pdf`` first; printing the two editions takes minutes).
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from pathlib import Path

import pytest

from selfattention_book import pdf
from selfattention_book.slides import Chapter
from selfattention_book.plain import BookIndex
from support import ROOT

pytestmark = [pytest.mark.sweep, pytest.mark.slow]

INDEX = BookIndex(ROOT)
#: TeX, MyST roles (``{numref}`label```), directives (``:::{figure}``) and
#: targets (``(label)=``) as they would show if not rendered. (A role's or
#: directive's name set as code in the prose, such as "an {exercise}
#: directive" on the instructors' page, is text the book means to show.)
#: Code (its TeX strings, such as a plot's axis label r"$\sqrt{d_k}$") is
#: set in a monospaced font: TeX is looked for outside it, MyST everywhere.
RAW_MYST = re.compile(r"\{(numref|eq|cite|cite:p|cite:t|ref|doc)\}`"
                      r"|(:::|```)\s*\{[\w-]+\}|^:::"
                      r"|^\((eq|fig|ch|sec|ex)-[\w-]+\)=", re.M)
RAW = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\frac\{|\\sqrt\{"
                 r"|" + RAW_MYST.pattern, re.M)
MONOSPACED = re.compile(r"Mono|Courier|Consol")
SOLUTION = re.compile(r"Solution to\s+Exercise")
RUBRIC = re.compile(r"Rubric for the written part")


def _pdf_path(name: str) -> Path:
    edition = pdf.EDITIONS[name]
    path = ROOT / "_build" / "pdf" / edition.name / edition.pdf
    if not path.is_file():
        pytest.fail(f"{path} is missing: run make pdf (make sweep does)")
    return path


@functools.lru_cache(maxsize=None)
def _read(path: Path) -> tuple[str, str]:
    """The PDF's text, and the part of it not set in a monospaced font (the
    code cells and what they print are)."""
    from pypdf import PdfReader

    pages, prose = [], []

    def keep(text, cm, tm, font, size):
        name = str(font.get("/BaseFont", "")) if font else ""
        if not MONOSPACED.search(name):
            prose.append(text)

    for page in PdfReader(str(path)).pages:
        pages.append(page.extract_text(visitor_text=keep) or "")
        prose.append("\n")
    # NFKC: the ligature "ﬁ" as "fi"
    return (unicodedata.normalize("NFKC", "\n".join(pages)),
            unicodedata.normalize("NFKC", "".join(prose)))


def _text(path: Path) -> str:
    return _read(path)[0]


def _flat(text: str) -> str:
    """Text with line breaks and hyphenation at line ends undone."""
    return re.sub(r"\s+", " ", text.replace("-\n", "-"))


@functools.lru_cache(maxsize=None)
def _html_book(name: str = "book") -> dict:
    """Figure and equation numbers and reference entries of the HTML book,
    or (``name`` "course") of its course edition, whose solutions (and the
    figures some of them draw) are left out."""
    from site_support import built_course_site, built_site

    site = built_course_site() if name == "course" else built_site()
    figures, equations = set(), set()
    for page in site.rglob("*.html"):
        if page.relative_to(site).parts[0] in ("_static", "_vendor",
                                               "slides", "_sources"):
            continue
        text = page.read_text(encoding="utf-8")
        figures |= set(re.findall(
            r'<span class="caption-number">(Fig\. [\d.]+?)\.? ', text))
        equations |= set(re.findall(r'<span class="eqno">(\([\d.]+\))',
                                    text))
    references = (site / "appendices" / "references.html").read_text(
        encoding="utf-8")
    entries = re.findall(r'<div class="citation"[^>]*>.*?<p>(.*?)\.',
                         references, re.S)
    entries = [html.unescape(re.sub(r"<[^>]+>", "", e)) for e in entries]
    return {"figures": figures, "equations": equations, "entries": entries}


def _chapter_headings() -> dict[str, str]:
    """Each chapter's number and title, its math left out (MathJax draws
    it with glyphs that carry no text)."""
    out = {}
    for doc in INDEX.chapters:
        chapter = Chapter.read(ROOT, doc)
        title = re.sub(r"\$[^$]*\$", "", chapter.title).strip()
        out[doc] = f"{INDEX.targets[chapter.label].number}. {title}"
    return out


@pytest.mark.parametrize("name", sorted(pdf.EDITIONS))
def test_the_pdf_has_every_title_and_number_of_the_html_book(name):
    text = _flat(_text(_pdf_path(name)))
    book = _html_book(name)
    assert len(book["figures"]) > 30 and len(book["equations"]) > 30
    missing = [t for t in _chapter_headings().values() if t not in text]
    assert not missing, f"chapter titles missing: {missing}"
    missing = sorted(f for f in book["figures"]
                     if not re.search(re.escape(f) + r"(?!\d)", text))
    assert not missing, f"figure numbers missing: {missing}"
    missing = sorted(e for e in book["equations"] if e not in text)
    assert not missing, f"equation numbers missing: {missing}"
    assert "References" in text
    missing = [e for e in book["entries"] if _flat(e) not in text]
    assert not missing, f"reference entries missing: {missing[:5]}"
    assert re.search(r"\[[A-Z][\w\s.,&+]*\d{4}\]", text), "no citation"


def _markup_left(path: Path) -> list[str]:
    """TeX left in the prose of the PDF ``path``, MyST left anywhere."""
    text, prose = _read(path)
    return ([m.group(0) for m in RAW.finditer(prose)] +
            [m.group(0) for m in RAW_MYST.finditer(text)])


@pytest.mark.parametrize("name", sorted(pdf.EDITIONS))
def test_the_pdf_text_holds_no_raw_tex_or_myst(name):
    text, prose = _read(_pdf_path(name))
    # The prose is most of the text, with every chapter's title.
    assert len(prose) > len(text) / 2
    assert all(t in _flat(prose) for t in _chapter_headings().values())
    found = _markup_left(_pdf_path(name))
    assert not found, f"markup left as text: {found[:10]}"


def test_the_markup_check_finds_tex_in_prose_and_myst_in_code(browser,
                                                              tmp_path):
    """The check above, on pages printed by Chromium as the book is: TeX in
    a code cell is the book's code; TeX in prose or MyST in either is
    markup left unrendered."""
    pages = {
        "code": r'<pre>ax.set(title=r"$\sqrt{d_k}$")</pre>',
        "prose": r"<p>The scores over \(\sqrt{d_k}\) have unit spread.</p>",
        "myst": "<pre>See {numref}`fig-scaling-hist`.</pre>",
        "target": "<p>Before.</p><p>(eq-def-softmax)=</p>",
    }
    found = {}
    context = browser.new_context()
    tab = context.new_page()
    for case, body in pages.items():
        tab.set_content(f"<html><body style='font-family: sans-serif'>"
                        f"<p>Self-attention.</p>{body}</body></html>")
        target = tmp_path / f"{case}.pdf"
        tab.pdf(path=str(target), format="A4")
        found[case] = _markup_left(target)
        assert "Self-attention." in _read(target)[1], case
    context.close()
    assert found["code"] == []
    assert found["prose"] and found["myst"] and found["target"], found


@pytest.mark.parametrize("name", sorted(pdf.EDITIONS))
def test_the_contents_link_into_the_pdf_and_bookmarks_hold_chapters(name):
    from pypdf import PdfReader

    reader = PdfReader(str(_pdf_path(name)))
    internal = 0
    for page in reader.pages[:6]:
        for annotation in page.get("/Annots") or []:
            annotation = annotation.get_object()
            action = annotation.get("/A")
            if "/Dest" in annotation or (action is not None and
                                         action.get("/S") == "/GoTo"):
                internal += 1
    assert internal >= len(INDEX.chapters), internal
    marks = [title for title, _, _ in pdf._outline_pages(reader)]
    for heading in _chapter_headings().values():
        assert any(pdf._same_heading(m, heading) for m in marks), heading
    # Chromium writes some headings' text twice; make pdf mends them.
    assert [m for m in marks if pdf.undoubled(m) is not None] == []


@pytest.mark.parametrize("name", sorted(pdf.EDITIONS))
def test_each_explorer_is_a_still_with_its_online_page(name):
    from site_support import built_site

    explorers = sum(p.read_text(encoding="utf-8").count('class="sa-fig ')
                    for p in (built_site() / "chapters").rglob("*.html"))
    text = _flat(_text(_pdf_path(name)))
    lines = re.findall(r"explore it in the online book: (\S+)", text)
    assert len(lines) == explorers > 0
    assert all(url.startswith(INDEX.baseurl + "/chapters/") for url in lines)


def test_the_book_has_solutions_and_rubrics_the_course_edition_none():
    book = _flat(_text(_pdf_path("book")))
    course = _flat(_text(_pdf_path("course")))
    assert SOLUTION.search(book) and RUBRIC.search(book)
    assert not SOLUTION.search(course), SOLUTION.search(course)
    assert not RUBRIC.search(course), RUBRIC.search(course)
    assert "BEGIN SOLUTION" not in course


@pytest.mark.parametrize("name", sorted(pdf.EDITIONS))
def test_each_chapter_prints_alone(name):
    from pypdf import PdfReader

    folder = _pdf_path(name).parent / "chapters"
    book = _html_book(name)
    pages = 0
    for doc, heading in _chapter_headings().items():
        path = folder / f"{Path(doc).name}.pdf"
        assert path.is_file(), path
        reader = PdfReader(str(path))
        pages += len(reader.pages)
        text = _flat(unicodedata.normalize(
            "NFKC", "\n".join(p.extract_text() for p in reader.pages)))
        assert text.lstrip().startswith(heading) or heading in text[:400]
        number = heading.split(".")[0]
        own = [f for f in book["figures"] if f.startswith(f"Fig. {number}.")]
        assert own and all(f in text for f in own), doc
        others = {f for f in book["figures"] if f not in own}
        assert not any(re.search(re.escape(f) + r"\s", text)
                       for f in others if f"Fig. {int(number) + 1}." in f)
    assert pages < len(PdfReader(str(_pdf_path(name))).pages)
