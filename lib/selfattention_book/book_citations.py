"""The reference list labels each work as the text cites it: author-year.

The text cites with sphinxcontrib-bibtex 2.7.0's ``author_year`` reference
style (``bibtex_reference_style`` in ``_config.yml``): "(Vaswani et al.,
2017)". The reference list takes its labels from the pybtex formatting
style (``bibtex_default_style``), whose default, ``alpha`` (pybtex 0.26.1,
``pybtex/style/labels/alpha.py``), writes "[VSP+17]", which no citation in
the text shows. This extension registers

* a pybtex label style, ``author_year_text``, whose label of an entry is
  the text of its parenthetical citation: the same template as
  ``sphinxcontrib/bibtex/style/referencing/basic_author_year.py``
  (``BasicAuthorYearParentheticalReferenceStyle.inner``: the authors through
  ``PersonStyle.author_or_editor_or_title``, a separator, the year), with
  the same person style and separator, so both read alike by construction;
* a formatting style, ``author_year_list``: pybtex's ``alpha`` (entries
  sorted by author, year and title) with that label style.

Two works whose labels coincide would be cited alike in the text, where
sphinxcontrib-bibtex adds no letter to tell them apart: the build stops and
names them.
"""

from __future__ import annotations

from types import SimpleNamespace

from pybtex.plugin import register_plugin
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import join
from sphinxcontrib.bibtex.style.referencing.author_year import (
    AuthorYearReferenceStyle)
from sphinxcontrib.bibtex.style.template import year

LABEL_STYLE = "author_year_text"
FORMATTING_STYLE = "author_year_list"


def _parenthetical():
    """The referencing style of the text's ``{cite:p}`` citations."""
    return AuthorYearReferenceStyle().styles[0]


def citation_text(entry) -> str:
    """What a parenthetical citation of ``entry`` shows between its
    brackets: ``Vaswani et al., 2017``."""
    style = _parenthetical()
    template = join(sep=style.author_year_sep)[
        style.person.author_or_editor_or_title(full=False), year]
    return template.format_data(
        {"entry": entry, "style": SimpleNamespace(person=style.person)}
    ).render_as("text")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels that read as the text's citations."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [citation_text(entry) for entry in entries]
        seen: dict[str, str] = {}
        for entry, label in zip(entries, labels):
            if label in seen:
                raise ValueError(
                    f"references {seen[label]} and {entry.key} would both be "
                    f"cited as ({label}); the text could not tell them apart")
            seen[label] = entry.key
        return iter(labels)


class AuthorYearStyle(AlphaStyle):
    """pybtex's ``alpha`` list with author-year labels."""

    default_label_style = LABEL_STYLE


def setup(app):
    # force: a second Sphinx application in one process registers them again
    register_plugin("pybtex.style.labels", LABEL_STYLE, AuthorYearLabelStyle,
                    force=True)
    register_plugin("pybtex.style.formatting", FORMATTING_STYLE,
                    AuthorYearStyle, force=True)
    return {"version": "1.0", "parallel_read_safe": True,
            "parallel_write_safe": True}
