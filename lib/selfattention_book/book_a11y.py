"""Sphinx extension of the book: markup that assistive technology can use.

Loaded through ``sphinx.local_extensions`` in ``_config.yml``, next to the
theme overrides in ``_templates/`` and ``_static/accessibility.css``; all of
them are checked by tests/e2e/test_browser.py, which runs axe-core on every
page.

**The bibliography as a list.** docutils 0.21 writes the entries of a
bibliography as ``<div role="doc-biblioentry">`` inside a
``<div role="list">``. DPUB-ARIA 1.1 deprecated ``doc-biblioentry``, and
ARIA does not allow it on a ``div`` nor inside a list: a list must own list
items (axe: aria-required-children, critical; aria-deprecated-role and
aria-allowed-role on every entry). Screen readers then announce an empty
list and skip its entries. Here every entry is a ``listitem``; the list and
its class stay, so the theme styles the page as before.

**Tables that scroll.** pydata-sphinx-theme 0.17 wraps every table in a
``div.pst-scrollable-table-container`` and, when the table is wider than
the page, gives that div ``tabindex="0"`` (``addTabStopsToScrollableElements``
in its script) so that it can be scrolled with the keyboard. A focusable
element needs a role (axe: focus-order-semantics): here each container is
a ``region`` named after its section and its column headers.

The printed tables of the chapters (``selfattention.tables.Table``) are
HTML outputs, ``div.output.text_html``, which the theme makes tab stops
when they overflow (a phone): each such output is a ``region`` too, named
the same way.

**Titles with maths in cross-references.** A ``:ref:`` or ``{doc}`` link
without its own text takes the target's title as plain text (Sphinx 7.4's
std domain, ``clean_astext``): "Scaling by $\\sqrt{d_k}$" becomes the raw
"Scaling by \\sqrt{d_k}" on the page. Here such a link gets the title's own
nodes back, so its maths is typeset like the title's
(tests/e2e/test_layout.py fails on TeX in the text of a page). The same goes
for the title that sphinx-book-theme 1.1 prints at the top of a printed
page (``pagetitle``, the title's plain text): it gets the title's HTML.

**Named disclosure buttons in the sidebar.** A chapter read as several
pages has sections in the navigation; pydata-sphinx-theme 0.17.1
(``toctree.add_collapse_checkboxes``) shows them in a ``<details>`` whose
``<summary>`` holds only a decorative chevron, so it has no name (axe:
summary-name). Each one here is named after its chapter: "Pages of
chapter <n>", n its number.

**Folded code named by its words.** MyST-NB 1.4 folds a cell tagged
``hide-input`` in a ``<details>`` whose ``<summary>`` carries
``aria-label="Toggle hidden content"`` over the visible words "Show code
cell source": a name that does not contain the visible text (axe:
label-content-name-mismatch, serious), so a speech user saying what they
see cannot open it. Here the label goes, and the words name the summary.
"""

from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.nodes import clean_astext
from sphinx.writers.html5 import HTML5Translator


class AccessibleHTMLTranslator(HTML5Translator):
    """Sphinx's HTML5 translator, with citations written as list items.

    pydata-sphinx-theme mixes its own changes into whichever translator is
    registered, so the theme's changes (tables, heading levels) still apply.
    """

    def visit_citation(self, node: nodes.citation) -> None:
        if not isinstance(node.previous_sibling(), nodes.citation):
            self.body.append('<div role="list" class="citation-list">\n')
        self.body.append(self.starttag(node, "div", classes=[node.tagname],
                                       role="listitem"))


CONTAINER = '<div class="pst-scrollable-table-container">'
HEADING = re.compile(r"<h[1-6]\b[^>]*>(.*?)</h[1-6]>", re.S)
HEADER = re.compile(r"<th\b[^>]*>(.*?)</th>", re.S)
TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    return html.unescape(" ".join(TAG.sub(" ", fragment).split()))


def _table_name(before: str, table_html: str) -> str:
    """The section the table sits in, then its column headers."""
    headings = HEADING.findall(before)
    section = _text(headings[-1]).rstrip("#¶ ") if headings else ""
    head = table_html.split("</thead>", 1)[0] \
        if "</thead>" in table_html else ""
    columns = [c for c in (_text(h) for h in HEADER.findall(head)) if c]
    name = "table" + (f" in {section}" if section else "")
    return name + (f": {', '.join(columns)}" if columns else "")


