"""Book-level checks: configuration, lock, chapter template, citations."""

import re
from pathlib import Path

import nbformat
import pytest
import yaml
from packaging.requirements import Requirement

from selfattention_book import book_a11y as a11y
from selfattention_course.assign import check_title, find_exercises

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
# The appendices written as notebooks: executed pages with launch buttons,
# but no chapter template (no exercises).
APPENDICES = sorted((ROOT / "appendices").glob("*.ipynb"))
NOTEBOOKS = CHAPTERS + APPENDICES


def toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        files += [c["file"] for c in part["chapters"]]
    return files


def lock():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def text_of(nb, kind):
    return ["".join(c.source) for c in nb.cells if c.cell_type == kind]


# ------------------------------------------------------------ layout and toc
def test_every_chapter_is_in_the_toc_and_every_toc_entry_exists():
    files = toc_files()
    for name in files:
        assert any((ROOT / f"{name}{ext}").exists()
                   for ext in (".md", ".ipynb")), name
    for path in NOTEBOOKS:
        assert f"{path.parent.name}/{path.stem}" in files, \
            f"{path.name} missing from _toc.yml"


def test_book_renders_stored_outputs():
    assert CONFIG["execute"]["execute_notebooks"] == "off"


# ------------------------------------------------------------ one repository
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_setup_cell_installs_from_the_configured_repository(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "remove-cell" in first.metadata.get("tags", [])
    assert '"google.colab" in sys.modules' in first.source
    repo = CONFIG["repository"]
    want = f"git+{repo['url']}@{repo['branch']}"
    assert want in first.source, f"setup cell should install from {want}"


# ------------------------------------------------------------ versions
def test_pyproject_lock_and_environment_agree():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = lock()
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"]
                       if isinstance(d, dict))
    env_pins = {}
    for line in pip_section:
        if not line.startswith("-"):
            name, version = line.split("==")
            env_pins[name.lower()] = version
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    for spec in map(Requirement, deps):
        name = spec.name.lower()
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert spec.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside {spec}")
    for spec in map(Requirement, project["dependencies"]):
        name = spec.name.lower()
        assert name in env_pins, f"{name} missing from environment.yml"
        assert env_pins[name].split("+")[0] == pins[name], (
            f"environment.yml has {name}=={env_pins[name]}, lock {pins[name]}")
    # Binder must get the CPU build of PyTorch, not the CUDA wheel
    assert env_pins["torch"].endswith("+cpu")
    assert any("download.pytorch.org/whl/cpu" in line for line in pip_section)


def test_every_package_the_library_imports_is_declared():
    """What the installed packages import is a dependency; what the book's
    tooling imports (lib/selfattention_book, never installed) may also
    come from the dev extra, which `make install` installs, or be what
    one of its packages requires (Sphinx and docutils, by Jupyter Book)."""
    import ast
    import sys
    import tomllib
    from importlib.metadata import packages_distributions, requires

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {Requirement(d).name.lower() for d in project["dependencies"]}
    extra = {Requirement(d).name.lower() for d in
             project["optional-dependencies"]["dev"]}
    dev = declared | extra | {
        Requirement(r).name.lower() for name in extra
        for r in requires(name) or [] if "extra ==" not in r}
    distributions = packages_distributions()
    undeclared = {}
    for path in (ROOT / "lib").rglob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
        allowed = dev if "selfattention_book" in path.parts else declared
        undeclared |= {
            name: distributions.get(name, [name])
            for name in imported - set(sys.stdlib_module_names)
            if not name.startswith("selfattention")        # the project's
            and not {d.lower() for d in distributions.get(name, [name])}
            & allowed}
    assert not undeclared, f"imported by lib/ but not declared: {undeclared}"


