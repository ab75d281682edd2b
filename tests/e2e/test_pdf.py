"""The PDFs of ``make pdf`` (lib/selfattention_book/pdf.py), read back with
pypdf and compared with the HTML book (``_build/html``, ``make book``).

* Each edition's PDF has every chapter title, every figure number and every
  equation number that the HTML book shows, the reference list with every
  entry of the book's references page, and no raw TeX or MyST markup in
  its text.
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
RAW = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\frac\{|\\sqrt\{"
                 r"|\{(numref|eq|cite|cite:p|cite:t|ref|doc)\}`"
                 r"|(:::|```)\s*\{[\w-]+\}|^:::"
                 r"|^\((eq|fig|ch|sec|ex)-[\w-]+\)=", re.M)
SOLUTION = re.compile(r"Solution to\s+Exercise")
RUBRIC = re.compile(r"Rubric for the written part")


def _pdf_path(name: str) -> Path:
    edition = pdf.EDITIONS[name]
    path = ROOT / "_build" / "pdf" / edition.name / edition.pdf
    if not path.is_file():
        pytest.fail(f"{path} is missing: run make pdf (make sweep does)")
    return path


@functools.lru_cache(maxsize=None)
def _text(path: Path) -> str:
    from pypdf import PdfReader

    text = "\n".join(page.extract_text() or ""
                     for page in PdfReader(str(path)).pages)
    return unicodedata.normalize("NFKC", text)     # the ligature "ﬁ" as "fi"


def _flat(text: str) -> str:
    """Text with line breaks and hyphenation at line ends undone."""
    return re.sub(r"\s+", " ", text.replace("-\n", "-"))


@functools.lru_cache(maxsize=None)
def _html_book() -> dict:
    """Figure and equation numbers and reference entries of the HTML
    book."""
    from site_support import built_site

    site = built_site()
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
    book = _html_book()
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


@pytest.mark.parametrize("name", sorted(pdf.EDITIONS))
def test_the_pdf_text_holds_no_raw_tex_or_myst(name):
    found = [m.group(0) for m in RAW.finditer(_text(_pdf_path(name)))]
    assert not found, f"markup left as text: {found[:10]}"


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
    book = _html_book()
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