#: A printed table of a chapter, as MyST-NB writes the cell's output.
OUTPUT_TABLE = '<div class="output text_html"><table class="sa-table">'


def name_table_regions(body: str) -> str:
    """Give each scrollable table container, and each printed table, a role
    and a name of its own (landmarks must differ by name: axe's
    landmark-unique)."""
    seen: dict[str, int] = {}
    for opening, before, after in (
            (CONTAINER, '<div class="pst-scrollable-table-container"', ">"),
            (OUTPUT_TABLE, '<div class="output text_html"',
             '><table class="sa-table">')):
        parts = body.split(opening)
        out = parts[0]
        for part in parts[1:]:
            name = _table_name(out, part)
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name += f" ({seen[name]})"
            out += (f'{before} role="region" aria-label='
                    f'"{html.escape(name, quote=True)}"{after}') + part
        body = out
    return body


def name_summaries(soup) -> None:
    """Name each bare ``<summary>`` of the sidebar (a BeautifulSoup) after
    the chapter whose link comes before it."""
    for summary in soup.select("li.has-children > details > summary"):
        link = summary.parent.find_previous_sibling("a")
        if link is None or summary.get_text(strip=True) or \
                summary.get("aria-label"):
            continue
        number = re.match(r"\s*(\d+)\.", link.get_text())
        summary["aria-label"] = (f"Pages of chapter {number.group(1)}"
                                 if number else
                                 f"Pages of {link.get_text(' ', strip=True)}")


#: The summary of a folded cell as MyST-NB 1.4 writes it
#: (``visit_HideCellInput`` in myst_nb/sphinx_.py).
FOLDED = '<summary aria-label="Toggle hidden content">'


def name_folds_by_their_words(body: str) -> str:
    """Drop the label of each folded cell's summary (see the module)."""
    return body.replace(FOLDED, "<summary>")


def _named_toctree(generate):
    def generate_toctree_html(*args, **kwargs):
        out = generate(*args, **kwargs)   # a BeautifulSoup in 0.17.1
        if hasattr(out, "select"):
            name_summaries(out)
        return out
    return generate_toctree_html


def _on_page(app, pagename, templatename, context, doctree) -> None:
    if "body" in context:
        context["body"] = name_folds_by_their_words(
            name_table_regions(context["body"]))
    if callable(context.get("generate_toctree_html")):
        context["generate_toctree_html"] = _named_toctree(
            context["generate_toctree_html"])
    if TEX.search(str(context.get("pagetitle", ""))) and context.get("title"):
        context["pagetitle"] = context["title"]


TEX = re.compile(r"\\[A-Za-z]+|[_^]\{")


def _section_title(env, docname: str, labelid: str):
    for section in env.get_doctree(docname).findall(nodes.section):
        if labelid in section["ids"] and isinstance(section[0], nodes.title):
            return section[0]
    return None


def typeset_link_titles(app: Sphinx, doctree: nodes.document,
                        docname: str) -> None:
    """``doctree-resolved``: links whose text is a title holding maths get
    the title's nodes (maths included) instead of its TeX source."""
    env = app.env
    documents = {clean_astext(t): t for t in env.titles.values()
                 if TEX.search(clean_astext(t))}
    sections = {}
    for doc, labelid, name in env.domaindata["std"]["labels"].values():
        if name and TEX.search(str(name)):
            sections.setdefault(str(name), (doc, labelid))
    for inline in list(doctree.findall(nodes.inline)):
        classes = inline.get("classes", [])
        text = inline.astext()
        title = None
        if "std-doc" in classes:
            title = documents.get(text)
        elif "std-ref" in classes and text in sections:
            title = _section_title(env, *sections[text])
        if title is not None:
            inline[:] = [child.deepcopy() for child in title.children]


def setup(app: Sphinx) -> dict:
    for builder in ("html", "dirhtml", "singlehtml"):
        app.set_translator(builder, AccessibleHTMLTranslator)
    # after sphinx-book-theme's own handler, which sets pagetitle
    app.connect("html-page-context", _on_page, priority=900)
    app.connect("doctree-resolved", typeset_link_titles)
    # env_version follows this file's text: any change here rewrites every
    # page on the next incremental build.
    return {"version": "1.1", "env_version": int(hashlib.sha256(
                Path(__file__).read_bytes()).hexdigest()[:8], 16),
            "parallel_read_safe": True,
            "parallel_write_safe": True}
