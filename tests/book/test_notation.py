"""The chapters write Q, K, V, d_k, h, n, M and p in the notation page's sense.

The page (appendices/notation.md) gives each symbol one meaning, and lists the
few places where a chapter keeps a paper's own letters. These tests read the
page and the math of every chapter's prose, and look for the uses that would
give a symbol another meaning: ``$H$ heads`` (H is the image height),
``h \\times w`` (h counts heads), ``M \\in \\{0, 1\\}^{n \\times n}`` (M is the
window side, a number), ``$N$ tokens`` (tokens are counted by n), ``d_{head}``
for the key width, ``keys $Z$``.
"""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "appendices" / "notation.md").read_text(encoding="utf-8")
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
# and the appendices written as notebooks, whose prose uses the same symbols
PAGES = CHAPTERS + sorted((ROOT / "appendices").glob("*.ipynb"))

# symbol -> (a word its row on the page must use, misuses: (regex, reason))
# The regexes run on the chapter's inline and display math joined with the
# words right after each formula (so "$N$ tokens" is seen as "N tokens").
RULES = {
    "Q": ("queries", [
        (r"quer(?:y|ies)(?: matrix)? \$(?!Q\$)([A-Z])\$",
         "the queries are Q")]),
    "K": ("keys", [
        (r"\bkeys(?: matrix)? \$(?!K\$)([A-Z])\$", "the keys are K"),
        (r"\$K(?: \\times K)?\$[ -](?:kernel|filter|convolution)",
         "K is the keys, not a kernel size")]),
    "V": ("values", [
        (r"\bvalues(?: matrix)? \$(?!V\$)([A-Z])\$", "the values are V")]),
    "d_k": ("key", [
        (r"d_\{?\\(?:text|mathrm)\{k\}", "write d_k"),
        (r"d_\{?(?:key|head|\\text\{head\}|h)\b", "the key width is d_k"),
        (r"d_\{?(?:model|\\text\{model\})\b", "the token width is d")]),
    "h": ("heads", [
        (r"\$(?!h\$|h ?=|\d)([^$]{1,12})\$ heads", "the head count is h"),
        (r"\$[^$]*(?<![\\\w])h ?\\times ?w(?!\w)", "h counts heads"),
        (r"\$[^$]*\(h, ?w\)", "h counts heads"),
        (r"\$[^$]*(?<![\\\w])hw(?!\w)", "h counts heads")]),
    "n": ("tokens", [
        (r"\$(?!n\$|n ?=|m\$|m ?=|\d)([A-Za-z](?:_\w)?)(?: ?= ?[^$]*)?\$ "
         r"(?:tokens|positions)", "the token count is n"),
        (r"\$[^$]*(?<![\\\w{])N(?![\w}])", "the token count is n")]),
    "p": ("patch", [
        (r"\$[^$]*HW ?/ ?(?!p\^)[A-Z]\^2", "the patch side is p"),
        (r"\$(?!M)([A-Z]) ?\\times ?\1\$ patch", "the patch side is p")]),
    "M": ("window", [
        (r"\$[^$]*(?<![\\\w])M ?\\in ?(?:\\\{|\\mathbb)",
         "M is the window side, a number"),
        (r"\$[^$]*(?<![\\\w])M ?\\odot|\\odot ?M(?!\w)",
         "M is the window side, a number"),
        (r"\$[^$]*(?<![\\\w])M_\{?i", "M is the window side, a number")]),
}


def page_rows():
    """Symbol -> meaning, from the page's tables ("| $sym$ | meaning |")."""
    rows = {}
    for sym, meaning in re.findall(r"^\| \$([^$]+)\$ \| ([^|]+)\|", PAGE,
                                   re.M):
        rows.setdefault(sym.strip(), meaning)
    return rows


def page_exceptions():
    """(chapter label, symbol) pairs a chapter may use in a paper's sense."""
    section = PAGE.split("(notation-exceptions)=", 1)[1]
    found = set()
    for chapter, symbols in re.findall(
            r"^\| \{numref\}`[^`]*<(ch-[\w-]+)>` \| ([^|]+)\|", section, re.M):
        for sym in re.findall(r"\$([^$]+)\$", symbols):
            found.add((chapter, sym.strip()))
    return found


