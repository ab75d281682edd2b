"""A reveal.js deck per chapter, made from the chapter and a short outline.

**What a deck holds.** Each chapter ``chapters/NN_name.ipynb`` has an outline
``slides/NN_name.yml`` (beside ``_toc.yml``): a list of slides, each of which
names a piece of the chapter rather than copying it, so the deck follows
every edit of the chapter.

* ``lead: <a section's heading>``: the section's first paragraph;
* ``equation: <label>``: a labelled equation, typeset with its number, after
  the sentence that introduces it;
* ``figure: <label>``: a figure, the very image the chapter prints (or the
  diagram it shows), with its numbered caption;
* ``check: <cell id>``: a code cell and what it prints;
* ``summary: true``: the bullets of the chapter's summary;
* ``points: [...]``: bullets of the instructor's own;

each with an optional ``title`` (else the section's heading) and ``notes``
(speaker notes, shown by reveal.js's speaker view, key ``S``). The first
slide, the chapter's title and summary sentence, is always there. A lead
paragraph that ends without a full stop, with a colon ("Before the first
block:") or mid-sentence ("The score is a sum of $d_k$ products,"), is never
left hanging: the list, or the equation, figure or check of the next entry,
that it leads into is set under it on one slide; else its last sentence is
left out.
:func:`default_outline` proposes an outline (``python -m
selfattention_book.slides outline chapters/NN_name.ipynb``); an instructor
edits it by deleting, reordering or adding lines. A name that no longer
exists in the chapter stops the build with the outline's file and line.

**The tool.** reveal.js 5.2, the copy that the PyPI wheel
``sphinx-revealjs`` ships as package data (only its files are used, not its
Sphinx builder), and MathJax 3 from ``django-static-mathjax``, the book's
own: a deck loads nothing from another host and needs no Node. The
chapters' MyST (roles, labelled equations, directives) goes through the
plain-notebook conversion (:func:`~selfattention_book.plain.plain_markdown`)
and then markdown-it, so references read "Fig. 1.2" and link to the book.
Quarto's reveal.js output and ``nbconvert --to slides`` read the notebook's
cells as Markdown without MyST, so each would show the roles and
directives as source text; both would also make every cell a slide.

Slides are 1280 x 720 pixels (reveal.js scales them to the window);
``tests/e2e/test_slides.py`` opens every deck in Chromium and fails on a slide
that overflows that box.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

# The MyST-to-plain conversion is book tooling that still lives with the
# course package; it moves to selfattention_book with the package split.
from .plain import BookIndex, plain_markdown

__all__ = ["Chapter", "Deck", "OutlineError", "chapter_outline",
           "default_outline", "build_deck", "write_decks", "outline_path",
           "WIDTH", "HEIGHT", "DECKS"]

#: The slide box, in CSS pixels.
WIDTH, HEIGHT = 1280, 720
#: Folder of the outlines, beside ``_toc.yml``; also the decks' folder in
#: the site (``<site>/slides/NN_name.html``).
DECKS = "slides"
#: Sections after which a chapter is practice, not lecture.
PRACTICE = re.compile(r"^(try it|exercises)\b", re.I)
SUMMARY = re.compile(r"^summary\b", re.I)
HEADING2 = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.M)
TITLE = re.compile(r"^#[ \t]+(.+?)[ \t]*$", re.M)
TARGET = re.compile(r"^\(([\w.:-]+)\)=[ \t]*$", re.M)
LABELLED_MATH = re.compile(r"\$\$(.+?)\$\$[ \t]*\(([\w.:-]+)\)", re.S)
FIGURE_DIRECTIVE = re.compile(
    r"^(:{3,}|`{3,})\{figure\}[ \t]*(\S+)[ \t]*\n(.*?)^\1[ \t]*$", re.M | re.S)
OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$", re.M)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z({])")
KINDS = ("lead", "equation", "figure", "check", "summary", "points")
#: A printed check goes on a slide if it is at most this many lines of
#: code and of output, and this many characters wide.
CHECK_LINES, CHECK_WIDTH = 12, 96
#: At most this many printed lines; a longer cell's code is left out.
PRINTED_LINES = 16
#: Under the paragraph that announces it, a check shows its code only if
#: code and output are at most this many lines.
ANNOUNCED_LINES = 10
#: A lead's line on a slide, in pixels (30 px type, line height 1.35).
LEAD_LINE = 41
#: How many slides a proposed outline aims at (an hour's lecture).
FEWEST, MOST = 15, 25
REVEAL_FILES = ("dist/reset.css", "dist/reveal.css", "dist/reveal.js",
                "dist/theme/white.css", "plugin/notes/notes.js", "LICENSE")
#: The white theme's typeface (its CSS imports it).
REVEAL_FOLDERS = ("dist/theme/fonts/source-sans-pro",)


class OutlineError(ValueError):
    """An outline names something its chapter does not have."""


# ---------------------------------------------------------------- chapter
@dataclass
class Block:
    """A piece of a chapter: markdown text, or one code cell."""

    kind: str              # "markdown" or "code"
    text: str              # the markdown, or the code cell's source
    cell: dict


@dataclass
class Section:
    heading: str
    blocks: list[Block] = field(default_factory=list)

    def markdown(self) -> str:
        return "\n\n".join(b.text for b in self.blocks if b.kind == "markdown")


@dataclass
class Chapter:
    """A chapter notebook cut at its ``##`` headings."""

    doc: str               # "chapters/01_definition"
    label: str             # "ch-definition"
    title: str             # MyST source of the ``#`` heading
    intro: str             # the markdown between the title and section 1
    sections: list[Section]
    cells: dict[str, dict]  # code cells by id

    @classmethod
    def read(cls, root: Path, doc: str) -> "Chapter":
        nb = nbformat.read(Path(root) / f"{doc}.ipynb", as_version=4)
        title, label, intro = "", "", []
        sections: list[Section] = []
        cells = {}
        for cell in nb.cells:
            source = "".join(cell.source)
            if cell.cell_type == "code":
                cells[cell.get("id", "")] = cell
                if sections and "remove-cell" not in cell.metadata.get(
                        "tags", []):
                    sections[-1].blocks.append(Block("code", source, cell))
                continue
            if cell.cell_type != "markdown":
                continue
            if not title:
                found = TITLE.search(source)
                if found:
                    title = found.group(1)
                    before = TARGET.findall(source[:found.start()])
                    label = before[-1] if before else ""
                    source = source[found.end():]
            pieces = HEADING2.split(source)
            # pieces: text before the first heading, then heading, text...
            head, rest = pieces[0], pieces[1:]
            head = TARGET.sub("", head).strip()
            if head:
                if sections:
                    sections[-1].blocks.append(Block("markdown", head, cell))
                else:
                    intro.append(head)
            for heading, text in zip(rest[::2], rest[1::2]):
                section = Section(heading)
                text = TARGET.sub("", text).strip()
                if text:
                    section.blocks.append(Block("markdown", text, cell))
                sections.append(section)
        if not title:
            raise OutlineError(f"{doc}.ipynb has no '# ' title")
        return cls(doc, label, title, "\n\n".join(intro), sections, cells)

    def section(self, heading: str) -> Section:
        for section in self.sections:
            if section.heading == heading:
                return section
        raise KeyError(heading)

    def lecture(self) -> list[Section]:
        """The sections before the practice part (Try it, Exercises)."""
        out = []
        for section in self.sections:
            if PRACTICE.match(section.heading):
                break
            out.append(section)
        return out

    def summary(self) -> Section | None:
        return next((s for s in self.sections if SUMMARY.match(s.heading)),
                    None)