# ------------------------------------------------------------ chapter template
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_follows_the_template(path):
    nb = nbformat.read(path, as_version=4)
    md = "\n".join(text_of(nb, "markdown"))
    assert re.search(r"^\(ch-[a-z-]+\)=\n# ", md, re.M), "chapter label + title"
    assert "**After this chapter you can**" in md, "learning objectives"
    assert "## Try it" in md and "## Exercises" in md and "## Summary" in md
    titled = re.findall(r":::\{exercise\} ([A-Z][a-z]+): [^\n]*\((\d+) "
                        r"points?\)\n:label: (ex-[a-z0-9-]+)", md)
    exercises = [label for _, _, label in titled]
    assert len(exercises) == md.count(":::{exercise}"), \
        "every exercise is titled 'Kind: what (N points)'"
    assert len(exercises) >= 3, "at least 3 exercises"
    kinds = {kind for kind, _, _ in titled}
    assert kinds & {"Derive", "Prove"}, "a Derive or Prove exercise"
    assert "Experiment" in kinds, "an Experiment"
    declared = find_exercises()
    for title, label in re.findall(r":::\{exercise\} ([^\n]*)\n:label: "
                                   r"(ex-[a-z0-9-]+)", md):
        check_title(title, declared[label][2], path.name)  # kind, points
    starts = re.findall(r":::\{solution-start\} (ex-[a-z0-9-]+)", md)
    assert starts == exercises, "every exercise has one gated solution"
    assert md.count(":::{solution-end}") == len(exercises)
    code = "\n".join(text_of(nb, "code"))
    assert code.count("### BEGIN SOLUTION") == code.count("### END SOLUTION") \
        >= len(exercises)
    assert "{cite" in md, "citations for external claims"
    assert "patch_explorer" in code or "interactive." in code, \
        "interactive figure"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_a_rubric_s_points_are_its_written_part_s(path):
    """A rubric that states its points ("Rubric for the written part (2
    points)") gives the written part of its exercise as declared."""
    declared = find_exercises()
    label = None
    for text in text_of(nbformat.read(path, as_version=4), "markdown"):
        found = re.search(r":::\{exercise\}[^\n]*\n:label: (ex-[a-z0-9-]+)",
                          text)
        label = found.group(1) if found else label
        for points in re.findall(r"[Rr]ubric[^.(\n]{0,40}\((\d+) points?\)",
                                 text):
            assert label, f"{path.name}: a rubric before any exercise"
            assert int(points) == declared[label][2].written_points, label


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_outputs_are_committed_and_clean(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        assert cell.execution_count is not None, f"cell {i} never executed"
        for out in cell.outputs:
            assert out.output_type != "error", f"cell {i} stored an error"
            if out.output_type == "stream":
                assert out.name == "stdout", f"cell {i} wrote to stderr"
    assert "widgets" not in nb.metadata, "widget state is not embedded"


# ------------------------------------------------------------ citations
def bib_entries():
    text = (ROOT / "references.bib").read_text()
    return dict(re.findall(r"@\w+\{([^,]+),(.*?)\n\}", text, re.S))


def test_every_reference_has_a_doi_or_arxiv_id():
    for key, body in bib_entries().items():
        assert "doi" in body or "eprint" in body, key


def test_every_citation_is_in_the_bibliography():
    keys = set(bib_entries())
    sources = [p.read_text() for p in ROOT.glob("**/*.md")
               if ".venv" not in p.parts and "_build" not in p.parts]
    sources += ["\n".join(text_of(nbformat.read(p, 4), "markdown"))
                for p in NOTEBOOKS]
    for text in sources:
        for group in re.findall(r"\{cite(?::[a-z]+)?\}`([^`]+)`", text):
            for key in group.split(","):
                assert key.strip() in keys, f"unknown citation {key}"


def test_scrollable_tables_become_named_regions():
    table = ('<div class="pst-scrollable-table-container"><table><thead><tr>'
             '<th class="head"><p>Week</p></th><th>Core &amp; idea</th></tr>'
             '</thead><tbody></tbody></table></div>')
    body = ('<section><h2>Plan<a class="headerlink" href="#p">#</a></h2>'
            + table + table + '<div class="pst-scrollable-table-container">'
            '<table><tbody><tr><td>1</td></tr></tbody></table></div>')
    out = a11y.name_table_regions(body)
    names = re.findall(r'role="region" aria-label="([^"]*)"', out)
    assert names == ["table in Plan: Week, Core &amp; idea",
                     "table in Plan: Week, Core &amp; idea (2)",
                     "table in Plan"]
    assert re.sub(r' role="region" aria-label="[^"]*"', "", out) == body


def test_printed_tables_become_named_regions():
    printed = ('<div class="output text_html"><table class="sa-table"><thead>'
               '<tr><th scope="col">patches</th><th scope="col">mask</th>'
               '</tr></thead><tbody></tbody></table></div>')
    body = '<section><h2>Padding</h2>' + printed + printed
    out = a11y.name_table_regions(body)
    names = re.findall(r'role="region" aria-label="([^"]*)"', out)
    assert names == ["table in Padding: patches, mask",
                     "table in Padding: patches, mask (2)"]
    assert re.sub(r' role="region" aria-label="[^"]*"', "", out) == body


def test_a_folded_cell_is_named_by_its_visible_words():
    fold = ('<details class="admonition hide above-input">\n<summary '
            'aria-label="Toggle hidden content">\n<p class="collapsed '
            'admonition-title">Show code cell source</p>\n</summary>')
    out = a11y.name_folds_by_their_words(fold + "<p>text</p>" + fold)
    assert "aria-label" not in out
    assert out.count("<summary>\n<p class=\"collapsed") == 2
    assert a11y.name_folds_by_their_words("<summary>x</summary>") \
        == "<summary>x</summary>"


def test_no_figure_text_is_set_below_8_points():
    """Figures show at their size (tests/e2e/test_layout.py checks it at
    1366 px), so a font size set in code is the size a reader sees."""
    sources = [(p.name, c.source) for p in NOTEBOOKS
               for c in nbformat.read(p, as_version=4).cells
               if c.cell_type == "code"]
    sources += [(p.name, p.read_text())
                for p in (ROOT / "lib" / "selfattention").glob("*.py")]
    small = [(name, m.group(0)) for name, text in sources
             for m in re.finditer(r"fontsize\s*=\s*([0-9.]+)", text)
             if float(m.group(1)) < 8]
    assert not small, small


# ------------------------------------------------------------ citations, built
def _citation_labels(references: str) -> dict[str, str]:
    """{anchor id: label} of the built reference list."""
    return dict(re.findall(
        r'<div class="citation" id="([\w-]+)"[^>]*>\s*<span class="label">'
        r'<span class="fn-bracket">\[</span>(.*?)<span class="fn-bracket">',
        references))


@pytest.mark.slow
def test_the_reference_list_labels_each_work_as_the_text_cites_it():
    """Author-year in both places (selfattention_book.book_citations):
    every citation in the text reads as the label of the entry it links to,
    in the list."""
    import html

    from site_support import built_site

    site = built_site()
    labels = _citation_labels(
        (site / "appendices" / "references.html").read_text("utf-8"))
    assert len(labels) >= 40, "the reference list lists every work"
    assert all(re.fullmatch(r"\D+, \d{4}", html.unescape(label))
               for label in labels.values()), sorted(labels.values())[:5]
    checked = 0
    for page in sorted(site.rglob("*.html")):
        for span in re.findall(r'<span class="bibtex-citation".*?</span>',
                               page.read_text("utf-8"), re.S):
            text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", span))
                            .replace(" [", ", ").split())
            for anchor in re.findall(r'href="[^"#]*references\.html#'
                                     r'([\w-]+)"', span):
                label = html.unescape(labels[anchor])
                assert label in text, f"{page.name}: {text!r} cites {label}"
                checked += 1
    assert checked >= 40, "the chapters cite the works"
