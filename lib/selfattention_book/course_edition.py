"""The course edition of the site: the book without its solutions.

``make book SOLUTIONS=hidden`` sets ``SELFATTENTION_SOLUTIONS=hidden`` for the
build, which turns this extension on. It then

* removes every solution from the pages, after sphinx-exercise has merged a
  gated solution (``{solution-start}`` … ``{solution-end}``) into one node,
  so the solution's prose, its code cells and their outputs go together
  (and never reach the search index);
* publishes no check's verdict: the stored outputs of every code cell that
  calls one of the exercises' checks are dropped before the notebook is
  read (the solved run's "Correct: ..." lines, which often print the
  answer itself), and any cell output left that still reads as a verdict
  (``[ex-...] Correct: ...``, whatever printed it) is removed from the
  page, so it reaches neither the HTML nor the search index;
* replaces the downloadable notebooks under ``_sources/`` with the student
  versions that ``selfattention-assign`` made (plain Jupyter, solutions
  absent), and an appendix notebook, which has no exercises, with its plain
  version;
* drops the launch buttons (Colab, Binder, JupyterHub, Live code), which
  would open the chapters with their solutions, and every block of prose
  that only the full site may show, a container (MyST ``{container}``) of
  class ``full-site-only``: prose about those buttons or about the
  repository's notebooks (which hold the solutions), and the instructors'
  sample gradebook, whose notes quote a written part's rubric. It goes from
  the pages and from the copies of the Markdown sources under
  ``_sources/``.

sphinx-exercise's own ``hide_solutions`` option cannot do this for gated
solutions: it drops the opening directive only, leaving the solution's code
cells and outputs on the page and an orphan closing node that the HTML
writer rejects.

The student notebooks and the names of the checks are read from the folder
that the instructors' ``selfattention-assign --out`` wrote, named by
``SELFATTENTION_ASSIGNMENTS`` (``make book SOLUTIONS=hidden`` writes it
under ``_build/course/assignments`` first): the grader makes them, and the
build reads its output rather than importing it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform

from .pages import chapter_of

ENV = "SELFATTENTION_SOLUTIONS"
#: The folder of ``selfattention-assign --out``: ``student/<chapter>.ipynb``
#: and ``grader/manifest.json``.
ASSIGNMENTS_ENV = "SELFATTENTION_ASSIGNMENTS"
#: Classes of the containers that the course edition leaves out.
FULL_SITE_ONLY = ("full-site-only",)


def verdict_pattern() -> re.Pattern:
    """A check's verdict as its feedback prints it: ``[label] Mark:``."""
    from selfattention_exercises.core import MARKS

    marks = "|".join(re.escape(m) for m in sorted(set(MARKS.values())))
    return re.compile(rf"\[ex-[\w-]+\]\s*(?:{marks})\b")


def assignments(config) -> Path:
    """The folder of ``selfattention-assign``'s output for this build."""
    folder = Path(config.course_assignments)
    if not (folder / "grader" / "manifest.json").is_file():
        raise FileNotFoundError(
            f"the course edition needs the student notebooks: run "
            f"selfattention-assign --out {folder} (make book SOLUTIONS=hidden "
            f"does), or set {ASSIGNMENTS_ENV} to such a folder")
    return folder


def check_names(folder: Path) -> set[str]:
    """The names students call to check an exercise (``check_...``), as
    the grader's manifest in ``folder`` lists them."""
    manifest = json.loads((folder / "grader" / "manifest.json")
                          .read_text(encoding="utf-8"))
    return {ex["check"] for chapter in manifest["chapters"]
            for ex in chapter["exercises"]}


def _calls_a_check(source: str, names: set[str]) -> bool:
    return any(re.search(rf"(?<![\w]){re.escape(n)}\s*\(", source)
               for n in names)


def without_verdicts(text: str, names: set[str], verdict: re.Pattern) -> str:
    """A notebook's JSON with no output in any cell that calls a check or
    prints a verdict (solutions are left to :class:`RemoveSolutions`)."""
    nb = json.loads(text)
    changed = False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code" or not cell.get("outputs"):
            continue
        source = "".join(cell.get("source", ""))
        printed = json.dumps(cell["outputs"], ensure_ascii=False)
        if _calls_a_check(source, names) or verdict.search(printed):
            cell["outputs"] = []
            changed = True
    return json.dumps(nb, ensure_ascii=False) if changed else text