def _paragraphs(markdown: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n[ \t]*\n", markdown) if p.strip()]


def _is_prose(paragraph: str) -> bool:
    return not re.match(r"(\$\$|:::|```|[-*] |\d+\. |\||!\[|<)", paragraph)


def _shortened(paragraph: str, most: int) -> str:
    """Whole sentences of ``paragraph`` up to about ``most`` characters (at
    least one), outside math."""
    if len(paragraph) <= most:
        return paragraph
    out = ""
    for sentence in _sentences(paragraph):
        if out and len(out) + len(sentence) + 1 > most:
            break
        out = f"{out} {sentence}".strip()
    return out


def _sentences(paragraph: str) -> list[str]:
    """Split at sentence ends that are not inside ``$...$`` or a role."""
    out, start, depth = [], 0, 0
    for m in SENTENCE_END.finditer(paragraph):
        chunk = paragraph[start:m.start()]
        depth = chunk.count("$") + chunk.count("`")
        if depth % 2 == 0 and not chunk.endswith(("e.g.", "i.e.", "cf.",
                                                  "et al.")):
            out.append(chunk.strip())
            start = m.end()
    out.append(paragraph[start:].strip())
    return [s for s in out if s]


# ---------------------------------------------------------------- outline
def outline_path(root: Path, doc: str) -> Path:
    """``slides/NN_name.yml`` for ``chapters/NN_name``."""
    return Path(root) / DECKS / f"{Path(doc).name}.yml"


def _printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", [])
                   if o.output_type == "stream").rstrip()


