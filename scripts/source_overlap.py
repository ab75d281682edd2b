"""Find the book's sentences that follow the source document too closely.

The book takes its facts from one source document (its numbers, formulas,
citations and experiments) but none of its sentences. This script compares
every sentence of the book's prose (the chapters' markdown cells, the
introduction and the appendices) with every sentence of the source and lists
the pairs that are too alike, by two measures on normalised words (lower
case, LaTeX and punctuation removed, numbers kept):

* **run**: the longest run of consecutive words the two sentences share;
  a long run is a copied phrase;
* **cover**: the share of one sentence's content words (stop words and
  numbers removed, crude suffix stemming) that also occur in the other, in
  the same order, whichever way round is larger; a high share is a
  reworded sentence that follows the source word by word, or a long book
  sentence that carries a whole source sentence inside it.

A pair is reported when ``run >= 7`` or when ``cover >= 0.6``, counting a
direction only when its sentence has at least 8 content words. Numbers
do not count as content words (facts carry over), and tables and quoted
phrases (a misconception as people state it) are left out.

Usage: python scripts/source_overlap.py SOURCE [files ...]
(the default files are the chapters, intro.md and the appendices).
SOURCE is the document itself or its fingerprint, ``tests/fixtures/
source_fingerprint.json`` (the sentences as hashed words; the repository
keeps no text of the source): ``--write-fingerprint`` makes one, and
``tests/book/test_voice.py`` runs the comparison against it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN, COVER, MIN_WORDS = 7, 0.6, 8

STOP = set("""a an the of to in on at by for with from and or but as is are was
were be been being it its this that these those which who whom whose what
when where how than then so such not no nor do does did has have had can
could may might must shall should will would each every all any both either
into onto over under between about after before while also only just more
most less very we our you your they their them he she his her i me my one
two three four""".split())


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` with markup, maths and punctuation gone."""
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
    text = re.sub(r"\{[a-z:-]+\}`[^`]*`", " ", text)      # MyST roles
    text = re.sub(r"`[^`]*`", " ", text)                   # inline code
    text = re.sub(r"\\[a-zA-Z]+", " ", text)
    return re.findall(r"[a-z0-9]+(?:[.,][0-9]+)*", text.lower())


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content(ws: list[str]) -> list[str]:
    """Content words: no stop words and no numbers (facts may be shared)."""
    return [stem(w) for w in ws
            if w not in STOP and not any(ch.isdigit() for ch in w)]


def looks_like_code(line: str) -> bool:
    return bool(re.search(r"[=#\[\]]|^\s*(import |from \S+ import |def |"
                          r"print\(|for \w+ in )|\w\(", line))


def sentences(text: str, drop_code_lines: bool = False) -> list[str]:
    """Split prose into sentences (and list items) roughly.

    Tables and quotations are not prose and are left out (and, with
    ``drop_code_lines``, lines of code in the source): a quoted
    misconception or a table of a paper's numbers states a fact, not a
    sentence of the source.
    """
    text = re.sub(r"```.*?```|:::\{[^}]*\}.*?:::", " ", text, flags=re.S)
    text = "\n".join(line for line in text.split("\n")
                     if not line.lstrip().startswith("|")
                     and not (drop_code_lines and looks_like_code(line)
                              and "$" not in line
                              and not line.rstrip().endswith(".")))
    text = re.sub(r"[“\"][^”\"\n]{0,200}[”\"]", " ", text)
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(\"“*])|\n\s*[-•*]\s+|\n\s*\n",
                     text)
    return [p.strip() for p in parts if len(words(p)) >= 5]


def longest_run(a: list[str], b: list[str]) -> int:
    best, prev = 0, [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def ordered_cover(a: list[str], b: list[str]) -> float:
    """Share of ``a`` found in ``b`` in order (longest common subsequence)."""
    if not a:
        return 0.0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1] / len(a)


@dataclass
class Match:
    where: str
    book: str
    source: str
    run: int
    cover: float


