"""The course edition of the site (make book SOLUTIONS=hidden).

The book is built with SELFATTENTION_SOLUTIONS=hidden where make puts it,
_build/course, from scratch unless a build there is newer than every source
of the book and every module of the course package (selfattention-assign
makes the student notebooks that the site offers); no solution's code or
output may appear in its pages, no check's
verdict may appear in any of its files, the notebooks offered for download
are the student versions, and the exercises themselves are still there.
The student notebooks (make assignments) hold no output at all.
"""

import html
import re
from pathlib import Path


import nbformat
import pytest

from selfattention_book import course_edition
from selfattention_course import assign
from selfattention_course.names import BEGIN, END, META
from site_support import built_course_site

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def check_outputs(nb) -> list[str]:
    """The text the chapter's check calls showed in its solved run."""
    names = {name for _, name, _ in assign.find_exercises().values()}
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code" and any(
                assign.calls(cell.source, n) for n in names):
            # printed (a stream) or displayed (its plain form)
            found += [" ".join(str(out.get("text") or out.get("data", {})
                                   .get("text/plain", "")).split())
                      for out in cell.get("outputs", [])]
    return [f for f in found if len(f) > 12]


@pytest.fixture(scope="module")
def site():
    return built_course_site()


def page_text(path: Path) -> str:
    text = re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))
    return " ".join(html.unescape(text).split())


def chapter_pages(site: Path, path: Path) -> list[Path]:
    """The built pages of chapter notebook ``path``: its own, then its
    further pages (selfattention_book.book_pages)."""
    folder = site / "chapters"
    return [folder / f"{path.stem}.html",
            *sorted((folder / path.stem).glob("*.html"))]


def solution_parts(nb):
    """Lines only a solution holds, and the text its cells print."""
    inside, lines, printed = False, set(), []
    elsewhere = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            elsewhere.add(" ".join(cell.source.split()))
            continue
        for line in cell.source.splitlines():
            if line.strip() == BEGIN:
                inside = True
            elif line.strip() == END:
                inside = False
            elif inside:
                lines.add(" ".join(line.split()))
            else:
                elsewhere.add(" ".join(line.split()))
        if "solution" in cell.metadata.get("tags", []):
            printed += [out["text"].strip().splitlines()[0]
                        for out in cell.get("outputs", [])
                        if out.get("output_type") == "stream"]
    shown = "\n".join(elsewhere)
    return [ln for ln in lines if len(ln) > 12 and ln not in shown], \
        [p for p in printed if len(p) > 12 and p not in shown]


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_solution_code_or_output_is_published(site, path):
    nb = nbformat.read(path, as_version=4)
    lines, printed = solution_parts(nb)
    assert lines, "the chapter has solutions to hide"
    pages = chapter_pages(site, path)
    assert len(pages) > 1, "the chapter is read as several pages"
    raw = "\n".join(page.read_text() for page in pages)
    text = "\n".join(page_text(page) for page in pages)
    leaked = [ln for ln in lines + printed if ln in text]
    assert not leaked, leaked
    assert not re.search(r'class="[^"]*\bsolution\b', raw)
    assert "colab.research.google.com" not in raw
    labels = re.findall(r":label: (ex-[\w-]+)", "\n".join(
        c.source for c in nb.cells if c.cell_type == "markdown"))
    for label in labels:
        assert f'id="{label}"' in raw, label


@pytest.mark.slow
def test_no_check_verdict_is_published(site):
    """Every file of the built site: pages, search index, sources."""
    verdict = course_edition.verdict_pattern()
    leaked = []
    for path in sorted(site.rglob("*")):
        if not path.is_file() or path.suffix not in (
                ".html", ".js", ".json", ".txt", ".ipynb", ".md"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".html":
            text = re.sub(r"<[^>]+>", "", text)
        text = html.unescape(text)
        leaked += [f"{path.relative_to(site)}: {m.group(0)}"
                   for m in verdict.finditer(text)]
    assert not leaked, leaked[:10]
    for path in CHAPTERS:
        printed = check_outputs(nbformat.read(path, as_version=4))
        assert printed, f"{path.stem}: no check output to hide"
        text = "\n".join(page_text(p) for p in chapter_pages(site, path))
        assert not [p for p in printed if p in text], path.stem


def test_the_extension_drops_verdicts_and_check_outputs_only():
    ext = course_edition
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("checks.check_limits(my_limits)"),
        nbformat.v4.new_code_cell("print(report)"),
        nbformat.v4.new_code_cell("print(1 + 1)")])
    texts = ["[ex-a] Correct: c = 1 / (σ² √d_k)\n", "[ex-b] Not yet: no\n",
             "2\n"]
    for cell, text in zip(nb.cells, texts):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                               text=text)]
    cleaned = nbformat.reads(ext.without_verdicts(
        nbformat.writes(nb), {"check_limits"}, ext.verdict_pattern()),
        as_version=4)
    assert [len(c.outputs) for c in cleaned.cells] == [0, 0, 1]
    assert ext.verdict_pattern().search("[ex-x-y] For review: z")
    assert not ext.verdict_pattern().search("Correct: not a check")


def test_the_student_notebooks_hold_no_output_and_no_verdict(tmp_path):
    assign.build(CHAPTERS, tmp_path)
    verdict = course_edition.verdict_pattern()
    for path in sorted((tmp_path / "student").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells
                   if c.cell_type == "code"), path.name
        assert not verdict.search(path.read_text()), path.name