def _shows_code(cell) -> bool:
    """Whether a check's slide has room for its code above its output."""
    code = "".join(cell.source).rstrip().splitlines()
    printed = _printed(cell).splitlines()
    return (len(code) <= CHECK_LINES and len(code) + len(printed) <= 22
            and max(map(len, code), default=0) <= CHECK_WIDTH)


def _check_cell_fits(cell) -> bool:
    """Whether a code cell's printed text makes a slide: it prints only
    text, at most :data:`PRINTED_LINES` lines :data:`CHECK_WIDTH` wide."""
    if any(o.output_type != "stream" for o in cell.get("outputs", [])):
        return False
    printed = _printed(cell).splitlines()
    return (0 < len(printed) <= PRINTED_LINES
            and max(map(len, printed)) <= CHECK_WIDTH)


def _figure_labels(block: Block) -> list[str]:
    if block.kind == "code":
        name = block.cell.metadata.get("mystnb", {}).get("figure", {}).get(
            "name")
        has_image = any("image/png" in o.get("data", {})
                        for o in block.cell.get("outputs", []))
        return [name] if name and has_image else []
    out = []
    for m in FIGURE_DIRECTIVE.finditer(block.text):
        options = dict(OPTION.findall(m.group(3)))
        if "name" in options:
            out.append(options["name"])
    return out


def default_outline(chapter: Chapter) -> list[dict]:
    """A proposed outline: per lecture section, its lead paragraph, its
    labelled equations and figures, and its short printed checks; then the
    summary. Checks go first, then leads, when there are more than
    :data:`MOST` slides."""
    proposed: list[tuple[int, dict]] = []     # (priority, entry)
    for section in chapter.lecture():
        prose = [p for p in _paragraphs(section.markdown()) if _is_prose(p)]
        if prose:
            proposed.append((1, {"lead": section.heading}))
        for block in section.blocks:
            if block.kind == "markdown":
                for m in LABELLED_MATH.finditer(block.text):
                    proposed.append((0, {"equation": m.group(2)}))
            for label in _figure_labels(block):
                proposed.append((0, {"figure": label}))
            if block.kind == "code" and _check_cell_fits(block.cell):
                proposed.append((2, {"check": block.cell.get("id")}))
    if chapter.summary() is not None:
        proposed.append((0, {"summary": True}))
    for dropped in (2, 1):
        if len(proposed) + 1 <= MOST:
            break
        extra = len(proposed) + 1 - MOST
        drop = [i for i, (p, _) in enumerate(proposed) if p == dropped]
        drop = set(drop[len(drop) - extra:] if extra < len(drop) else drop)
        proposed = [e for i, e in enumerate(proposed) if i not in drop]
    return [entry for _, entry in proposed]


def outline_text(chapter: Chapter, entries: list[dict]) -> str:
    head = (f"# Slides of {chapter.doc}.ipynb ({chapter.label}), built by "
            "`make slides`.\n# One entry per slide, after the title slide (a "
            "lead ending with a colon or\n# mid-sentence shares its slide "
            "with the next entry when that is what it\n# leads into); each "
            "names a piece of the chapter:\n#   lead: <section heading>"
            "  equation: <label>  figure: <label>\n#   check: <code cell id>"
            "  summary: true  points: [bullets of your own]\n# Optional on "
            "each: title: <heading>, notes: <speaker notes>.\n"
            "# See lib/selfattention_book/slides.py.\n")
    return head + yaml.safe_dump(entries, sort_keys=False, allow_unicode=True,
                                 width=76)


