"""Tests of selfattention.plots: what each helper puts on the axes."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from selfattention import plots  # noqa: E402


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def _borders(ax):
    """Positions of the horizontal and vertical border lines."""
    h = sorted(line.get_ydata()[0] for line in ax.lines
               if line.get_ydata()[0] == line.get_ydata()[1]
               and line.get_xdata()[0] != line.get_xdata()[1])
    v = sorted(line.get_xdata()[0] for line in ax.lines
               if line.get_xdata()[0] == line.get_xdata()[1]
               and line.get_ydata()[0] != line.get_ydata()[1])
    return h, v


def test_show_grid_writes_every_number_in_its_cell(ax):
    numbers = np.arange(12).reshape(3, 4)
    plots.show_grid(ax, numbers, numbers, title="t")
    texts = {(t.get_position(), t.get_text()) for t in ax.texts}
    assert texts == {((c, r), str(numbers[r, c]))
                     for r in range(3) for c in range(4)}
    assert ax.get_title() == "t"
    assert len(ax.images) == 1


def test_show_grid_text_colour_follows_the_cell(ax):
    values = np.array([[0, 1]])
    plots.show_grid(ax, values, values)
    colours = [t.get_color() for t in ax.texts]
    assert colours == ["white", "black"]


def test_show_grid_window_borders_and_shifted_start(ax):
    plots.show_grid(ax, np.zeros((8, 8)), M=4)
    assert _borders(ax) == ([3.5], [3.5])
    ax.cla()
    plots.show_grid(ax, np.zeros((8, 6)), M=4, start=2)     # shifted by 2
    assert _borders(ax) == ([1.5, 5.5], [1.5])      # not at the edge


def test_show_grid_constant_values_do_not_divide_by_zero(ax):
    plots.show_grid(ax, np.ones((2, 2)), np.ones((2, 2), dtype=int))
    assert len(ax.texts) == 4


@pytest.mark.parametrize("values, numbers", [
    (np.zeros(4), None), (np.zeros((2, 2)), np.zeros((2, 3)))])
def test_show_grid_bad_shapes(ax, values, numbers):
    with pytest.raises(ValueError):
        plots.show_grid(ax, values, numbers)


def test_mark_cell_draws_an_open_square_at_row_col(ax):
    plots.mark_cell(ax, 2, 5)
    (line,) = ax.lines
    assert (line.get_xdata()[0], line.get_ydata()[0]) == (5, 2)
    assert line.get_marker() == "s" and line.get_markerfacecolor() == "none"


def test_show_loglog_single_series_with_slope_note(ax):
    x = np.array([1, 2, 4, 8])
    plots.show_loglog(ax, x, 3.0 * x**2, xlabel="n", ylabel="s")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.texts] == ["slope 2.00"]
    assert ax.get_legend() is None
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("n", "s")


def test_show_loglog_labelled_series_reference_line_and_ticks(ax):
    x = np.array([10, 20, 40])
    plots.show_loglog(ax, x, {"a": x**2.0, "b": (x * 4, (x * 4) ** 1.0)},
                      ref_slope=2, ticks=True)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["a (slope 2.00)", "b (slope 1.00)", "slope 2"]
    ref = ax.lines[-1]
    np.testing.assert_allclose(ref.get_xdata(), [10, 160])
    # through the last point of the last series, (160, 160), with slope 2
    np.testing.assert_allclose(ref.get_ydata(), [160 / 256, 160])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "20", "40"]


def test_show_loglog_without_fit_writes_no_slope(ax):
    plots.show_loglog(ax, [1, 2], {"a": [1, 2]}, fit=False)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a"]
    assert not ax.texts


def test_show_loglog_bad_series(ax):
    with pytest.raises(ValueError, match="^ys"):
        plots.show_loglog(ax, [1, 2, 3], [1, 2])


def test_show_loglog_writes_a_negative_slope_with_a_minus_sign(ax):
    x = np.array([1.0, 2.0, 4.0])
    plots.show_loglog(ax, x, 1 / x)
    assert [t.get_text() for t in ax.texts] == ["slope \u22121.00"]


def test_mark_cell_size(ax):
    plots.mark_cell(ax, 0, 0, size=8)
    assert ax.lines[0].get_markersize() == 8


@given(st.floats(-3, 3), st.floats(0.1, 10))
def test_loglog_slope_recovers_a_power_law(p, c):
    x = np.array([1.0, 2.0, 5.0, 10.0])
    assert plots.loglog_slope(x, c * x**p) == pytest.approx(p, abs=1e-9)


@pytest.mark.parametrize("x, y", [
    ([1, 2], [1, 2, 3]), ([1], [1]), ([1, 0], [1, 2]), ([1, 2], [-1, 2]),
    ([[1, 2]], [[1, 2]])])
def test_loglog_slope_bad_input(x, y):
    with pytest.raises(ValueError, match="^(x|y)"):
        plots.loglog_slope(x, y)


@pytest.mark.parametrize("draw", [
    lambda ax: plots.mark_patch(ax, 0, 1, 4),
    lambda ax: plots.mark_cell(ax, 3, 3),
    lambda ax: plots.show_grid(ax, np.zeros((8, 8)), M=4)])
def test_outlines_and_borders_are_white_on_a_black_stroke(draw):
    fig, ax = plt.subplots(figsize=(2, 2), dpi=100, facecolor="0.5")
    ax.imshow(np.full((8, 8), 0.5), cmap="gray", vmin=0, vmax=1)
    draw(ax)                                # on grey everywhere
    ax.axis("off")                          # no black spines or ticks
    fig.canvas.draw()
    rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    plt.close(fig)
    white = (rgb > 225).all(axis=-1).sum()
    black = (rgb < 30).all(axis=-1).sum()
    assert white > 20 and black > 20        # a white line, a black edge


def test_attention_on_image_shares_a_colour_scale_when_asked(ax):
    img, w = np.zeros((4, 4)), np.array([0.1, 0.2, 0.3, 0.4])
    plots.show_attention_on_image(ax, img, w, (2, 2), 2, colorbar=False)
    assert ax.images[-1].get_clim() == (0, 0.4)       # its own largest
    plots.show_attention_on_image(ax, img, w, (2, 2), 2, colorbar=False,
                                  vmax=1.0)
    assert ax.images[-1].get_clim() == (0, 1.0)       # the shared scale


@pytest.mark.parametrize("ncols, size", [(1, 3.2), (2, 3.4), (6, 1.7),
                                         (3, 2.9)])
def test_figures_fit_the_column_with_square_panels(ncols, size):
    fig, _ = plots.figure(ncols=ncols, nrows=2, size=size)
    width, height = fig.get_size_inches()
    assert width <= plots.MAX_WIDTH + 1e-9
    assert np.isclose(width / ncols, height / 2)          # square panels
    assert np.isclose(width, min(ncols * size, plots.MAX_WIDTH))
    plt.close(fig)
