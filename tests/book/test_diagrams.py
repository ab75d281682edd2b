"""The diagrams (selfattention_book.diagrams) as the book shows them.

The committed SVGs are what scripts/diagrams.py writes now, so an edit of
the drawing code that is not followed by `make diagrams` fails here; every
text is at least 8 pt at the size the page shows it; every diagram has alt
text; the symbols it writes are the book's (the notation page, or the math
of its own chapter); and every diagram fits the text column and its canvas.
"""

import json
import re
from functools import lru_cache
from pathlib import Path

import matplotlib
import nbformat
import pytest

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.spines import Spine  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from selfattention_book import diagrams  # noqa: E402
from support import module_from_file

ROOT = Path(__file__).resolve().parents[2]
NAMES = list(diagrams.DIAGRAMS)
# the chapter each diagram belongs to (DIAGRAMS-PLACEMENT: where it goes)
CHAPTER = {"attention": "01_definition", "multihead": "03_multihead",
           "masks": "04_masks", "transformer_block": "06_transformer",
           "vit": "06_transformer", "cost": "08_cost", "swin": "09_windows",
           "nonlocal": "10_nonlocal", "matching": "11_matching"}


def _writer():
    return module_from_file("scripts/diagrams.py", "diagrams_writer")


WRITER = _writer()


@lru_cache(maxsize=None)
def drawn(name):
    """The figure of ``name``, drawn once, with a renderer to measure it."""
    fig = diagrams.draw(name)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return fig, canvas.get_renderer()


def texts(fig):
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]


def displayed_scale(fig):
    """Shown size / drawn size: an SVG is shown at its own width (96 CSS px
    an inch), shrunk to fit the column if wider."""
    width_px = fig.get_figwidth() * diagrams.CSS_PX_PER_IN
    return min(diagrams.DISPLAY_PX, width_px) / width_px


def test_every_diagram_belongs_to_a_chapter():
    assert sorted(CHAPTER) == sorted(NAMES)
    for chapter in CHAPTER.values():
        assert (ROOT / "chapters" / f"{chapter}.ipynb").is_file()


@pytest.mark.parametrize("name", NAMES)
def test_committed_svg_is_what_the_writer_writes(name):
    svg, entry = WRITER.render(name, drawn(name)[0])
    committed = WRITER.OUT / entry["file"]
    assert committed.is_file(), f"{committed} missing: run make diagrams"
    assert committed.read_bytes() == svg, \
        f"{committed.name} is stale: run make diagrams and commit it"


def test_svg_bytes_do_not_change_between_runs():
    one = diagrams.to_svg(diagrams.draw("attention"))
    two = diagrams.to_svg(diagrams.draw("attention"))
    assert one == two
    assert b"<dc:date>" not in one and b"<text" not in one  # text as paths


def test_manifest_lists_every_diagram_with_its_alt_text():
    manifest = json.loads((WRITER.OUT / WRITER.MANIFEST).read_text())
    assert list(manifest) == NAMES
    for name, entry in manifest.items():
        assert entry["alt"] == diagrams.ALT[name]
        assert entry["file"] == f"{name}.svg"
        assert entry["bytes"] == (WRITER.OUT / entry["file"]).stat().st_size
    stray = {p.name for p in WRITER.OUT.glob("*.svg")} - {
        e["file"] for e in manifest.values()}
    assert not stray, f"SVGs no diagram writes: {sorted(stray)}"


@pytest.mark.parametrize("name", NAMES)
def test_the_chapter_shows_the_diagram_with_the_library_s_alt_text(name):
    """One alt text per diagram: the figure's ``:alt:`` is ``ALT[name]``."""
    nb = nbformat.read(ROOT / "chapters" / f"{CHAPTER[name]}.ipynb",
                       as_version=4)
    alts = [m.group(1) for cell in nb.cells if cell.cell_type == "markdown"
            for m in re.finditer(rf"diagrams/{name}\.svg\n(?::name:[^\n]*\n)?"
                                 r":alt: ([^\n]*)", cell.source)]
    assert alts == [diagrams.ALT[name]]


@pytest.mark.parametrize("name", NAMES)
def test_alt_text_says_what_the_diagram_shows(name):
    alt = diagrams.ALT[name]
    assert len(alt.split()) >= 30, "alt text of a diagram: a description"
    assert not set("$\\_^{}") & set(alt), "alt text is read aloud: no TeX"


@pytest.mark.parametrize("name", NAMES)
def test_text_is_at_least_8_pt_where_shown(name):
    fig, _ = drawn(name)
    scale = displayed_scale(fig)
    small = [(t.get_text(), round(t.get_fontsize() * scale, 2))
             for t in texts(fig)
             if t.get_fontsize() * scale < diagrams.MIN_PT - 1e-9]
    assert not small, f"text below {diagrams.MIN_PT} pt as shown: {small}"


def test_each_svg_states_its_smallest_text():
    svg = diagrams.to_svg(diagrams.draw("masks")).decode()
    stated = re.search(r"smallest text ([\d.]+) pt when shown (\d+) CSS px",
                       svg)
    assert stated and float(stated[1]) >= diagrams.MIN_PT
    assert int(stated[2]) <= diagrams.DISPLAY_PX