@pytest.mark.slow
def test_the_downloadable_notebooks_are_the_student_versions(site):
    for path in CHAPTERS:
        sources = site / "_sources" / "chapters"
        copy = sources / path.name
        nb = nbformat.read(copy, as_version=4)
        assert META in nb.metadata
        assert BEGIN not in copy.read_text()
        # each further page offers the whole chapter's student notebook
        further = sorted((sources / path.stem).glob("*.ipynb"))
        assert further, path.stem
        assert all(p.read_text() == copy.read_text() for p in further)


# ------------------------------------------------ rubrics and absent buttons
def solution_prose() -> dict[str, str]:
    """{exercise label: its solution's prose}, the rubric of its written
    part included, as the assignments' manifest collects it."""
    made = assign.make_all(CHAPTERS, assign.find_exercises())
    return {item.label: "\n\n".join(item.rubric)
            for a in made for item in a.items if item.rubric}


def plain_passages(prose: str, shortest: int = 60) -> list[str]:
    """The runs of plain words of ``prose`` between its Markdown and maths
    markup, ``shortest`` characters or longer: what a page, a notebook or a
    CSV file that quotes the prose holds verbatim, however it renders the
    markup."""
    runs = re.split(r"\$[^$]*\$|[*`{}\\$|_]|\n\s*\n", prose)
    passages = [" ".join(run.split()) for run in runs]
    return [p for p in passages if len(p) >= shortest
            and not p.startswith("Rubric for the written part")]


def file_text(path: Path) -> str:
    """What a reader of ``path`` sees: a page's text, a notebook's cells
    and outputs, any other text file as it is; whitespace collapsed."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".html":
        text = re.sub(r"<script\b.*?</script>|<style\b.*?</style>", " ",
                      text, flags=re.S)
        text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    elif path.suffix == ".ipynb":
        nb = nbformat.reads(text, as_version=4)
        text = "\n".join([c.source for c in nb.cells] + [
            str(out.get("text") or out.get("data", ""))
            for c in nb.cells for out in c.get("outputs", [])])
    return " ".join(text.split())


BINARY = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".woff", ".woff2",
          ".ttf", ".eot", ".pickle", ".doctree", ".zip"}


def test_rubric_passages_are_found_where_the_prose_is_quoted():
    prose = solution_prose()
    assert len(prose) >= 40, "every exercise's solution has prose"
    moved = prose["ex-definition-moved"]
    passages = plain_passages(moved)
    assert passages and all(len(p) >= 60 for p in passages)
    quoted = f"rubric: {' '.join(moved.split())}"      # a gradebook's note
    assert all(p in " ".join(quoted.split()) for p in passages)
    assert not plain_passages("**Rubric for the written part (3 points).**")


@pytest.mark.slow
def test_no_rubric_or_solution_prose_in_any_file_of_the_site(site):
    """Every file of the course edition: pages, search index, sources,
    notebooks. Today's leak would be the instructors' sample gradebook,
    whose note on a written answer quotes its rubric."""
    wanted = {label: plain_passages(text)
              for label, text in solution_prose().items()}
    assert sum(map(len, wanted.values())) > 100
    leaked = []
    for path in sorted(site.rglob("*")):
        if not path.is_file() or path.suffix in BINARY:
            continue
        text = file_text(path)
        leaked += [f"{path.relative_to(site)}: {label}: {p[:60]}"
                   for label, passages in wanted.items()
                   for p in passages if p in text]
    assert not leaked, leaked[:10]


ABSENT_BUTTONS = re.compile(r"rocket icon|launch button", re.I)


@pytest.mark.slow
def test_no_page_tells_of_buttons_the_course_edition_lacks(site):
    """The course edition has no launch buttons (Colab, Binder, JupyterHub,
    Live code): no page may send a reader to them or to their rocket icon;
    the full site does (intro.md, lib/selfattention_book/book_assets.py)."""
    assert ABSENT_BUTTONS.search((ROOT / "intro.md").read_text())
    told = []
    for path in sorted(site.rglob("*.html")):
        found = ABSENT_BUTTONS.findall(file_text(path))
        if found:
            told.append(f"{path.relative_to(site)}: {sorted(set(found))}")
    assert not told, told
    assert not [p for p in site.rglob("*.html")
                if "btn-launch-thebe" in p.read_text(encoding="utf-8")]


def test_full_site_prose_is_cut_from_a_source_with_its_fences():
    ext = course_edition
    source = ("Before.\n\n::::{container} full-site-only\n"
              "Use the rocket icon.\n\n:::{note}\nInside.\n:::\n::::\n\n"
              "::::{container} sa-start\nKept.\n::::\n\n"
              ":::{container} full-site-only sa-wrapped-sample\n"
              "```text\nrubric: x\n```\n:::\nAfter.\n")
    kept = ext.without_full_site_prose(source)
    assert "rocket" not in kept and "Inside" not in kept
    assert "rubric" not in kept
    assert kept.startswith("Before.") and kept.rstrip().endswith("After.")
    assert "::::{container} sa-start\nKept.\n::::" in kept
    other = ":::{container} full-site-only-not\nKept too.\n:::\n"
    assert ext.without_full_site_prose(other) == other