def chapter_outline(root: Path, doc: str) -> list[dict]:
    """The entries of the outline of ``doc``; :class:`OutlineError` if it
    is missing or malformed."""
    path = outline_path(root, doc)
    if not path.is_file():
        raise OutlineError(
            f"{doc} has no slide outline {path.relative_to(root)}: write one "
            f"with `python -m selfattention_book.slides outline {doc}.ipynb`")
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(entries, list):
        raise OutlineError(f"{path}: expected a list of slides")
    for number, entry in enumerate(entries, start=1):
        kinds = [k for k in KINDS if isinstance(entry, dict) and k in entry]
        if len(kinds) != 1:
            raise OutlineError(
                f"{path}, slide entry {number}: expected exactly one of "
                f"{', '.join(KINDS)}, got {entry!r}")
    return entries


# ------------------------------------------------------------------ deck
@dataclass
class Slide:
    kind: str
    title: str
    body: str              # HTML
    notes: str = ""


@dataclass
class Deck:
    doc: str
    title: str
    slides: list[Slide]
    assets: dict[str, bytes]      # file name (under the deck's folder) -> data

    @property
    def name(self) -> str:
        return Path(self.doc).name


class _Renderer:
    """MyST of one chapter to the HTML of a slide."""

    def __init__(self, index: BookIndex, doc: str, book_url: str):
        self.index, self.doc = index, doc
        self.book_url = book_url.rstrip("/")
        md = MarkdownIt("commonmark", {"html": True}).enable("table")
        self.md = md.use(dollarmath_plugin, double_inline=True,
                         allow_labels=False, renderer=self._math)

    @staticmethod
    def _math(content: str, options: dict) -> str:
        content = html.escape(content.strip())
        if options.get("display_mode"):
            return f"\\[{content}\\]"
        return f"\\({content}\\)"

    def plain(self, myst: str) -> str:
        text = plain_markdown(myst, self.index, self.doc)
        base = self.index.baseurl
        if base and self.book_url != base:
            text = text.replace(base + "/", self.book_url + "/")
        return text

    def block(self, myst: str) -> str:
        return self.md.render(self.plain(myst))

    def inline(self, myst: str) -> str:
        return self.md.renderInline(self.plain(myst))


def _code_html(source: str) -> str:
    return highlight(source, PythonLexer(),
                     HtmlFormatter(nowrap=False, noclasses=True,
                                   style="default", cssclass="sa-code"))


def _lines(text: str, per_line: int) -> int:
    return sum(max(1, math.ceil(len(p) / per_line))
               for p in text.splitlines() or [""])