def _source_read(app, docname: str, source: list) -> None:
    if not app.config.course_edition:
        return
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    names = check_names(assignments(app.config))
    source[0] = without_verdicts(source[0], names, verdict_pattern())


class RemoveVerdicts(SphinxTransform):
    """Drop any cell output that still reads as a check's verdict."""

    default_priority = 51

    def apply(self, **kwargs) -> None:
        if not self.config.course_edition:
            return
        verdict = verdict_pattern()
        for node in list(self.document.findall(nodes.container)):
            if "cell_output" not in node.get("classes", []):
                continue
            if verdict.search(node.astext()) and node.parent is not None:
                node.parent.remove(node)


class RemoveSolutions(SphinxTransform):
    """Delete solution nodes (after sphinx-exercise's merge, priority 10)."""

    default_priority = 50

    def apply(self, **kwargs) -> None:
        if not self.config.course_edition:
            return
        from sphinx_exercise.nodes import (solution_end_node, solution_node,
                                           solution_start_node)

        kinds = (solution_node, solution_start_node, solution_end_node)
        for node in list(self.document.findall(
                lambda n: isinstance(n, kinds))):
            node.parent.remove(node)


class RemoveFullSiteProse(SphinxTransform):
    """Delete the containers whose class is one of :data:`FULL_SITE_ONLY`."""

    default_priority = 50

    def apply(self, **kwargs) -> None:
        if not self.config.course_edition:
            return
        for node in list(self.document.findall(nodes.container)):
            if set(FULL_SITE_ONLY) & set(node.get("classes", [])) \
                    and node.parent is not None:
                node.parent.remove(node)


def without_full_site_prose(text: str) -> str:
    """A MyST source without its :data:`FULL_SITE_ONLY` containers: from a
    colon fence ``:::{container} <class>`` to the fence that closes it."""
    classes = "|".join(re.escape(c) for c in FULL_SITE_ONLY)
    block = re.compile(
        rf"^(?P<fence>:{{3,}})\{{container\}}[ \t]+(?:[\w-]+[ \t]+)*"
        rf"(?:{classes})(?=[ \t\n])[^\n]*\n.*?^(?P=fence)[ \t]*(?:\n|\Z)",
        re.M | re.S)
    return block.sub("", text)


def _from_environment(app, config) -> None:
    value = os.environ.get(ENV, "shown")
    if value not in ("shown", "hidden"):
        raise ValueError(f"{ENV} must be 'shown' or 'hidden', got {value!r}")
    config.course_edition = value == "hidden"
    config.course_assignments = os.environ.get(ASSIGNMENTS_ENV, "assignments")
    if config.course_edition:
        assignments(config)
        options = dict(config.html_theme_options or {})
        options["launch_buttons"] = {}
        config.html_theme_options = options


def _student_sources(app, exception) -> None:
    """Put the student version of each chapter under ``_sources/`` (for
    each of its pages), and the plain version of each appendix notebook."""
    if exception is not None or not app.config.course_edition:
        return
    if app.builder.format != "html":
        return
    import nbformat

    from .plain import BookIndex, plain_notebook

    students = assignments(app.config) / "student"
    index = BookIndex(Path(app.srcdir))
    sources = Path(app.outdir) / "_sources"
    for copied in sorted(sources.rglob("*.md")):
        text = copied.read_text(encoding="utf-8")
        kept = without_full_site_prose(text)
        if kept != text:
            copied.write_text(kept, encoding="utf-8")
    for copied in sorted(sources.rglob("*.ipynb")):
        original = Path(app.srcdir) / copied.relative_to(sources)
        chapter = chapter_of(original.relative_to(app.srcdir).with_suffix("")
                             .as_posix())
        if chapter:    # a further page of a chapter (book_pages)
            original = Path(app.srcdir) / f"{chapter}.ipynb"
        if not original.exists():
            copied.unlink()
            continue
        doc = index.doc(original)
        if doc in index.appendices:
            student = plain_notebook(nbformat.read(original, as_version=4),
                                     index, doc, solutions="absent")
        else:
            shutil.copyfile(students / original.name, copied)
            continue
        copied.write_text(nbformat.writes(student) + "\n", encoding="utf-8")


def setup(app):
    app.add_config_value("course_edition", False, "env")
    app.add_config_value("course_assignments", "assignments", "env")
    app.connect("config-inited", _from_environment)
    app.add_transform(RemoveSolutions)
    app.add_transform(RemoveVerdicts)
    app.add_transform(RemoveFullSiteProse)
    app.connect("source-read", _source_read)
    app.connect("build-finished", _student_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
