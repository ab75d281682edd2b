"""The stereo explorer of the matching chapter's practice page, as a reader
meets it in Chromium at 1366 x 900 and at 390 x 844: it fits the column,
what it shows is large enough to read and to tap, a tap on the left image
picks the nearest query, the buttons step the query, and the live text
names the pixel as the chapter does (a held-out row 0 to 49 and its row of
the image)."""

import json
import re

import pytest

PAGE = "chapters/11_matching/practice.html"
SIZES = {"1366 px": {"width": 1366, "height": 900},
         "390 px": {"width": 390, "height": 844}}
SAID = re.compile(r"left pixel: held-out row (\d+) \(image row (\d+)\), "
                  r"column (\d+); most weight on disparity (\d+)")
#: Smallest side of a tap target, in CSS pixels.
TAP = 40

DATA_JS = """figure => {
  const text = figure.nextElementSibling.textContent;
  const start = text.indexOf("var D = ") + 8;
  return text.slice(start, text.indexOf(";\\n", start));
}"""
CLICK_JS = """(cv, at) => {
  cv.scrollIntoView({block: "center"});
  const b = cv.getBoundingClientRect(), per = cv.clientWidth / at.W;
  const x = b.left + cv.clientLeft + at.x * per;
  const y = b.top + cv.clientTop + at.y * per;
  const hit = document.elementFromPoint(x, y);
  if (hit !== cv) throw new Error("the image is covered at the pixel");
  cv.dispatchEvent(new MouseEvent("click", {clientX: x, clientY: y,
                                            bubbles: true}));
}"""
BOXES_JS = """figure => {
  const box = e => { const b = e.getBoundingClientRect();
                     return [b.left, b.top, b.width, b.height]; };
  return {figure: box(figure), window: window.innerWidth,
          scroll: figure.scrollWidth - figure.clientWidth,
          canvases: Object.fromEntries(Array.from(
            figure.querySelectorAll("canvas")).map(c => [c.className, box(c)])),
          buttons: Array.from(figure.querySelectorAll("[data-move]")).map(box)};
}"""


def said(figure) -> tuple[int, int, int]:
    """(held-out row, image row, column) that the live text names."""
    found = SAID.search(figure.locator("[aria-live]").inner_text())
    assert found, figure.locator("[aria-live]").inner_text()
    return int(found[1]), int(found[2]), int(found[3])


@pytest.mark.slow
# make test at the phone's width, where it is tightest; make sweep at the
# laptop's.
@pytest.mark.parametrize("size", [
    "390 px", pytest.param("1366 px", marks=pytest.mark.sweep)])
def test_stereo_explorer_reads_and_answers_taps(visit, size):
    page = visit(PAGE).page
    page.set_viewport_size(SIZES[size])
    figure = page.locator('[data-testid="stereo-explorer"]')
    figure.scroll_into_view_if_needed()
    D = json.loads(figure.evaluate(DATA_JS))
    held_rows = len(D["imageRows"])
    boxes = figure.evaluate(BOXES_JS)

    # it fits: nothing beyond the window, nothing to scroll sideways
    left, _, width, _ = boxes["figure"]
    assert left >= 0 and left + width <= boxes["window"] + 1, boxes
    assert boxes["scroll"] <= 1, boxes
    # large enough to read and to tap
    pick = boxes["canvases"]["sa-pick"]
    assert pick[2] >= min(D["W"], 0.8 * boxes["window"]) - 40, pick
    assert pick[3] >= 150, pick                    # the whole image, tall
    for name in ("sa-zoom-left", "sa-zoom-right", "sa-map"):
        c = boxes["canvases"][name]
        assert c[2] >= 250 and c[3] >= 60, (name, c)  # 33 candidates
    assert len(boxes["buttons"]) == 4
    for b in boxes["buttons"]:
        assert b[2] >= TAP and b[3] >= TAP, b

    # the first state names a query of the held-out rows, as the text does
    row, image_row, col = said(figure)
    assert 0 <= row < held_rows and image_row == D["imageRows"][row]
    assert row in D["rows"] and col in D["cols"]

    # a click (a tap) on the left image picks the nearest query; sent at
    # the pixel's place on the screen, the canvas centred in the window
    for image_y, x in ((D["imageRows"][D["rows"][-1]], D["W"] - 1),
                       (D["imageRows"][D["rows"][1]], D["cols"][2] + 1)):
        figure.locator("canvas.sa-pick").evaluate(CLICK_JS, {
            "x": x + 0.5, "y": image_y + 0.5, "W": D["W"]})
        row, image_row, col = said(figure)
        assert image_row == image_y, (image_y, image_row)
        assert col == min(D["cols"], key=lambda c: abs(c - x))

    # the buttons step the query by one query, and stop at the edges
    step = D["cols"][1] - D["cols"][0]
    before = said(figure)
    figure.locator('[data-move="0"]').click()      # left
    assert said(figure)[2] == before[2] - step
    figure.locator('[data-move="3"]').click()      # down
    after = said(figure)
    assert after[0] > before[0] or before[0] == D["rows"][-1]
    assert after[1] == D["imageRows"][after[0]]
    for _ in range(len(D["cols"]) + 1):
        figure.locator('[data-move="0"]').click()
    assert said(figure)[2] == 0
    for _ in range(len(D["rows"]) + 1):
        figure.locator('[data-move="2"]').click()  # up
    assert said(figure)[:2] == (0, D["imageRows"][0])