class _DeckBuilder:
    def __init__(self, root: Path, index: BookIndex, chapter: Chapter,
                 book_url: str):
        self.root, self.index, self.chapter = root, index, chapter
        self.r = _Renderer(index, chapter.doc, book_url)
        self.assets: dict[str, bytes] = {}
        self.book_url = book_url.rstrip("/")

    def number(self, label: str) -> str:
        target = self.index.targets.get(label)
        return target.number if target else ""

    def heading_of(self, predicate) -> str:
        for section in self.chapter.sections:
            for block in section.blocks:
                if predicate(block):
                    return section.heading
        return ""

    # each kind: (title, body html)
    def lead(self, heading: str, then: dict | None = None):
        """The section's first paragraph; ``then`` is the outline's next
        entry. A paragraph that ends with a colon, or mid-sentence, leads
        into what follows it in the chapter: a list is set under it; an
        equation, figure or check that is also the next entry is set under
        it on the same slide (the third item of the result says so).
        Otherwise its last sentence is left out (what it leads into, such
        as the library's code, is not on the slide), unless it is the whole
        paragraph: then the equation, figure or check joins it."""
        try:
            section = self.chapter.section(heading)
        except KeyError:
            raise OutlineError(f"no section headed {heading!r}") from None
        prose = [p for p in _paragraphs(section.markdown()) if _is_prose(p)]
        if not prose:
            raise OutlineError(f"section {heading!r} has no paragraph")
        text = _shortened(prose[0], 520)
        # A shortened paragraph ends with a sentence's full stop: only a
        # whole paragraph can run on.
        announced = _announced(section, text) if _runs_on(text) else None
        joined, shown = False, ""
        if announced and announced[0] == "list":
            text += "\n\n" + announced[1]
        elif _runs_on(text):
            last = _sentences(text)[-1]
            joined = announced is not None and then is not None and \
                then.get(announced[0]) == announced[1]
            if announced and (joined or last == text):
                shown = self.announced(*announced, self.r.block(text))
            elif last != text:
                text = text[:text.rindex(last)].rstrip()
        body = f'<div class="sa-lead">{self.r.block(text)}</div>{shown}'
        return heading, body, joined

    def announced(self, kind: str, key: str, lead: str) -> str:
        """The HTML of an equation, figure or check set under ``lead``."""
        if kind == "equation":
            return self.equation(key, context=False)[1]
        if kind == "figure":
            text = re.sub(r"<[^>]+>", "", lead)
            return self.figure(key, room=LEAD_LINE * _lines(text, 78) + 14)[1]
        return self.check(key, announced=True)[1]

    def equation(self, label: str, context: bool = True):
        """A labelled equation, after the sentence that introduces it
        (``context``)."""
        for section in self.chapter.sections:
            for block in section.blocks:
                if block.kind != "markdown":
                    continue
                for m in LABELLED_MATH.finditer(block.text):
                    if m.group(2) != label:
                        continue
                    before = _paragraphs(block.text[:m.start()])
                    lead = ""
                    if context and before and _is_prose(before[-1]):
                        last = _sentences(before[-1])
                        lead = last[-1] if last else ""
                        if len(lead) > 260:
                            lead = ""
                    body = ""
                    if lead:
                        body += (f'<div class="sa-context">'
                                 f'{self.r.block(lead)}</div>')
                    body += (f'<div class="sa-equation">'
                             f'{self.r.block(m.group(0))}</div>')
                    return section.heading, body
        raise OutlineError(f"no equation labelled {label!r}")

    def figure(self, label: str, room: int = 0):
        """A figure, its image ``room`` pixels shorter than a slide of its
        own allows."""
        number = self.number(label)
        for section in self.chapter.sections:
            for block in section.blocks:
                if label not in _figure_labels(block):
                    continue
                if block.kind == "code":
                    return section.heading, self._cell_figure(
                        block.cell, label, number, room)
                return section.heading, self._directive_figure(
                    block.text, label, number, room)
        raise OutlineError(f"no figure labelled {label!r}")

    def _figure_html(self, src: str, alt: str, caption_myst: str,
                     number: str, aspect: float, room: int = 0) -> str:
        caption = self.r.inline(caption_myst)
        text = re.sub(r"<[^>]+>", "", caption)
        if aspect < 1.7:   # image left, caption right (about 34 a line)
            height, cls = 580, "sa-figure sa-side"
        else:              # caption under the image (about 110 a line)
            height, cls = 570 - 29 * _lines(text, 110), "sa-figure"
        height = max(height - room, 240)
        return (f'<figure class="{cls}"><img src="{html.escape(src)}" '
                f'alt="{html.escape(alt)}" style="height:{height}px">'
                f'<figcaption><span class="sa-fignum">Fig. {number}</span> '
                f"{caption}</figcaption></figure>")

    def _cell_figure(self, cell, label: str, number: str,
                     room: int = 0) -> str:
        meta = cell.metadata.get("mystnb", {})
        png = next(o["data"]["image/png"] for o in cell.outputs
                   if "image/png" in o.get("data", {}))
        data = base64.b64decode(png)
        name = f"{self.chapter.doc.split('/')[-1]}/{label}.png"
        self.assets[name] = data
        width, height = _png_size(data)
        return self._figure_html(
            name, meta.get("image", {}).get("alt", ""),
            meta.get("figure", {}).get("caption", ""), number,
            width / max(height, 1), room)

    def _directive_figure(self, text: str, label: str, number: str,
                          room: int = 0) -> str:
        for m in FIGURE_DIRECTIVE.finditer(text):
            options = dict(OPTION.findall(m.group(3)))
            if options.get("name") != label:
                continue
            path = m.group(2)
            source = (self.root / path.lstrip("/")) if path.startswith("/") \
                else (self.root / self.chapter.doc).parent / path
            data = source.read_bytes()
            name = f"{self.chapter.doc.split('/')[-1]}/{source.name}"
            self.assets[name] = data
            caption = OPTION.sub("", m.group(3)).strip()
            return self._figure_html(name, options.get("alt", ""), caption,
                                     number, _svg_aspect(data), room)
        raise OutlineError(f"no figure labelled {label!r}")

    def check(self, cell_id: str, announced: bool = False):
        """A code cell and what it prints; under the paragraph that
        ``announced`` it, its code only if short."""
        cell = self.chapter.cells.get(cell_id)
        if cell is None:
            raise OutlineError(f"no code cell with id {cell_id!r}")
        printed = _printed(cell)
        heading = self.heading_of(lambda b: b.cell is cell)
        code = "".join(cell.source).rstrip()
        lines = len(code.splitlines()) + len(printed.splitlines())
        if _shows_code(cell) and (not announced or lines <= ANNOUNCED_LINES):
            body = _code_html(code)
        elif announced:
            body = ""
        else:
            body = ('<p class="sa-printed-by">What the chapter\'s code '
                    'prints:</p>')
        body += f'<pre class="sa-printed">{html.escape(printed)}</pre>'
        return heading, body

    def summary(self, _):
        section = self.chapter.summary()
        if section is None:
            raise OutlineError("the chapter has no Summary section")
        return section.heading, (f'<div class="sa-summary">'
                                 f'{self.r.block(section.markdown())}</div>')

    def points(self, items):
        if not isinstance(items, list) or not all(isinstance(i, str)
                                                  for i in items):
            raise OutlineError("points: expected a list of strings")
        bullets = "\n".join(f"- {item}" for item in items)
        return "", f'<div class="sa-points">{self.r.block(bullets)}</div>'

    def title_slide(self) -> Slide:
        number = self.number(self.chapter.label)
        title = self.r.inline(self.chapter.title)
        intro = [p for p in _paragraphs(self.chapter.intro) if _is_prose(p)]
        lead = self.r.block(_shortened(intro[0], 420)) if intro else ""
        link = f"{self.book_url}/{self.chapter.doc}.html"
        body = (f'<p class="sa-chapter">Chapter {number}</p>'
                f'<h1>{title}</h1><div class="sa-lead">{lead}</div>'
                f'<p class="sa-source">Self-Attention in Vision · '
                f'<a href="{html.escape(link)}">the chapter</a></p>')
        return Slide("title", "", body)

    def slide(self, entry: dict, then: dict | None = None
              ) -> tuple[Slide, bool]:
        """The slide of ``entry``, and whether it also holds ``then`` (the
        outline's next entry: what a lead announces)."""
        kind = next(k for k in KINDS if k in entry)
        if kind == "lead":
            heading, body, joined = self.lead(entry[kind], then)
        else:
            (heading, body), joined = getattr(self, kind)(entry[kind]), False
        title = entry.get("title", heading)
        notes = [str(e["notes"]) for e in (entry, then if joined else {})
                 if e.get("notes")]
        return Slide(kind, self.r.inline(title) if title else "", body,
                     html.escape("\n".join(notes))), joined