def prose_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        import nbformat

        nb = nbformat.read(path, as_version=4)
        return "\n\n".join(c.source for c in nb.cells
                           if c.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


def token(word: str) -> str:
    """A short hash of a word: fingerprints compare tokens, never text."""
    return hashlib.blake2b(word.encode(), digest_size=5).hexdigest()


def fingerprint(source_text: str) -> dict:
    """The source's sentences as hashed words, in order; no text is kept.

    Both measures only test words for equality, so they give the same
    result on hashes as on words, and the book's repository can keep the
    fingerprint without keeping the source.
    """
    return {"version": 1, "sentences": [
        {"words": [token(w) for w in words(s)],
         "content": [token(w) for w in content(words(s))]}
        for s in sentences(source_text, True)]}


def _shared(a: list[str], b: set[str]) -> int:
    """How many words of ``a`` occur in ``b``: a bound on both measures'
    counts (a run or an ordered cover only counts such words)."""
    return sum(x in b for x in a)


def _may_match(w, c, sw, sc, sw_in, sc_in, words_in, content_in) -> bool:
    """Whether the pair could reach ``RUN`` or ``COVER`` (a cheap bound
    that never leaves out a pair the measures would report)."""
    if min(_shared(w, sw_in), _shared(sw, words_in)) >= RUN:
        return True
    return (len(c) >= MIN_WORDS and _shared(c, sc_in) / len(c) >= COVER) or \
        (len(sc) >= MIN_WORDS and _shared(sc, content_in) / len(sc) >= COVER)


def compare(source: dict, paths: list[Path],
            texts: list[str] | None = None) -> list[Match]:
    """Book sentences too close to a sentence of ``source`` (a fingerprint).

    ``texts``, the source's sentences when the source itself is at hand,
    only labels the report.
    """
    src = [(texts[i] if texts else f"source sentence {i + 1}",
            s["words"], s["content"], set(s["words"]), set(s["content"]))
           for i, s in enumerate(source["sentences"])]
    found = []
    for path in paths:
        for sent in sentences(prose_of(path)):
            w = [token(x) for x in words(sent)]
            c = [token(x) for x in content(words(sent))]
            words_in, content_in = set(w), set(c)
            best = None
            for s, sw, sc, sw_in, sc_in in src:
                if not _may_match(w, c, sw, sc, sw_in, sc_in, words_in,
                                  content_in):
                    continue
                run = longest_run(w, sw)
                cover = max(
                    ordered_cover(c, sc) if len(c) >= MIN_WORDS else 0.0,
                    ordered_cover(sc, c) if len(sc) >= MIN_WORDS else 0.0)
                if run >= RUN or cover >= COVER:
                    score = (run / RUN) + (cover / COVER)
                    if best is None or score > best[0]:
                        best = (score, Match(path.name, sent, s, run, cover))
            if best:
                found.append(best[1])
    return found


def default_paths() -> list[Path]:
    return (sorted((ROOT / "chapters").glob("*.ipynb")) + [ROOT / "intro.md"]
            + sorted((ROOT / "appendices").rglob("*.md"))
            + sorted((ROOT / "appendices").glob("*.ipynb")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="the source document "
                        "(text) or its fingerprint (.json)")
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--write-fingerprint", type=Path, metavar="JSON",
                        help="write the source's fingerprint and stop")
    args = parser.parse_args(argv)
    if args.source.suffix == ".json":
        source = json.loads(args.source.read_text(encoding="utf-8"))
        texts = None
    else:
        text = args.source.read_text(encoding="utf-8")
        source, texts = fingerprint(text), sentences(text, True)
    if args.write_fingerprint:
        args.write_fingerprint.write_text(json.dumps(source) + "\n")
        return 0
    found = compare(source, args.files or default_paths(), texts)
    for m in found:
        print(f"{m.where}: run {m.run}, cover {m.cover:.2f}\n"
              f"  book:   {m.book}\n  source: {m.source}\n")
    print(f"{len(found)} sentence(s) too close to the source")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
