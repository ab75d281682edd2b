"""The still pictures under the kernel-free figures: what an untrusted
notebook shows is what the figure's script draws first, pixel for pixel
(read back from Chromium's canvases), and the note that says how to make it
interactive is there only while the script has not run."""

import base64
import io
import re

import numpy as np
import pytest
from PIL import Image

from selfattention import interactive

pytestmark = pytest.mark.slow


def _figures():
    rng = np.random.default_rng(7)

    def rows(n, m):
        A = rng.random((n, m)) ** 3
        return A / A.sum(axis=1, keepdims=True)
    frames = rng.random((2, 12, 16))
    return {
        "patch, one head": interactive.patch_explorer(
            rng.random((24, 32)), rows(48, 48), (6, 8), 4, query=13),
        "patch, three heads": interactive.patch_explorer(
            rng.random((16, 16)), np.stack([rows(16, 16)] * 3), (4, 4), 4,
            query=15, vmax=0.5),
        "frames, self": interactive.frames_explorer(
            frames, rows(24, 24), (3, 4), 4, query=17),
        "frames, cross": interactive.frames_explorer(
            frames[:1], rows(12, 12), (3, 4), 4, query=0, keys=frames[1:]),
        "bars": interactive.bar_explorer(
            rng.random((3, 2, 10)), ["a", "b", "c"], ["raw", "scaled"],
            choice=1),
        "stereo": interactive.stereo_explorer(
            rng.random((16, 40)), rng.random((16, 40)), rows(10 * 40, 6)
            .reshape(10, 40, 6), rng.uniform(0, 5, (10, 40)), step=3,
            query=(4, 20), image_rows=np.r_[2:7, 9:14]),
    }


FIGURES = _figures()


#: Every canvas's size and pixels (RGBA bytes, base64: a JSON array of
#: numbers would be ten times the text to pass out of the browser).
DRAWN_JS = """() => Array.from(document.querySelectorAll('canvas')).map(cv => {
  const data = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
  let text = '';
  for (let i = 0; i < data.length; i += 0x8000)
    text += String.fromCharCode.apply(null, data.subarray(i, i + 0x8000));
  return [cv.width, cv.height, btoa(text)];
})"""


def _canvases(page, html):
    """Each canvas as its script drew it, and its still. A canvas whose
    still has two layers (the stereo explorer's images) is transparent but
    for the marks the script draws: it is compared, as RGBA, with the
    still's upper layer, the marks, which the script removes."""
    drawn = page.evaluate(DRAWN_JS)
    styles = re.findall(r'<canvas [^>]*style="([^"]*)"', html)
    out = []
    for (width, height, pixels), css in zip(drawn, styles, strict=True):
        data = css.split("base64,", 1)[1].split(")", 1)[0]
        still = Image.open(io.BytesIO(base64.b64decode(data)))
        rgba = np.frombuffer(base64.b64decode(pixels), dtype=np.uint8
                             ).reshape(height, width, 4)
        if css.count("url(") == 2:
            marks = np.asarray(still.convert("RGBA")).copy()
            marks[marks[..., 3] == 0] = 0       # transparent is (0, 0, 0, 0)
            out.append((rgba, marks))
        else:
            out.append((rgba[..., :3], np.asarray(still.convert("RGB"))))
    return out


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_the_still_is_what_the_script_draws_first(browser, name):
    page = browser.new_page()
    try:
        page.set_content(f"<html><body>{FIGURES[name].data}</body></html>")
        canvases = _canvases(page, FIGURES[name].data)
        assert canvases, name
        for drawn, still in canvases:
            assert drawn.shape == still.shape
            differ = np.abs(drawn.astype(int) - still.astype(int)).max(-1)
            if name == "bars":
                # The still leaves out the panels' text (the caption and
                # the labels around the canvas carry it): under 5 % of the
                # pixels, and no bar.
                assert (differ > 0).mean() < 0.05
            else:
                assert differ.max() == 0, f"{name}: {(differ > 0).sum()} px"
        assert page.locator(".sa-still-note").count() == 0
    finally:
        page.close()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_without_scripts_the_still_and_its_note_show(browser, name):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.set_content(f"<html><body>{FIGURES[name].data}</body></html>")
        assert page.locator(".sa-still-note").is_visible()
        for css in page.evaluate(
                "() => Array.from(document.querySelectorAll('canvas'))"
                ".map(cv => getComputedStyle(cv).backgroundImage)"):
            assert css.startswith('url("data:image/png;base64,'), name
    finally:
        context.close()