def _runs_on(paragraph: str) -> bool:
    """Whether ``paragraph`` ends without ending its sentence (with a colon,
    a comma, a word): it leads into what follows it."""
    return not re.search(r"[.!?][\"')*_]*$", paragraph)


def _announced(section: Section, paragraph: str) -> tuple[str, str] | None:
    """What ``section`` shows right after ``paragraph``: ``("list",
    markdown)``, ``("equation", label)``, ``("figure", label)`` or
    ``("check", cell id)`` of a cell that prints; None if it is prose or
    nothing."""
    for i, block in enumerate(section.blocks):
        if block.kind == "markdown" and paragraph in block.text:
            after = block.text[block.text.index(paragraph) +
                               len(paragraph):].strip()
            following = section.blocks[i + 1:]
            break
    else:
        return None
    if not after:
        if not following:
            return None
        block = following[0]
        if block.kind == "code":
            labels = _figure_labels(block)
            if labels:
                return "figure", labels[0]
            printed = _printed(block.cell)
            return ("check", block.cell.get("id")) if printed else None
        after = block.text
    found = LABELLED_MATH.match(after)
    if found:
        return "equation", found.group(2)
    found = FIGURE_DIRECTIVE.match(after)
    name = dict(OPTION.findall(found.group(3))).get("name") if found else None
    if name:
        return "figure", name
    first = _paragraphs(after)[0]
    if re.match(r"([-*]|\d+\.) ", first):
        return "list", first
    return None


def _png_size(data: bytes) -> tuple[int, int]:
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24],
                                                              "big")


def _svg_aspect(data: bytes) -> float:
    m = re.search(rb'viewBox="[\d.\-]+ [\d.\-]+ ([\d.]+) ([\d.]+)"', data)
    return float(m.group(1)) / float(m.group(2)) if m else 1.5


