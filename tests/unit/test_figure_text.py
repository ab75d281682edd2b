"""scripts/figure_text.py: each PNG figure says the size of its smallest
drawn text, which the browser test and _static/figures.js read back."""

import io

import matplotlib
import pytest
from PIL import Image

from support import module_from_file

matplotlib.use("Agg")


@pytest.fixture
def recording():
    """The hook installed for one test, then matplotlib as it was."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    draw, print_png = Text.draw, FigureCanvasAgg.print_png
    module = module_from_file("scripts/figure_text.py", "figure_text_hook")
    yield module
    Text.draw, FigureCanvasAgg.print_png = draw, print_png


def said(fig, **savefig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", **savefig)
    return Image.open(io.BytesIO(buffer.getvalue())).text[
        "selfattention:smallest-text-px"]


@pytest.mark.parametrize("dpi", [72, 100, 200])
def test_the_smallest_drawn_text_in_png_pixels(recording, dpi):
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(4, 2))
    left.set_title("title", fontsize=12)
    left.tick_params(labelsize=7)
    right.set_axis_off()                 # its tick labels are not drawn
    right.tick_params(labelsize=3)
    right.text(0.5, 0.5, "note", fontsize=9)
    right.text(0.5, 0.2, "", fontsize=2)  # empty: nothing drawn
    assert float(said(fig, dpi=dpi)) == pytest.approx(7 * dpi / 72, abs=0.01)
    plt.close(fig)


def test_a_picture_without_text_says_none(recording):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.imshow([[0, 1], [1, 0]])
    ax.set_axis_off()
    assert said(fig, dpi=50) == "none"
    plt.close(fig)


def test_the_png_stays_a_valid_image(recording):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.set_title("x")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40, bbox_inches="tight")
    image = Image.open(io.BytesIO(buffer.getvalue()))
    image.load()                          # every chunk's checksum holds
    assert image.size[0] > 0
    plt.close(fig)
