"""The plain notebooks that Colab, Binder, JupyterHub and the download
button open: in step with the chapters, free of MyST markup, numbered as the
book numbers them, solutions folded, no widget left as text."""

import json
import re
from pathlib import Path

import nbformat
import pytest

from selfattention_book.plain import plain_markdown
from site_support import INDEX, RAW, built_site
from support import module_from_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = module_from_file("scripts/plain_notebooks.py")
WIDGET = "application/vnd.jupyter.widget-view+json"


def plain(name):
    return nbformat.read(ROOT / "notebooks" / name, as_version=4)


# Every notebook page of the book: the chapters and the appendices written
# as notebooks, whose launch buttons open their plain versions too.
DOCS = INDEX.chapters + INDEX.appendices
NAMES = sorted(Path(doc).name + ".ipynb" for doc in DOCS)
CHAPTER_NAMES = sorted(Path(doc).name + ".ipynb" for doc in INDEX.chapters)


def test_every_chapter_has_its_plain_notebook_and_it_is_current():
    want = SCRIPT.expected()
    assert sorted(p.name for p in want) == NAMES
    stale = [p.name for p, text in want.items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"run `make notebooks`: stale {stale}"
    extra = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")} \
        - set(NAMES)
    assert not extra, f"notebooks/ holds no page's {sorted(extra)}"
    assert INDEX.appendices, "the toc lists no appendix notebook"


@pytest.mark.parametrize("name", NAMES)
def test_no_markup_or_label_is_left_as_text(name):
    for i, cell in enumerate(plain(name).cells):
        if cell.cell_type != "markdown":
            continue
        text = re.sub(r"`[^`\n]+`", "", cell.source)     # code spans
        found = RAW.search(text)
        assert not found, f"{name} cell {i}: {found.group(0)!r}"


@pytest.mark.parametrize("name", CHAPTER_NAMES)
def test_solutions_are_folded_and_widgets_show_a_figure(name):
    nb = plain(name)
    solutions = [c for c in nb.cells if "solution" in
                 c.metadata.get("tags", [])]
    assert solutions, f"{name}: no solution cell"
    for cell in solutions:
        assert cell.metadata["jupyter"]["source_hidden"] is True
        assert cell.metadata["cellView"] == "form"
        assert cell.source.startswith("#@title Solution to Exercise ")
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert WIDGET not in output.get("data", {}), name
        assert not re.search(r"nbval|the book shows", cell.source), name


def test_links_name_the_number_the_book_gives():
    index = INDEX
    text = plain_markdown(
        "See {numref}`Chapter %s <ch-scaling>`, {eq}`eq-scaling-products`, "
        "{numref}`fig-def-map`, {cite:p}`vaswani2017attention` and "
        "{cite:t}`vaswani2017attention`; `{numref}` in code stays.",
        index, "chapters/01_definition")
    assert "[Chapter 2](" in text
    assert f"[Eq. {index.targets['eq-scaling-products'].number}](" in text
    assert f"[Fig. {index.targets['fig-def-map'].number}](" in text
    assert "(Vaswani et al., 2017)" not in text          # linked, not plain
    assert re.search(r"\(\[Vaswani et al\., 2017\]\([^)]+\)\)", text)
    assert re.search(r"\[Vaswani et al\. \(2017\)\]\(", text)
    assert "`{numref}`" in text
    assert "#equation-eq-scaling-products" in text


def test_an_unknown_label_or_citation_is_an_error():
    for source in ("{numref}`Chapter %s <ch-nowhere>`", "{cite:p}`nobody`",
                   "{eq}`eq-missing`"):
        with pytest.raises(KeyError):
            plain_markdown(source, INDEX, "chapters/01_definition")


def test_directives_become_headed_blocks_and_quotes():
    text = plain_markdown(
        ":::{exercise} Derive: something (1 point)\n:label: ex-scaling-mean"
        "\n\nBody with $x$.\n\n```{note} Careful\nInner.\n```\n:::",
        INDEX, "chapters/02_scaling")
    number = INDEX.targets["ex-scaling-mean"].number
    assert text.startswith(f"### Exercise {number}: Derive: something")
    assert "> **Careful**" in text and "> Inner." in text
    assert ":::" not in text and "```" not in text


@pytest.fixture(scope="module")
def site() -> Path:
    return built_site()


def site_numbers(site: Path, target) -> str:
    """The number the built page shows for one labelled target."""
    html = (site / f"{target.doc}.html").read_text(encoding="utf-8")
    at = html.find(f'id="{target.anchor}"')
    assert at >= 0, f"{target.doc}: no element id={target.anchor}"
    start = html.find(">", at) + 1              # after the tag with the id
    window = re.sub(r"<[^>]+>", " ", html[start:start + 4000])
    return window


@pytest.mark.slow
@pytest.mark.parametrize("label", sorted(
    label for label, target in INDEX.targets.items() if target.number))
def test_numbers_agree_with_the_built_site(site, label):
    target = INDEX.targets[label]
    shown = " ".join(site_numbers(site, target).split())
    # The first number of the target's kind after its id is its own.
    pattern = {"equation": r"\((\d+(?:\.\d+)*)\)",
               "figure": r"Fig\. (\d+(?:\.\d+)*)",
               "exercise": r"Exercise (\d+(?:\.\d+)*)",
               "chapter": r"^(\d+(?:\.\d+)*)\.",
               "section": r"^(\d+(?:\.\d+)*)\."}[target.kind]
    found = re.search(pattern, shown, re.M)
    assert found and found.group(1) == target.number, (label, shown[:200])


@pytest.mark.slow
def test_downloads_are_the_plain_notebooks(site):
    for doc in DOCS:
        name = Path(doc).name + ".ipynb"
        copied = site / "_sources" / f"{doc}.ipynb"
        assert json.loads(copied.read_text()) == json.loads(
            (ROOT / "notebooks" / name).read_text()), name


def test_a_figure_directive_becomes_an_image_with_its_number():
    index = INDEX
    text = plain_markdown(
        ":::{figure} /_static/diagrams/x.svg\n:name: fig-def-map\n"
        ":alt: A [grid] of weights.\n\nThe caption, {eq}`eq-def-attention`."
        "\n:::", index, "chapters/01_definition")
    number = index.targets["fig-def-map"].number
    assert text.startswith(f"![A (grid) of weights.]({index.baseurl}"
                           f"/_static/diagrams/x.svg)")
    assert f"*Fig. {number}.*" in text and "The caption," in text
    assert ":::" not in text and ":name:" not in text


@pytest.mark.parametrize("doc", DOCS)
def test_maintainer_notes_live_in_metadata(doc):
    """Why a cell's output is not compared is a note for maintainers: it
    sits in the cell's metadata (``maintainer``), never in the code that
    readers and students see."""
    nb = nbformat.read(ROOT / f"{doc}.ipynb", as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert "nbval" not in cell.source, f"{doc} cell {i}"
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            why = cell.metadata.get("maintainer", {}).get(
                "nbval-ignore-output", "")
            assert len(why.split()) >= 4, f"{doc} cell {i}: no reason given"


@pytest.mark.parametrize("doc", INDEX.appendices)
def test_an_appendix_keeps_its_title_unnumbered_and_is_linked_by_it(doc):
    (label, page), = [(label, t) for label, t in INDEX.targets.items()
                      if t.doc == doc and t.kind == "chapter"]
    assert page.number == ""
    assert all(t.number == "" for t in INDEX.targets.values()
               if t.doc == doc and t.kind in ("chapter", "section"))
    first = plain(Path(doc).name + ".ipynb").cells[0].source
    assert first.startswith(f"# {page.title}\n"), first[:80]
    text = plain_markdown(f"See {{ref}}`{label}`.", INDEX,
                          "chapters/01_definition")
    assert text == f"See [{page.title}]({INDEX.url(doc, label)})."