def build_deck(root: Path, doc: str, index: BookIndex | None = None,
               book_url: str | None = None) -> Deck:
    """The deck of chapter ``doc`` from its outline; ``book_url`` is where
    its links lead (the online book by default)."""
    root = Path(root)
    index = index or BookIndex(root)
    chapter = Chapter.read(root, doc)
    builder = _DeckBuilder(root, index, chapter, book_url or index.baseurl)
    slides = [builder.title_slide()]
    path = outline_path(root, doc).relative_to(root)
    entries = chapter_outline(root, doc)
    joined = False
    for number, entry in enumerate(entries, start=1):
        if joined:      # set on the previous slide, under its lead
            joined = False
            continue
        then = entries[number] if number < len(entries) else None
        try:
            slide, joined = builder.slide(entry, then)
        except OutlineError as err:
            raise OutlineError(f"{path}, slide entry {number} "
                               f"({entry!r}): {err}") from None
        slides.append(slide)
    return Deck(doc, chapter.title, slides, builder.assets)


def deck_html(deck: Deck, vendor: str, mathjax: str, title: str) -> str:
    sections = []
    for slide in deck.slides:
        head = f"<h2>{slide.title}</h2>\n" if slide.title else ""
        notes = f'<aside class="notes">{slide.notes}</aside>' \
            if slide.notes else ""
        sections.append(f'<section class="sa-{slide.kind}">'
                        f'<div class="sa-slide">{head}'
                        f'<div class="sa-body">{slide.body}</div></div>'
                        f"{notes}</section>")
    config = {"width": WIDTH, "height": HEIGHT, "margin": 0.02,
              "center": False, "hash": True, "slideNumber": "c/t",
              "transition": "none"}
    mathjax_config = {
        "tex": {"inlineMath": [["\\(", "\\)"]],
                "displayMath": [["\\[", "\\]"]]},
        "options": {"menuOptions": {"settings": {"assistiveMml": True}}},
    }
    plain_title = re.sub(r"<[^>]+>|\\\(|\\\)", "", title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(plain_title)}: slides</title>
<link rel="stylesheet" href="{vendor}/reveal/dist/reset.css">
<link rel="stylesheet" href="{vendor}/reveal/dist/reveal.css">
<link rel="stylesheet" href="{vendor}/reveal/dist/theme/white.css">
<link rel="stylesheet" href="{vendor}/deck.css">
<script>window.MathJax = {json.dumps(mathjax_config)};
MathJax.startup = {{pageReady: () => MathJax.startup.defaultPageReady()
  .then(() => window.saDeckTypeset && window.saDeckTypeset())}};</script>
