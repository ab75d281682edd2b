"""Sphinx extension of the book: markup that assistive technology can use.

Loaded through ``sphinx.local_extensions`` in ``_config.yml``, next to the
theme overrides in ``_templates/`` and ``_static/accessibility.css``; all of
them are checked by tests/test_browser.py, which runs axe-core on every page.

**The bibliography as a list.** docutils 0.21 writes the entries of a
bibliography as ``<div role="doc-biblioentry">`` inside a
``<div role="list">``. DPUB-ARIA 1.1 deprecated ``doc-biblioentry``, and
ARIA does not allow it on a ``div`` nor inside a list: a list must own list
items (axe: aria-required-children, critical; aria-deprecated-role and
aria-allowed-role on every entry). Screen readers then announce an empty
list and skip its entries. Here every entry is a ``listitem``; the list and
its class stay, so the theme styles the page as before.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
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


def setup(app: Sphinx) -> dict:
    for builder in ("html", "dirhtml", "singlehtml"):
        app.set_translator(builder, AccessibleHTMLTranslator)
    return {"version": "1.0", "env_version": 1, "parallel_read_safe": True,
            "parallel_write_safe": True}
