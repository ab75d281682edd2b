"""Student notebooks made from the chapters (selfattention_course.assign).

Nothing here executes a notebook (tests/e2e/test_grading.py does): these tests
read every chapter and its student version.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest

from selfattention_course import assign as asg
from selfattention_course.names import BEGIN, END, META, STUB
from selfattention_book.plain import plain_notebook
from site_support import INDEX, RAW

ROOT = Path(__file__).resolve().parents[2]

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("assignments")
    made = asg.build(CHAPTERS, out)
    return out, {a.stem: a for a in made}


def solution_lines(source):
    """Non-blank lines strictly inside the solution regions of a cell."""
    inside, lines = False, []
    for line in source.splitlines():
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END:
            inside = False
        elif inside and line.strip():
            lines.append(line.strip())
    return lines


def chapter_and_student(built, path):
    """The chapter, its student notebook, and that notebook's cells by id."""
    out, _ = built
    chapter = nbformat.read(path, as_version=4)
    student = nbformat.read(out / "student" / path.name, as_version=4)
    return chapter, student, {c.id: c for c in student.cells}


# ------------------------------------------------------------ every chapter
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_has_no_solution(built, path):
    chapter, student, by_id = chapter_and_student(built, path)
    outside = {ln.strip() for c in chapter.cells if c.cell_type == "code"
               for ln in c.source.splitlines()} - {
        ln for c in chapter.cells for ln in solution_lines(c.source)}
    for cell in chapter.cells:
        if "solution" not in cell.metadata.get("tags", []):
            continue
        mine = by_id[cell.id].source
        assert STUB in mine
        leaked = [ln for ln in solution_lines(cell.source)
                  if ln in {x.strip() for x in mine.splitlines()}
                  and ln not in outside]
        assert not leaked, f"solution lines left in cell {cell.id}: {leaked}"
    text = nbformat.writes(student)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "{solution-start}",
                   "{solution-end}", '"solution"'):
        assert marker not in text, marker


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_everything_but_the_solutions_is_kept(built, path):
    chapter, student, by_id = chapter_and_student(built, path)
    # Code outside the solutions reads as in the launch notebook (the same
    # conversion: maintainer notes out, the Colab cell folded).
    doc = f"chapters/{path.stem}"
    launch = {c.id: c for c in plain_notebook(chapter, INDEX, doc,
                                              solutions="absent").cells}
    for cell in chapter.cells:
        if cell.cell_type == "code":
            tags = cell.metadata.get("tags", [])
            assert cell.id in by_id, "no code cell is dropped"
            if "solution" not in tags:
                assert by_id[cell.id].source == launch[cell.id].source
                assert by_id[cell.id].metadata.get("tags", []) == tags
    code = [c for c in student.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    labels = asg.exercise_labels(chapter)
    assert asg.exercise_labels(student) == labels, "exercise texts are kept"
    meta = student.metadata[META]
    assert meta["exercises"] == labels and meta["file"] == path.stem
    _, made = built
    assert meta["chapter"] == made[path.stem].label
    # each exercise has a marked answer cell and a marked check cell
    marks = [c.metadata.get(META, {}) for c in code]
    assert {m["answer"] for m in marks if "answer" in m} == set(labels)


def folded_solution_prose(path):
    """The paragraphs of the solutions' prose, as the launch notebook folds
    them into ``<details>`` blocks."""
    launch = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)
    found = []
    for cell in launch.cells:
        if cell.cell_type == "markdown":
            for block in re.findall(r"<details>\n<summary>[^\n]*</summary>"
                                    r"\n(.*?)</details>", cell.source, re.S):
                found += [" ".join(p.split()) for p in block.split("\n\n")
                          if len(p.strip()) > 40]
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_student_notebook_reads_as_plain_jupyter(built, path):
    """No MyST markup, no solution, every exercise a heading with its
    number and points, marked in the cell's metadata for the grader."""
    out, made = built
    student = nbformat.read(out / "student" / path.name, as_version=4)
    markdown = [c for c in student.cells if c.cell_type == "markdown"]
    for i, cell in enumerate(markdown):
        text = re.sub(r"`[^`\n]+`", "", cell.source)     # code spans
        found = RAW.search(text)
        assert not found, f"markdown cell {i}: {found.group(0)!r}"
        for raw in ("{numref}", "{cite", "{eq}", ":::", "{solution",
                    ":label:"):
            assert raw not in text, f"markdown cell {i}: {raw!r}"
    shown = " ".join(" ".join(c.source.split()) for c in markdown)
    prose = folded_solution_prose(path)
    assert prose, "the launch notebook folds some solution prose"
    leaked = [p for p in prose if p in shown]
    assert not leaked, f"solution prose left: {leaked[:2]}"
    items = {i.label: i.exercise for i in made[path.stem].items}
    headed = [(lab, c) for c in markdown
              for lab in c.metadata.get(META, {}).get("exercises", [])]
    assert [lab for lab, _ in headed] == list(items)
    for label, cell in headed:
        ex = items[label]
        points = ex.points + ex.written_points
        number = INDEX.targets[label].number
        assert re.search(
            rf"^### Exercise {re.escape(number)}: {ex.kind}: .+ "
            rf"\({points:g} points?\)$", cell.source, re.M), (label,
                                                              cell.source)