<script defer src="{mathjax}"></script>
</head>
<body>
<div class="reveal"><div class="slides">
{chr(10).join(sections)}
</div></div>
<script src="{vendor}/reveal/dist/reveal.js"></script>
<script src="{vendor}/reveal/plugin/notes/notes.js"></script>
<script>
Reveal.initialize(Object.assign({json.dumps(config)},
                                {{plugins: [RevealNotes]}}));
{FIT_JS}</script>
</body>
</html>
"""


#: A slide whose content is taller or wider than the slide (a long
#: paragraph, a wide equation) is drawn smaller, in steps of 5% down to 55%,
#: when it is first shown after MathJax has typeset the deck; the slide's
#: images shrink with its text. ``tests/e2e/test_slides.py`` fails on a slide
#: that does not fit even then.
FIT_JS = """
(function () {
  let typeset = false;
  function fits(box) {
    const f = box.parentElement.getBoundingClientRect();
    for (const el of box.querySelectorAll(":scope > *, mjx-container, img")) {
      if (el.closest("mjx-assistive-mml")) continue;
      const r = el.getBoundingClientRect();
      if (r.bottom > f.bottom + 0.5 || r.right > f.right + 0.5) return false;
    }
    return true;
  }
  function fit(slide) {
    const box = slide && slide.querySelector(".sa-body");
    if (!box || !typeset || box.dataset.scale) return;
    // An equation wider than the slide: that equation drawn smaller.
    const width = box.getBoundingClientRect().width;
    for (const eq of box.querySelectorAll('mjx-container[display="true"]')) {
      const wide = eq.firstElementChild.getBoundingClientRect().width;
      if (wide > width) {
        eq.style.fontSize = Math.floor(100 * width / wide) + "%";
      }
    }
    // Content taller than the slide: the text and images drawn smaller.
    const images = Array.from(box.querySelectorAll("img"));
    const heights = images.map(img => parseFloat(img.style.height) || 0);
    let scale = 1;
    while (!fits(box) && scale > 0.56) {
      scale -= 0.05;
      box.style.fontSize = (30 * scale).toFixed(1) + "px";
      images.forEach((img, i) => {
        if (heights[i]) img.style.height = (heights[i] * scale) + "px";
      });
    }
    box.dataset.scale = scale.toFixed(2);
  }
  window.saDeckTypeset = () => {
    typeset = true;
    fit(Reveal.getCurrentSlide());
  };
  Reveal.on("slidechanged", event => fit(event.currentSlide));
  Reveal.on("ready", event => fit(event.currentSlide));
})();
"""


def reveal_source() -> Path:
    """reveal.js inside the ``sphinx_revealjs`` package."""
    import sphinx_revealjs

    folder = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"
    if not (folder / "dist" / "reveal.js").is_file():
        raise FileNotFoundError(f"reveal.js not found under {folder}; "
                                "install the pinned sphinx-revealjs")
    return folder


def write_vendor(out: Path, mathjax: bool) -> None:
    """reveal.js, the deck style and (``mathjax``) MathJax under
    ``out/_vendor``."""
    vendor = Path(out) / "_vendor"
    source = reveal_source()
    for name in REVEAL_FILES:
        target = vendor / "reveal" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target)
    for name in REVEAL_FOLDERS:
        shutil.copytree(source / name, vendor / "reveal" / name,
                        dirs_exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("deck.css"), vendor / "deck.css")
    if mathjax:
        import mathjax as package     # django-static-mathjax

        es5 = Path(package.__file__).parent / "static" / "mathjax" / "es5"
        if not (vendor / "mathjax" / "tex-mml-chtml.js").is_file():
            shutil.copytree(es5, vendor / "mathjax", dirs_exist_ok=True)


def chapter_docs(root: Path) -> list[str]:
    """The chapters of ``_toc.yml``, in order."""
    return list(BookIndex(root).chapters)


def write_decks(root: Path, out: Path, mathjax: str | None = None,
                book_url: str | None = None) -> list[Path]:
    """Every chapter's deck as ``out/NN_name.html`` with its images in
    ``out/NN_name/``. ``mathjax`` is the URL of MathJax seen from ``out``
    (default: a copy in ``out/_vendor/mathjax``)."""
    root, out = Path(root), Path(out)
    index = BookIndex(root)
    out.mkdir(parents=True, exist_ok=True)
    write_vendor(out, mathjax=mathjax is None)
    mathjax = mathjax or "_vendor/mathjax/tex-mml-chtml.js"
    written = []
    for doc in index.chapters:
        deck = build_deck(root, doc, index, book_url)
        folder = out / deck.name
        if folder.exists():
            shutil.rmtree(folder)
        for name, data in deck.assets.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(data)
        page = out / f"{deck.name}.html"
        number = index.targets[Chapter.read(root, doc).label].number \
            if Chapter.read(root, doc).label in index.targets else ""
        page.write_text(deck_html(deck, "_vendor", mathjax,
                                  f"{number} {deck.title}".strip()),
                        encoding="utf-8")
        written.append(page)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m selfattention_book.slides")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="write every chapter's deck")
    build.add_argument("--root", type=Path, default=Path("."))
    build.add_argument("--out", type=Path, default=Path("_build/slides"))
    propose = sub.add_parser("outline", help="write a proposed outline for "
                             "chapters that have none (or --force)")
    propose.add_argument("notebooks", nargs="*", type=Path)
    propose.add_argument("--root", type=Path, default=Path("."))
    propose.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.command == "build":
        try:
            pages = write_decks(root, args.out)
        except OutlineError as err:
            print(f"slides: {err}", file=sys.stderr)
            return 1
        for page in pages:
            count = page.read_text(encoding="utf-8").count("<section ")
            print(f"{page}: {count} slides")
        return 0
    docs = [p.resolve().relative_to(root).with_suffix("").as_posix()
            for p in args.notebooks] or chapter_docs(root)
    for doc in docs:
        path = outline_path(root, doc)
        if path.exists() and not args.force:
            print(f"{path} exists (--force to replace it)")
            continue
        chapter = Chapter.read(root, doc)
        entries = default_outline(chapter)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(outline_text(chapter, entries), encoding="utf-8")
        print(f"{path}: {len(entries) + 1} slides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