def test_the_size_measure_notices_a_small_or_shrunk_text():
    fig = diagrams.draw("attention")
    fig.axes[0].text(1, 1, "tiny", fontsize=7)
    assert min(t.get_fontsize() for t in texts(fig)) * \
        displayed_scale(fig) < diagrams.MIN_PT
    fig.set_figwidth(2 * diagrams.DISPLAY_IN)      # shown at half its size
    assert displayed_scale(fig) == pytest.approx(0.5)


@pytest.mark.parametrize("name", NAMES)
def test_fits_the_column(name):
    fig, _ = drawn(name)
    width, height = fig.get_size_inches()
    assert width <= diagrams.DISPLAY_IN + 1e-9
    assert 1.5 <= width / height <= 3.5, "a diagram, not a strip or a tower"


@pytest.mark.parametrize("name", NAMES)
def test_nothing_is_drawn_outside_the_canvas(name):
    fig, renderer = drawn(name)
    box = fig.bbox
    outside = []
    for artist in fig.axes[0].get_children():
        if not artist.get_visible() or artist is fig.axes[0].patch or \
                isinstance(artist, (Spine, Axis)):   # the axes are off
            continue
        extent = artist.get_window_extent(renderer)
        if extent.width == 0 and extent.height == 0:
            continue
        if (extent.x0 < box.x0 - 1 or extent.y0 < box.y0 - 1
                or extent.x1 > box.x1 + 1 or extent.y1 > box.y1 + 1):
            outside.append((type(artist).__name__,
                            getattr(artist, "get_text", lambda: "")()))
    assert not outside, f"drawn beyond the canvas: {outside}"


def clashes(fig, renderer):
    """Pairs of texts whose boxes overlap by more than a pixel."""
    boxes = [(t.get_text(), t.get_window_extent(renderer).padded(-1))
             for t in texts(fig)]
    return [(a, b) for i, (a, p) in enumerate(boxes)
            for b, q in boxes[i + 1:] if p.overlaps(q)]


@pytest.mark.parametrize("name", NAMES)
def test_no_two_texts_overlap(name):
    found = clashes(*drawn(name))
    assert not found, f"texts on top of each other: {found}"


def test_the_overlap_check_sees_a_clash():
    fig = diagrams.draw("transformer_block")
    fig.axes[0].text(3.6, 0.3, "a label on the formula", fontsize=9)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    assert clashes(fig, canvas.get_renderer())


# ------------------------------------------------------------- symbols
NOTATION = (ROOT / "appendices" / "notation.md").read_text(encoding="utf-8")
GREEK = {"theta", "phi", "gamma", "tau", "sigma", "rho", "beta", "ell"}
INDICES = {"i", "j", "1", "2"}          # Q_i, K_i: head i
INDEXED = {"F", "X"}                    # F_1, X_2: symbols of their own


def symbols(math):
    """The symbols of a formula, normalised: ``W_Q``, ``d_k``, ``x_cls``
    (from ``\\mathbf{x}_{\\mathrm{cls}}``), ``theta``; a run of plain
    letters is a product (``QK`` is Q and K), other commands are skipped."""
    math = re.sub(r"\\(?:mathbf|mathrm|text|boldsymbol)\{([^{}]*)\}", r"\1",
                  math)
    math = re.sub(r"\\operatorname\{[^{}]*\}", " ", math)
    found = set()
    for base, sub in re.findall(
            r"(\\[A-Za-z]+|[A-Za-z0-9])(?:_\{?\\?([A-Za-z0-9]+)\}?)?",
            math):
        if base.startswith("\\"):
            base = base[1:]
            if base not in GREEK:
                continue                 # an operator or a space
        elif base.isdigit():
            continue
        if sub and (sub not in INDICES or base in INDEXED):
            found.add(f"{base}_{sub}")
        else:
            found.add(base)
    return found


def math_of(text):
    return re.findall(r"\$\$?([^$]+)\$\$?", text)


@lru_cache(maxsize=None)
def chapter_symbols(chapter):
    nb = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return set().union(*map(symbols, math_of(prose)))


BOOK_SYMBOLS = set().union(*map(symbols, math_of(NOTATION)))


def test_symbols_reads_formulas_as_the_page_writes_them():
    assert symbols(r"W_{\text{merge}}") == {"W_merge"}
    assert symbols(r"\mathbf{x}_{\mathrm{cls}}") == {"x_cls"}
    assert symbols(r"S = QK^{\top}/\sqrt{d_k}") == {"S", "Q", "K", "d_k"}
    assert symbols(r"\operatorname{softmax}(Q_i K_i^{\top})") == {"Q", "K"}
    assert {"W_Q", "d_k", "W_merge", "x_cls", "F_1", "W_theta"} \
        <= BOOK_SYMBOLS
    assert not symbols(r"d_{\text{head}}, W_{qkv}") & BOOK_SYMBOLS


@pytest.mark.parametrize("name", NAMES)
def test_symbols_are_the_books(name):
    fig, _ = drawn(name)
    used = set().union(*(symbols(m) for t in texts(fig)
                         for m in math_of(t.get_text())))
    assert used, "a diagram names its symbols"
    unknown = used - BOOK_SYMBOLS - chapter_symbols(CHAPTER[name])
    assert not unknown, (f"symbols in neither the notation page nor chapter "
                         f"{CHAPTER[name]}: {sorted(unknown)}")