def test_manifest_lists_each_exercise_with_its_declaration(built):
    out, made = built
    manifest = json.loads((out / "grader" / "manifest.json").read_text())
    found = asg.find_exercises()
    assert [ch["file"] for ch in manifest["chapters"]] == \
        [p.stem for p in CHAPTERS]
    for ch in manifest["chapters"]:
        for ex in ch["exercises"]:
            module, name, declared = found[ex["label"]]
            assert ex["ref"] == f"{module}:{name}" and ex["check"] == name
            # an Experiment without a large seed space carries its points
            # in the written part (auto-points 0)
            assert ex["points"] == declared.points >= 0
            assert declared.points + declared.written_points > 0
            assert ex["kind"] == declared.kind
            assert ex["answers"] == list(declared.answers)


def test_regenerating_gives_identical_bytes(built, tmp_path):
    out, _ = built
    asg.build(CHAPTERS, tmp_path)
    first = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    again = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")
                   if p.is_file())
    assert first == again and len(first) == len(CHAPTERS) + 1
    for rel in first:
        assert (out / rel).read_bytes() == (tmp_path / rel).read_bytes(), rel


# ------------------------------------------------------------ the stripping
def test_region_becomes_a_stub_at_its_indentation():
    source = ("def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x\n"
              "    ### END SOLUTION\n\nanswer = None\n### BEGIN SOLUTION\n"
              "answer = 3\n### END SOLUTION")
    assert asg.strip_regions(source) == (
        "def f(x):\n    y = 1\n    ...  # your code here\n\n"
        "answer = None\n...  # your code here")


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1", "never closed"),
    ("x = 1\n### END SOLUTION", "without"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "nested"),
])
def test_broken_regions_are_errors(source, message):
    with pytest.raises(asg.AssignmentError, match=message):
        asg.strip_regions(source)


