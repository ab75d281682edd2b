"""The book's prose is its own: no sentence follows the source document.

``scripts/source_overlap.py`` compares every sentence of the chapters, the
introduction and the appendices with the source's sentences, kept in the
repository only as a fingerprint of hashed words.
"""

import json
from pathlib import Path

import pytest
from support import module_from_file

ROOT = Path(__file__).resolve().parents[2]
FINGERPRINT = ROOT / "tests" / "fixtures" / "source_fingerprint.json"


@pytest.fixture(scope="module")
def overlap():
    return module_from_file("scripts/source_overlap.py")


@pytest.fixture(scope="module")
def source():
    return json.loads(FINGERPRINT.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_no_sentence_of_the_book_follows_the_source(overlap, source):
    paths = overlap.default_paths()
    assert len(paths) >= 15                       # chapters, intro, appendices
    found = overlap.compare(source, paths)
    assert not found, "\n".join(
        f"{m.where}: run {m.run}, cover {m.cover:.2f}: {m.book}"
        for m in found)


def test_a_reworded_sentence_of_the_source_is_found(overlap, source,
                                                    tmp_path):
    # A sentence this book once had, which followed the source's word
    # order with a few words swapped, and one of the book's own.
    page = tmp_path / "page.md"
    page.write_text(
        "A patch lying on the upper edge of a bright square will match "
        "other upper edges, near or far, and blend their values.\n\n"
        "We trained a two-layer model on the digits and measured how far "
        "each of its eight heads looks from its own patch.\n")
    found = overlap.compare(source, [page])
    assert [m.book.split()[:3] for m in found] == [["A", "patch", "lying"]]


def test_both_measures_fire_and_facts_do_not(overlap, tmp_path):
    text = ("The quick model reads every patch of the image in one single "
            "step and mixes the values by weight.\n\n"
            "Swin computes attention inside windows of seven by seven "
            "patches and shifts them between blocks.\n\n"
            "The grid had 3136 tokens and 9834496 scores in 2021.\n")
    source = overlap.fingerprint(text)
    assert all(len(w) == 10 for s in source["sentences"]
               for w in s["words"])                   # hashes, not words
    page = tmp_path / "page.md"
    page.write_text(
        # a copied phrase of 7 words (run)
        "Here the quick model reads every patch of the image twice.\n\n"
        # the same content words in the same order, reworded (cover)
        "Swin computed its attention within windows, seven by seven "
        "patches, and shifted those between the blocks.\n\n"
        # the numbers alone, in a sentence of the book's own
        "Our count: 3136 tokens give 9834496 entries, as in 2021.\n\n"
        # unrelated
        "Nothing in this sentence resembles anything above at all.\n")
    found = overlap.compare(source, [page])
    assert [m.book.split()[0] for m in found] == ["Here", "Swin"]
    assert found[0].run >= overlap.RUN and found[1].cover >= overlap.COVER
