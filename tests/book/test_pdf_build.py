"""The single-page build that make pdf prints, and bookmarks that Chromium
wrote twice, read back as meant
(``selfattention_book.pdf.undoubled``, which ``make pdf`` applies to the
outline of each PDF it prints)."""

import pytest

from selfattention_book.pdf import undoubled
from selfattention_book.plain import BookIndex
from support import ROOT

INDEX = BookIndex(ROOT)


@pytest.mark.parametrize("doubled, meant", [
    # Seen in the printed book: every run twice, and the first line's runs
    # twice with the second line once, its line break's space dropped.
    ("1.2. 1.2. The formal definitionThe formal definition",
     "1.2. The formal definition"),
    ("What you will learnWhat you will learn", "What you will learn"),
    ("2.5. 2.5. A correction at initialisation, not a tunedA correction at "
     "initialisation, not a tunedtemperature",
     "2.5. A correction at initialisation, not a tuned temperature"),
    ("8.5. 8.5. Every pixel of a 224 × 224 imageEvery pixel of a 224 × 224 "
     "image", "8.5. Every pixel of a 224 × 224 image"),
])
def test_a_doubled_bookmark_reads_as_meant(doubled, meant):
    assert undoubled(doubled) == meant


def test_no_title_of_the_book_reads_as_doubled():
    titles = [t.title for t in INDEX.targets.values()
              if t.kind in ("chapter", "section") and t.title]
    numbered = [f"{t.number}. {t.title}" for t in INDEX.targets.values()
                if t.kind in ("chapter", "section") and t.number]
    assert len(titles) > 50
    for title in titles + numbered + ["", "x", "aa", "Bonbons", "Noon"]:
        assert undoubled(title) is None, title


def test_the_single_page_builder_renders_every_node_the_html_builder_does():
    # make pdf prints Jupyter Book's singlehtml build. Sphinx 7.4 looks up a
    # builder's node handlers by its name before its format, and
    # sphinx-exercise registers some for "singlehtml", so without this step
    # myst-nb's folded cells (HideCodeCellNode) stop that build.
    from types import SimpleNamespace

    from selfattention_book.book_editions import teach_single_page

    def visit(self, node):
        pass

    handlers = {"html": {"HideCodeCellNode": (visit, None),
                         "exercise_node": (visit, visit)},
                "singlehtml": {"exercise_node": (visit, None)}}
    app = SimpleNamespace(registry=SimpleNamespace(
        translation_handlers=handlers),
        builder=SimpleNamespace(name="html"))
    teach_single_page(app)
    assert "HideCodeCellNode" not in handlers["singlehtml"]
    app.builder.name = "singlehtml"
    teach_single_page(app)
    assert handlers["singlehtml"] == {"HideCodeCellNode": (visit, None),
                                      "exercise_node": (visit, None)}