def small_chapter(*extra):
    """A two-exercise chapter in the book's template (labels of chapter 1)."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md("(ch-definition)=\n# Definition\n\nText."),
        md("## Exercises\n\n:::{exercise}\n:label: ex-definition-tempered\n\n"
           "Do it.\n:::\n\n:::{solution-start} ex-definition-tempered\n"
           ":class: dropdown\n:::"),
        code("def my_tempered_attention(Q, K, V, tau):\n"
             "    ### BEGIN SOLUTION\n    return S\n"
             "    ### END SOLUTION", metadata={"tags": ["solution"]}),
        md("Why this works: the secret.\n"),
        md(":::{solution-end}\n:::\n\n:::{exercise}\n"
           ":label: ex-definition-limits\n\nAgain.\n:::\n\n"
           ":::{solution-start} ex-definition-limits\n:::"),
        code("def my_limits(Q, K, V):\n    ### BEGIN SOLUTION\n"
             "    return Q\n    ### END SOLUTION",
             metadata={"tags": ["solution"]}),
        md(":::{solution-end}\n:::"),
        code("checks.check_tempered_attention(my_tempered_attention)"),
        code("checks.check_limits(my_limits)"),
        *extra,
    ]
    return nbformat.v4.new_notebook(cells=cells)   # both checks at the end


def make(tmp_path, nb):
    path = tmp_path / "99_small.ipynb"
    nbformat.write(nb, path)
    found = {k: v for k, v in asg.find_exercises().items()
             if k in ("ex-definition-tempered", "ex-definition-limits")}
    return asg.make_assignment(path, found)


def test_gate_removes_solution_prose_and_keeps_exercise_text(tmp_path):
    nb = small_chapter()
    a = make(tmp_path, nb)
    text = "\n".join(c.source for c in a.student.cells)
    assert "the secret" not in text and "return S" not in text
    assert "Do it." in text and "Again." in text
    assert "solution-start" not in text and "solution-end" not in text


def test_solution_code_outside_a_tagged_cell_is_an_error(tmp_path):
    nb = small_chapter()
    nb.cells[2].metadata["tags"] = []
    with pytest.raises(asg.AssignmentError, match="not tagged 'solution'"):
        make(tmp_path, nb)


def test_solution_cell_without_a_region_is_an_error(tmp_path):
    nb = small_chapter()
    nb.cells[5].source = "def my_limits(Q, K, V):\n    return Q"
    with pytest.raises(asg.AssignmentError, match="has no"):
        make(tmp_path, nb)


def test_exercise_without_a_check_is_an_error(tmp_path):
    nb = small_chapter()
    path = tmp_path / "99_small.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(asg.AssignmentError, match="no Exercise"):
        asg.make_assignment(path, {})


def test_unclosed_gate_is_an_error(tmp_path):
    nb = small_chapter()
    del nb.cells[6:]                 # no solution-end, no checks
    with pytest.raises(asg.AssignmentError, match="never closed"):
        make(tmp_path, nb)


# ------------------------------------------------------------ instructors
def test_page_for_instructors_lists_every_exercise_with_its_points(built):
    _, made = built
    page = (ROOT / "appendices" / "instructors" / "exercises.md").read_text()
    block = page.split(asg.TABLE_START)[1].split(asg.TABLE_END)[0]
    rows = re.findall(r"^\| \{numref\}`([\w-]+)` `([\w-]+)` \| (\w+) \| "
                      r"([\d.]+) \|", block, re.M)
    listed = {label: (kind, float(points))
              for label, again, kind, points in rows if label == again}
    want = {i.label: (i.exercise.kind,           # code and written parts
                      i.exercise.points + i.exercise.written_points)
            for a in made.values() for i in a.items}
    missing = sorted(set(want) - set(listed))
    assert not missing, (
        f"exercises missing from appendices/instructors/exercises.md: "
        f"{missing}; run "
        f".venv/bin/selfattention-assign --update-page "
        f"appendices/instructors/exercises.md")
    assert not set(listed) - set(want), "the page lists removed exercises"
    assert listed == want, "kinds or points on the page differ"


def test_page_for_instructors_totals_each_chapter_as_declared(built):
    """The points-rule table of the page: each chapter's auto + written
    points in the "Now" column are those its exercises declare."""
    _, made = built
    page = (ROOT / "appendices" / "instructors" / "exercises.md").read_text()
    rows = re.findall(r"^\| \{numref\}`Chapter %s <(ch-[\w-]+)>` \| "
                      r"[\d.]+ \+ [\d.]+ \| ([\d.]+) \+ ([\d.]+) \|$",
                      page, re.M)
    listed = {label: (float(a), float(w)) for label, a, w in rows}
    want = {}
    for a in made.values():
        for i in a.items:
            chapter = "ch-" + i.label.split("-")[1]
            auto, written = want.get(chapter, (0.0, 0.0))
            want[chapter] = (auto + i.exercise.points,
                             written + i.exercise.written_points)
    assert listed == {ch: want[ch] for ch in listed} and set(listed) == set(
        want), "the page's points per chapter differ from the declarations"


def test_update_page_rewrites_only_the_table(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\n{asg.TABLE_START}\nold\n{asg.TABLE_END}\n"
                    f"\nAfter.\n")
    asg.update_page(page, "| new |")
    assert page.read_text() == (f"# Title\n\n{asg.TABLE_START}\n| new |\n"
                                f"{asg.TABLE_END}\n\nAfter.\n")
    page.write_text("no markers")
    with pytest.raises(asg.AssignmentError, match="markers"):
        asg.update_page(page, "| new |")



def test_pruning_removes_student_notebooks_of_removed_chapters(tmp_path):
    stale = tmp_path / "student" / "00_removed.ipynb"
    stale.parent.mkdir()
    stale.write_text("{}")
    asg.build(CHAPTERS[:1], tmp_path)
    assert stale.exists(), "a partial build keeps other notebooks"
    asg.build(CHAPTERS[:1], tmp_path, prune=True)
    assert not stale.exists()
    assert (tmp_path / "student" / CHAPTERS[0].name).exists()


def test_a_title_counts_the_written_part_in_its_points():
    from selfattention_exercises.core import Exercise

    ex = Exercise("ex-test-title", kind="Derive", points=2, answers=("a",),
                  judge=lambda out: None, written="Why?", written_points=1)
    asg.check_title("Derive: a thing (3 points)", ex, "here")
    for wrong in ("Derive: a thing (2 points)", "Prove: a thing (3 points)",
                  "Derive: a thing"):
        with pytest.raises(asg.AssignmentError):
            asg.check_title(wrong, ex, "here")


def test_the_sample_gradebook_on_the_instructors_page_is_current():
    import csv
    import io

    page = (Path(__file__).resolve().parents[2] / "appendices"
            / "instructors" / "workflow.md").read_text(encoding="utf-8")
    sample = page[page.index("**A sample gradebook.**"):]
    sample = sample[sample.index("```text\n") + 8:]
    rows = list(csv.DictReader(io.StringIO(sample[:sample.index("```")])))
    declared = asg.find_exercises()
    graded = [r for r in rows if r["exercise"]]
    assert len(graded) >= 20
    for row in graded:
        label = row["exercise"].removesuffix(" (written)")
        ex = declared[label][2]                   # a label that exists
        want = ex.written_points if row["exercise"].endswith("(written)") \
            else ex.points
        assert float(row["max_points"]) == want, row
        assert float(row["points"]) <= want
    assert all(row["diagnosis"] for row in rows)        # every row names one


def test_outside_a_checkout_the_command_says_where_it_runs(monkeypatch,
                                                           tmp_path, capsys):
    """An install without the book's tooling (the wheel leaves it out)
    stops before writing anything, saying that the command needs a
    checkout."""
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None
                        if name == "selfattention_book" else found(name, *a))
    with pytest.raises(SystemExit) as stop:
        asg.main(["--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and capsys.readouterr().err
    assert not (tmp_path / "out").exists()
