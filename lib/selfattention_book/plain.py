"""The chapters as plain Jupyter: what Colab, Binder, JupyterHub and the
download button open, and what student notebooks are made from. The
appendices written as notebooks (``appendices/pytorch.ipynb``) go through the
same conversion, unnumbered.

The chapters are written in MyST for Jupyter Book: roles such as
``{numref}`` and ``{cite:p}``, labelled equations, ``(label)=`` targets and
``:::{exercise}`` directives. Plain Jupyter and Colab render CommonMark, so
they would show all of that as source text. :func:`plain_notebook` rewrites
one chapter for them:

* cross-references to chapters, figures, equations and exercises become
  linked text with the number the book gives them and a link to the page of
  the online book; citations become "(Vaswani et al., 2017)", linked to the
  references page; library names link to the library appendix;
* labelled equations keep their numbers (``\\tag``); targets disappear;
  the book's line-break hints (``\\allowbreak``, which the MathJax 3 of
  Jupyter and Colab lacks) go;
* exercises become headed blocks (the cell's metadata
  ``{"selfattention": {"exercises": [label, ...]}}`` names them for the
  grader), notes become quotes, figures get their numbered caption under
  them;
* solutions are folded (``solutions="folded"``: their prose in a
  ``<details>`` block, their code cells collapsed in JupyterLab, Notebook 7
  and Colab) or dropped with their prose (``solutions="absent"``: only the
  prose; the student notebooks' code cells are handled by
  :mod:`~selfattention_course.assign`, which converts its student version
  with this function);
* cells meant for the builder lose their maintainer notes, and a live widget
  shows its default figure until it runs.

:class:`BookIndex` finds every number the way Sphinx assigns it (chapters
in the order of ``_toc.yml``, sections, captioned figures, labelled
equations and exercises in page order); ``tests/book/test_plain_notebooks.py``
checks it against the built site.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from . import META
from .pages import pages

__all__ = ["Target", "BookIndex", "book_root", "plain_notebook",
           "plain_markdown"]

ROLE = re.compile(r"\{(numref|eq|ref|doc|cite:p|cite:t|cite:ps|cite:ts|cite"
                  r"|py:func|py:class|py:mod|py:meth|py:attr|py:data)\}"
                  r"`([^`]*)`")
TARGET = re.compile(r"^\(([\w.:-]+)\)=[ \t]*\n?", re.M)
LABELLED_MATH = re.compile(r"\$\$(.+?)\$\$[ \t]*\(([\w.:-]+)\)", re.S)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
FENCE_OPEN = re.compile(r"^(:{3,}|`{3,})\{([\w-]+)\}[ \t]*(.*)$")
OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
DEFAULT_FORMAT = {"figure": "Fig. %s", "section": "Section %s",
                  "chapter": "Chapter %s", "exercise": "Exercise %s",
                  "equation": "Eq. %s"}


@dataclass(frozen=True)
class Target:
    """One labelled thing of the book: its kind, number, page and title."""

    kind: str        # chapter, section, figure, equation or exercise
    number: str      # "2", "2.3", ...; "" for an unnumbered section
    doc: str         # the page, e.g. "chapters/02_scaling"
    anchor: str      # the HTML id on that page
    title: str       # heading text, caption or exercise title


TOKEN = re.compile(r"(?P<fence>^```(?!\{)[^\n]*\n.*?^```[ \t]*$)|"
                   r"(?P<role>" + ROLE.pattern + r")|(?P<code>`[^`\n]+`)",
                   re.M | re.S)


def _outside_code(text: str):
    """Split markdown into (kind, piece): kind is "code" for fenced blocks
    and inline code (left alone), "role" for a role, "" for the rest."""
    pieces, pos = [], 0
    for m in TOKEN.finditer(text):
        if m.start() > pos:
            pieces.append(("", text[pos:m.start()]))
        pieces.append(("role" if m.group("role") else "code", m.group(0)))
        pos = m.end()
    pieces.append(("", text[pos:]))
    return pieces


def _slug(text: str) -> str:
    text = re.sub(r"[^\w\s-]", "", text.lower())
    return re.sub(r"[\s_]+", "-", text).strip("-")


def _bib_entries(path: Path) -> dict[str, str]:
    """Citation key -> "Author et al., year" (the book's author-year style)."""
    from pybtex.database import parse_file

    out = {}
    for key, entry in parse_file(str(path)).entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor")
        names = [" ".join(p.last_names) for p in people or []]
        names = [re.sub(r"[{}]", "", n) for n in names]
        if not names:
            who = re.sub(r"[{}]", "", entry.fields.get("title", key))
        elif len(names) == 1:
            who = names[0]
        elif len(names) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        out[key] = (who, entry.fields.get("year", "n.d."))
    return out


def book_root(path: Path) -> Path | None:
    """The nearest folder above ``path`` that holds ``_toc.yml`` and
    ``_config.yml`` (the book's root), or None."""
    for folder in Path(path).resolve().parents:
        if (folder / "_toc.yml").is_file() and \
                (folder / "_config.yml").is_file():
            return folder
    return None


class BookIndex:
    """Numbers, titles and links of every label of the book, and citations.

    ``BookIndex(root)`` reads ``_toc.yml``, ``_config.yml`` (its
    ``html.baseurl`` is the online book), ``references.bib``, every
    chapter notebook under ``root`` (:attr:`chapters`, numbered in the order
    of the toc) and every notebook page of the toc's unnumbered parts
    (:attr:`appendices`, whose targets carry no number).
    """

    def __init__(self, root: Path | None):
        self.root = None if root is None else Path(root)
        self.references_doc = "appendices/references"
        self.library_doc = "appendices/library"
        self.targets: dict[str, Target] = {}
        self.chapters: list[str] = []
        #: Notebook pages of the unnumbered parts (appendices).
        self.appendices: list[str] = []
        #: Notebooks indexed by :meth:`include`, numbered after the book's.
        self.extra: list[str] = []
        if self.root is None:             # no book: only included notebooks
            self.baseurl, self.eq_format, self.bib = "", "Eq. {number}", {}
            return
        config = yaml.safe_load((self.root / "_config.yml").read_text())
        self.baseurl = config.get("html", {}).get("baseurl", "").rstrip("/")
        sphinx = config.get("sphinx", {}).get("config", {})
        self.eq_format = sphinx.get("math_eqref_format", "Eq. {number}")
        self.bib = _bib_entries(self.root / "references.bib")
        self.chapters, self.appendices = self._pages()
        for number, doc in enumerate(self.chapters, start=1):
            nb = nbformat.read(self.root / f"{doc}.ipynb", as_version=4)
            self._index(nb, doc, str(number))
        for doc in self.appendices:
            nb = nbformat.read(self.root / f"{doc}.ipynb", as_version=4)
            self._index(nb, doc, "")

    @classmethod
    def around(cls, path: Path) -> "BookIndex":
        """The index of the book a notebook lies in (:func:`book_root`);
        an index of no book if there is none."""
        return cls(book_root(path))

    def doc(self, path: Path) -> str:
        """The page name of a notebook: its path under the book's root
        without the suffix, or its stem if it lies outside the book."""
        path = Path(path).resolve()
        if self.root is not None and path.is_relative_to(
                self.root.resolve()):
            return path.relative_to(self.root.resolve()).with_suffix("") \
                .as_posix()
        return path.stem

    def include(self, nb, doc: str) -> None:
        """Index a notebook the table of contents does not list (an
        instructor's own chapter, a test's fixture), numbered after the
        book's chapters; a page of the book is left as it is."""
        if doc in self.chapters or doc in self.extra:
            return
        self.extra.append(doc)
        self._index(nb, doc, str(len(self.chapters) + len(self.extra)))

    def _pages(self) -> tuple[list[str], list[str]]:
        """The chapters (pages of numbered parts) and the notebook pages of
        the unnumbered parts, in the order of the toc."""
        toc = yaml.safe_load((self.root / "_toc.yml").read_text())
        chapters, appendices = [], []
        for part in toc.get("parts", []):
            for page in part["chapters"]:
                if part.get("numbered"):
                    chapters.append(page["file"])
                elif (self.root / f"{page['file']}.ipynb").is_file():
                    appendices.append(page["file"])
        return chapters, appendices

    def figure(self, doc: str, figure: dict) -> Target:
        """The target of a figure cell's ``mystnb.figure`` metadata."""
        for target in self.targets.values():
            if (target.kind == "figure" and target.title == figure["caption"]
                    and (target.doc == doc
                         or target.doc.startswith(f"{doc}/"))):
                return target
        raise KeyError(f"{doc}: a figure the index did not see")

    def chapter_number(self, doc: str) -> str:
        pages = self.chapters + self.extra
        return str(pages.index(doc) + 1)

    def _index(self, nb, doc: str, chapter: str) -> None:
        """Record the targets of ``nb``, page ``doc``, numbered within
        ``chapter``; an unnumbered page (``chapter=""``) numbers its figures,
        equations and exercises from 1 and its sections not at all."""
        def within(count) -> str:
            return f"{chapter}.{count}" if chapter else str(count)

        sections = [0, 0, 0, 0, 0, 0]
        figures = equations = exercises = 0
        pending: list[str] = []
        # A further page's "#" title is a section of the chapter, one level
        # below its "#" (selfattention_book.pages): 6.(k+1), 6.(k+1).1, ...
        cells = [(page.doc, 1 if n else 0, cell)
                 for n, page in enumerate(pages(nb, doc))
                 for cell in page.cells]
        for page_doc, shift, cell in cells:
            cell = nbformat.from_dict(cell)
            text = cell.source
            if cell.cell_type == "code":
                figure = cell.metadata.get("mystnb", {}).get("figure")
                if figure and figure.get("caption"):
                    figures += 1
                    name = figure.get("name") or f"fig-{doc}-{figures}"
                    self.targets[name] = Target(
                        "figure", within(figures), page_doc, name,
                        figure["caption"])
                continue
            if cell.cell_type != "markdown":
                continue
            code = "".join(p for kind, p in _outside_code(text)
                           if kind != "code")
            events = []
            for m in TARGET.finditer(code):
                events.append((m.start(), "target", m.group(1)))
            for m in HEADING.finditer(code):
                events.append((m.start(), "heading", m))
            for m in LABELLED_MATH.finditer(code):
                events.append((m.start(), "equation", m.group(2)))
            for m in FIGURE_DIRECTIVE.finditer(code):
                name = re.search(r"^:name:[ \t]*(\S+)", m.group(3), re.M)
                events.append((m.start(), "figure",
                               (name.group(1) if name else None,
                                m.group(4).strip())))
            for m in re.finditer(r"^(?::{3,}|`{3,})\{exercise\}[ \t]*(.*)\n"
                                 r"((?::[\w-]+:.*\n)*)", code, re.M):
                label = re.search(r"^:label:[ \t]*(\S+)", m.group(2), re.M)
                events.append((m.start(), "exercise",
                               (label.group(1) if label else None,
                                m.group(1).strip())))
            for _, kind, value in sorted(events, key=lambda e: e[0]):
                if kind == "target":
                    pending.append(value)
                elif kind == "heading":
                    level = len(value.group(1)) + shift
                    title = value.group(2)
                    if level == 1:
                        number, what = chapter, "chapter"
                    else:
                        sections[level - 1] += 1
                        for deeper in range(level, 6):
                            sections[deeper] = 0
                        number = ".".join([chapter] + [
                            str(n) for n in sections[1:level]]) \
                            if chapter else ""
                        what = "section"
                    for label in pending:
                        self.targets[label] = Target(what, number, page_doc,
                                                     label, title)
                    pending = []
                elif kind == "figure":
                    figures += 1
                    name, caption = value
                    name = name or f"fig-{doc}-{figures}"
                    self.targets[name] = Target(
                        "figure", within(figures), page_doc, name, caption)
                elif kind == "equation":
                    equations += 1
                    self.targets[value] = Target(
                        "equation", within(equations), page_doc,
                        f"equation-{value}", value)
                else:
                    exercises += 1
                    label, title = value
                    if label:
                        self.targets[label] = Target(
                            "exercise", within(exercises), page_doc,
                            label, title)

    # -- links --------------------------------------------------------------

    def url(self, doc: str, anchor: str = "") -> str:
        page = f"{self.baseurl}/{doc}.html"
        return f"{page}#{anchor}" if anchor else page

    def asset(self, doc: str, path: str) -> str:
        """The online URL of a file a page includes (``/_static/x.svg`` from
        the book's root, or relative to the page)."""
        if path.startswith(("http://", "https://")):
            return path
        if path.startswith("/"):
            return f"{self.baseurl}{path}"
        folder = doc.rsplit("/", 1)[0] if "/" in doc else ""
        parts = [p for p in f"{folder}/{path}".split("/") if p]
        out: list[str] = []
        for part in parts:
            if part == "..":
                out.pop()
            elif part != ".":
                out.append(part)
        return f"{self.baseurl}/{'/'.join(out)}"

    def link(self, text: str, target: Target) -> str:
        return f"[{text}]({self.url(target.doc, target.anchor)})"

    def target(self, label: str, where: str) -> Target:
        try:
            return self.targets[label]
        except KeyError:
            raise KeyError(f"{where}: unknown label {label!r}") from None

    def cite(self, keys: str, textual: bool, where: str) -> str:
        parts = []
        for key in (k.strip() for k in keys.split(",")):
            if key not in self.bib:
                raise KeyError(f"{where}: unknown citation {key!r}")
            who, year = self.bib[key]
            url = self.url(self.references_doc)
            parts.append(f"[{who} ({year})]({url})" if textual
                         else f"[{who}, {year}]({url})")
        return "; ".join(parts) if textual else f"({'; '.join(parts)})"


def _split_explicit(text: str) -> tuple[str | None, str]:
    m = re.fullmatch(r"(.*?)\s*<([^<>]+)>", text, re.S)
    return (m.group(1), m.group(2)) if m else (None, text)


def _role(index: BookIndex, doc: str, role: str, content: str) -> str:
    where = f"{doc}: {{{role}}}`{content}`"
    if role.startswith("cite"):
        textual = "t" in role.split(":")[-1]
        return index.cite(content, textual=textual, where=where)
    if role.startswith("py:"):
        shown = content.lstrip("~")
        name = shown.split(".")[-1] if content.startswith("~") else shown
        if role in ("py:func", "py:meth"):
            name += "()"
        return f"[`{name}`]({index.url(index.library_doc, shown)})"
    text, label = _split_explicit(content)
    if role == "doc":
        page = label if "/" in label else label
        return f"[{text or label}]({index.url(page.lstrip('/'))})"
    target = index.target(label, where)
    if role == "eq":
        shown = text or index.eq_format.replace("{number}", target.number)
        return index.link(shown, target)
    if role == "ref":
        return index.link(text or target.title, target)
    fmt = text or DEFAULT_FORMAT[target.kind]
    shown = (fmt.replace("%s", target.number)
             .replace("{number}", target.number)
             .replace("{name}", target.title))
    return index.link(shown, target)


def _inline(index: BookIndex, doc: str, text: str) -> str:
    def tagged(m):
        target = index.target(m.group(2), doc)
        return f"$${m.group(1).rstrip()} \\tag{{{target.number}}}$$"

    out = []
    for kind, piece in _outside_code(text):
        if kind == "code":
            out.append(piece)
        elif kind == "role":
            m = ROLE.fullmatch(piece)
            out.append(_role(index, doc, m.group(1), m.group(2)))
        else:
            # the book's MathJax 4 may break a display equation at
            # \allowbreak; the MathJax 3 of Jupyter and Colab does not know it
            piece = piece.replace("\\allowbreak", "")
            out.append(TARGET.sub("", LABELLED_MATH.sub(tagged, piece)))
    return "".join(out)


def _quote(text: str) -> str:
    return "\n".join(("> " + line).rstrip() for line in text.split("\n"))


class _Directives:
    """Rewrites the colon and backtick directive fences of one piece of
    markdown: exercises become headed blocks, admonitions quotes."""

    def __init__(self, index: BookIndex, doc: str):
        self.index, self.doc = index, doc
        self.exercises: list[str] = []    # labels of the exercises seen

    def convert(self, text: str) -> str:
        lines = text.split("\n")
        out: list[str] = []
        stack: list[tuple[str, str, list[str]]] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            m = FENCE_OPEN.match(line)
            if m:
                fence, name, argument = m.group(1), m.group(2), m.group(3)
                options, i = {}, i + 1
                while i < len(lines) and OPTION.match(lines[i]):
                    key, value = OPTION.match(lines[i]).groups()
                    options[key] = value
                    i += 1
                stack.append((fence, name, self._head(name, argument,
                                                      options)))
                continue
            if stack and line.strip() == stack[-1][0]:
                _, name, body = stack.pop()
                self._close(name, body, stack[-1][2] if stack else out)
                i += 1
                continue
            (stack[-1][2] if stack else out).append(line)
            i += 1
        while stack:                       # unclosed: keep the body as text
            _, name, body = stack.pop()
            self._close(name, body, stack[-1][2] if stack else out)
        return "\n".join(out)

    def _head(self, name, argument, options) -> list[str]:
        if name == "exercise":
            label = options.get("label")
            number = (self.index.target(label, self.doc).number
                      if label else "")
            if label:
                self.exercises.append(label)
            return [f"### Exercise {number}: {argument}".rstrip(), ""]
        if name in ADMONITIONS:
            return [f"**{argument or name.capitalize()}**", ""]
        if name == "figure":
            label = options.get("name")
            number = self.index.target(label, self.doc).number if label \
                else ""
            alt = options.get("alt", "").replace("]", ")").replace("[", "(")
            url = self.index.asset(self.doc, argument.strip())
            return [f"![{alt}]({url})", "", f"*Fig. {number}.* "]
        return []

    @staticmethod
    def _close(name, body, parent) -> None:
        if name in ADMONITIONS:
            parent.append(_quote("\n".join(body).strip("\n")))
        elif name == "figure":            # the caption after "Fig. N."
            head, caption = body[:2], " ".join(
                line.strip() for line in body[3:] if line.strip())
            parent.extend(head + [f"{body[2]}*{caption}*".replace("**", "")])
        else:
            parent.extend(body)


FIGURE_DIRECTIVE = re.compile(
    r"^(:{3,}|`{3,})\{figure\}[ \t]*(\S+)[ \t]*\n((?::[\w-]+:.*\n)*)"
    r"(.*?)^\1[ \t]*$", re.M | re.S)
ADMONITIONS = ("note", "admonition", "tip", "warning", "important", "seealso")
SOLUTION_FENCE = re.compile(
    r"^(:{3,}|`{3,})\{solution-(start|end)\}[ \t]*(\S*)[ \t]*\n"
    r"(?::[\w-]+:.*\n)*\1[ \t]*$", re.M)


def _plain(text: str, index: BookIndex, doc: str) -> tuple[str, list[str]]:
    """:func:`plain_markdown`, and the labels of the exercises it holds."""
    directives = _Directives(index, doc)
    out = _inline(index, doc, directives.convert(text)).strip("\n")
    return out, directives.exercises


def plain_markdown(text: str, index: BookIndex, doc: str) -> str:
    """One piece of markdown (no solution fences) as plain CommonMark with
    links."""
    return _plain(text, index, doc)[0]


_MAINTAINER = re.compile(r"^[ \t]*#.*(nbval|the book shows|remove-cell"
                         r"|remove-output).*\n?", re.M | re.I)
_WIDGET = "application/vnd.jupyter.widget-view+json"


def _last_figure(cells) -> list:
    for cell in reversed(cells):
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                figure = copy.deepcopy(output)
                figure["output_type"] = "display_data"
                figure.pop("execution_count", None)
                figure["data"] = {"image/png": output["data"]["image/png"],
                                  "text/plain": "<the figure's default state>"}
                return [figure]
    return []


def _md(text: str, cell_id: str, metadata=None):
    # A fixed id (nbformat would draw a random one), so that the same chapter
    # gives the same notebook, byte for byte.
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = cell_id
    if metadata:
        cell.metadata = copy.deepcopy(metadata)
    return cell


def _solution_parts(raw: str, inside: str | None, index, doc):
    """Split a markdown cell at its solution fences: a list of
    (exercise number or None, markdown) and the state after the cell."""
    parts, pos = [], 0
    for m in SOLUTION_FENCE.finditer(raw):
        parts.append((inside, raw[pos:m.start()]))
        inside = (index.target(m.group(3), doc).number
                  if m.group(2) == "start" else None)
        pos = m.end()
    parts.append((inside, raw[pos:]))
    return parts, inside


def _fold(cell, title: str) -> None:
    """Collapse a code cell: JupyterLab and Notebook 7 read
    ``jupyter.source_hidden``, Colab shows a ``#@title`` form instead."""
    cell.source = f"#@title {title}\n" + cell.source
    cell.metadata["cellView"] = "form"
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def plain_notebook(nb, index: BookIndex, doc: str, solutions: str = "folded"):
    """The chapter ``nb`` (page ``doc`` of the book) as a plain notebook;
    an appendix (``doc`` in ``index.appendices``) keeps its unnumbered title.

    ``solutions`` is ``"folded"`` (launch and download notebooks) or
    ``"absent"`` (the solutions' prose dropped, for student notebooks).
    """
    if solutions not in ("folded", "absent"):
        raise ValueError(f"solutions must be 'folded' or 'absent', "
                         f"got {solutions!r}")
    nb = copy.deepcopy(nb)
    appendix = doc in index.appendices
    number = "" if appendix else index.chapter_number(doc)
    inside: str | None = None
    cells = []
    for i, cell in enumerate(nb.cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown":
            parts, inside = _solution_parts(cell.source, inside, index, doc)
            texts, labels = [], []
            for exercise, raw in parts:
                text, found = _plain(raw, index, doc)
                if not text:
                    continue
                if exercise is None:
                    texts.append(text)
                    labels += found
                elif solutions == "folded":
                    texts.append(f"<details>\n<summary>Solution to Exercise "
                                 f"{exercise}</summary>\n\n{text}\n\n"
                                 f"</details>")
            if i == 0 and texts and appendix:
                texts.insert(1, f"*An appendix of the online book "
                                f"[Self-Attention in Vision]"
                                f"({index.url(doc)}), where this "
                                f"notebook's links lead.*")
            elif i == 0 and texts:
                texts[0] = re.sub(r"^# ", f"# {number}. ", texts[0],
                                  count=1, flags=re.M)
                if doc in index.chapters:
                    texts.insert(1, f"*Chapter {number} of the online book "
                                    f"[Self-Attention in Vision]"
                                    f"({index.url(doc)}), where this "
                                    f"notebook's links lead.*")
            if inside and solutions == "folded":
                texts.append(f"**Solution to Exercise {inside}**: the code "
                             f"cells below are folded; open them to read.")
            if texts:
                meta = copy.deepcopy(cell.metadata)
                if labels:                # what the grader recognises
                    mine = meta.get(META)
                    mine = dict(mine) if isinstance(mine, dict) else {}
                    mine["exercises"] = labels
                    meta[META] = mine
                cells.append(_md("\n\n".join(texts),
                                 cell.get("id", f"cell-{i}"), meta))
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        if "remove-cell" in tags:
            if "google.colab" not in cell.source:
                continue
            _fold(cell, "Colab only: install the companion package")
        cell.source = _MAINTAINER.sub("", cell.source)
        if any(_WIDGET in o.get("data", {}) for o in cell.get("outputs", [])):
            cell.outputs = _last_figure(cells)
        if inside and solutions == "folded":
            _fold(cell, f"Solution to Exercise {inside}")
        cells.append(cell)
        figure = cell.metadata.get("mystnb", {}).get("figure")
        if figure and figure.get("caption"):
            target = index.figure(doc, figure)
            cells.append(_md(f"*Fig. {target.number}. "
                             f"{_inline(index, doc, figure['caption'])}*",
                             f"{cell.get('id', i)}-caption"))
    nb.cells = cells
    return nb
