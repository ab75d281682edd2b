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
  versions that ``selfattention-assign`` makes (plain Jupyter, solutions
  absent), and an appendix notebook, which has no exercises, with its plain
  version;
* drops the launch buttons (Colab, Binder, JupyterHub, Live code), which
  would open the chapters with their solutions.

sphinx-exercise's own ``hide_solutions`` option cannot do this for gated
solutions: it drops the opening directive only, leaving the solution's code
cells and outputs on the page and an orphan closing node that the HTML
writer rejects.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform

from selfattention_course.pages import chapter_of

ENV = "SELFATTENTION_SOLUTIONS"


def verdict_pattern() -> re.Pattern:
    """A check's verdict as its feedback prints it: ``[label] Mark:``."""
    from selfattention_exercises.core import MARKS

    marks = "|".join(re.escape(m) for m in sorted(set(MARKS.values())))
    return re.compile(rf"\[ex-[\w-]+\]\s*(?:{marks})\b")


def _check_names() -> set[str]:
    """The names students call to check an exercise (``check_...``)."""
    from selfattention_course.assign import find_exercises

    return {name for _, name, _ in find_exercises().values()}


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
    source[0] = without_verdicts(source[0], _check_names(),
                                 verdict_pattern())


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


def _from_environment(app, config) -> None:
    value = os.environ.get(ENV, "shown")
    if value not in ("shown", "hidden"):
        raise ValueError(f"{ENV} must be 'shown' or 'hidden', got {value!r}")
    config.course_edition = value == "hidden"
    if config.course_edition:
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

    from selfattention_course.assign import find_exercises, make_assignment
    from selfattention_course.plain import BookIndex, plain_notebook

    exercises = find_exercises()
    index = BookIndex(Path(app.srcdir))
    sources = Path(app.outdir) / "_sources"
    for copied in sorted(sources.rglob("*.ipynb")):
        original = Path(app.srcdir) / copied.relative_to(sources)
        chapter = chapter_of(original.relative_to(app.srcdir).with_suffix("")
                             .as_posix())
        if chapter:    # a further page of a chapter (_ext/book_pages.py)
            original = Path(app.srcdir) / f"{chapter}.ipynb"
        if not original.exists():
            copied.unlink()
            continue
        doc = index.doc(original)
        if doc in index.appendices:
            student = plain_notebook(nbformat.read(original, as_version=4),
                                     index, doc, solutions="absent")
        else:
            student = make_assignment(original, exercises, index).student
        copied.write_text(nbformat.writes(student) + "\n", encoding="utf-8")


def setup(app):
    app.add_config_value("course_edition", False, "env")
    app.connect("config-inited", _from_environment)
    app.add_transform(RemoveSolutions)
    app.add_transform(RemoveVerdicts)
    app.connect("source-read", _source_read)
    app.connect("build-finished", _student_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