def chapter_text(path):
    """Label of the chapter (or appendix), and its prose with every formula
    kept.

    Code spans and code blocks are dropped; formulas stay where they are, so
    the word after a formula is still next to it.
    """
    nb = nbformat.read(path, as_version=4)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    label = re.search(r"^\(((?:ch|app)-[\w-]+)\)=", md, re.M).group(1)
    md = re.sub(r"```.*?```", " ", md, flags=re.S)
    md = re.sub(r"`[^`\n]*`", " ", md)
    md = re.sub(r"\$\$(.*?)\$\$", lambda m: "$" + " ".join(m.group(1).split())
                + "$", md, flags=re.S)
    return label, md


def violations(text):
    """(symbol, reason, excerpt) for every misuse found in ``text``."""
    found = []
    for sym, (_, misuses) in RULES.items():
        for pattern, reason in misuses:
            for m in re.finditer(pattern, text):
                found.append((sym, reason, m.group(0)[-50:]))
    return found


def test_page_gives_each_symbol_its_sense():
    rows = page_rows()
    for sym, (sense, _) in RULES.items():
        assert sym in rows, f"${sym}$ missing from the notation page"
        assert sense in rows[sym].lower(), (
            f"the page's row for ${sym}$ should say it is about {sense}")


def test_page_covers_the_symbols_of_the_book():
    rows = page_rows()
    for sym in ["X", "n", "d", "Q", "K", "V", "W_Q", "W_K", "W_V", "W_O",
                "d_k", "d_v", "h", "A", "S", "B", "M", "C", "H", "W", "T",
                "P", "p", r"\tau"]:
        assert sym in rows, f"${sym}$ missing from the notation page"


@pytest.mark.parametrize("text, symbol", [
    ("with $H = 8$ heads", "h"), ("over $h \\times w$ patches", "h"),
    ("the mask $M \\in \\{0, 1\\}^{n \\times n}$", "M"),
    ("a set of $N$ tokens", "n"), ("width $d_{head}$", "d_k"),
    ("keys $Z$", "K"), ("a $K \\times K$ kernel", "K"),
    ("queries $X$", "Q"), ("values $Z$", "V"), ("$L = 196$ tokens", "n"),
    ("so $n = HW/P^2$", "p"), ("cut into $P \\times P$ patches", "p"),
])
def test_rules_catch_a_symbol_in_another_sense(text, symbol):
    assert symbol in {sym for sym, _, _ in violations(text)}


@pytest.mark.parametrize("text", [
    "with $h = 8$ heads of width $d_k = d/h$", "$n = 196$ tokens",
    "a window of $M \\times M$ patches, $M = 7$", "$4$ heads",
    "keys $K$ and values $V$", "an $H \\times W$ image", "$m$ tokens",
    "$\\mathcal{N}(0, 1)$", "$\\sqrt{d_k}$", "$n = HW/p^2$ tokens",
    "$16 \\times 16$ patches", "windows of $M \\times M$ patches",
])
def test_rules_accept_the_book_notation(text):
    assert violations(text) == []


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_chapter_uses_the_notation(path):
    label, text = chapter_text(path)
    allowed = page_exceptions()
    wrong = [(sym, reason, excerpt) for sym, reason, excerpt in
             violations(text) if (label, sym) not in allowed]
    assert not wrong, (
        f"{path.name} uses symbols in another sense than the notation page: "
        f"{wrong}. Use the page's symbol, or, where the chapter follows a "
        f"paper's letters, say so in the chapter and list it in the page's "
        f"table of exceptions")


def test_every_listed_exception_is_still_needed():
    used = set()
    for path in CHAPTERS:
        label, text = chapter_text(path)
        used |= {(label, sym) for sym, _, _ in violations(text)}
    labels = {chapter_text(p)[0] for p in CHAPTERS}
    stale = {e for e in page_exceptions()
             if e[0] in labels and e[1] in RULES} - used
    assert not stale, f"exceptions no chapter needs any more: {sorted(stale)}"
