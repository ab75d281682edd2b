"""The kernel-free figures of selfattention.interactive, read as HTML.

What a reader's browser, a screen reader and nbval rely on, checked on the
markup: the same input gives the same bytes; titles and labels cannot
inject markup; bad shapes are refused; the data the script reads is valid
JSON holding the weights; the figure can be reached and driven with the
keyboard (focusable picture, real buttons with aria-pressed, a key
handler) and has a live region whose first text names the strongest
weights, computed here independently; one fixed colour scale with a legend
covers every weight; nothing is loaded from elsewhere. tests/e2e/test_browser.py
drives the same figures in Chromium.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from matplotlib import colormaps

from selfattention import cost, interactive
from selfattention.interactive import photo
from selfattention_models import photos
from support import encoded, hostile_files


# ------------------------------------------------------------ reading HTML
class Elements(HTMLParser):
    """Every start tag with its attributes and the text inside it."""

    VOID = {"canvas": False, "input": True, "br": True, "img": True,
            "meta": True, "link": True}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[dict] = []
        self.open: list[dict] = []
        self.script = ""
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(element)
        if not self.VOID.get(tag, False):
            self.open.append(element)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1]["tag"] == tag, \
            f"</{tag}> closes {self.open[-1]['tag'] if self.open else None}"
        self.open.pop()

    def handle_data(self, data):
        for element in self.open:
            element["text"] += data
        if self.open and self.open[-1]["tag"] == "script":
            self.script += data

    def find(self, **attrs) -> list[dict]:
        return [e for e in self.elements if all(
            (e["tag"] if k == "tag" else e["attrs"].get(k.replace("_", "-")))
            == v for k, v in attrs.items())]

    def one(self, **attrs) -> dict:
        found = self.find(**attrs)
        assert len(found) == 1, f"{len(found)} elements with {attrs}"
        return found[0]


def parse(figure) -> Elements:
    doc = Elements(figure.data)
    assert not doc.open, f"unclosed: {[e['tag'] for e in doc.open]}"
    return doc


def payload(figure) -> dict:
    """The JSON the figure's script reads as ``D``."""
    match = re.search(r"^  var D = (.*);$", figure.data, re.MULTILINE)
    assert match, "no data line in the script"
    return json.loads(match.group(1))


def live_text(figure) -> str:
    return parse(figure).one(aria_live="polite")["text"]


# ------------------------------------------------------------ inputs
def two_squares():
    img = np.zeros((16, 16))
    img[2:6, 2:6] = 1.0
    img[10:14, 8:12] = 0.6
    return img


def weights(rng, shape):
    x = rng.normal(size=shape) * 2
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def every_figure(rng):
    """One figure of each kind, with its name (ids: kinds of figures)."""
    frames = rng.random((3, 8, 8))
    return {
        "patch": interactive.patch_explorer(
            two_squares(), weights(rng, (2, 16, 16)), (4, 4), 4, query=5),
        "frames": interactive.frames_explorer(
            frames, weights(rng, (12, 12)), (2, 2), 4, query=3),
        "cross": interactive.frames_explorer(
            frames[:1], weights(rng, (4, 8)), (2, 2), 4, keys=frames[1:]),
        "bars": interactive.bar_explorer(
            weights(rng, (3, 2, 6)), ["a", "b", "c"], ["raw", "scaled"]),
        "cost": interactive.cost_calculator(),
    }


KINDS = ["patch", "frames", "cross", "bars", "cost"]


# ------------------------------------------------------------ every figure
@pytest.mark.parametrize("kind", KINDS)
def test_same_input_same_bytes_and_another_input_other_bytes(kind):
    first = every_figure(np.random.default_rng(1))[kind].data
    again = every_figure(np.random.default_rng(1))[kind].data
    assert first == again
    if kind != "cost":
        other = every_figure(np.random.default_rng(2))[kind].data
        ids = [re.search(r'id="([^"]+)"', h).group(1) for h in (first, other)]
        assert other != first and ids[0] != ids[1]


@pytest.mark.parametrize("kind", KINDS)
def test_self_contained_one_script_and_well_formed(rng, kind):
    figure = every_figure(rng)[kind]
    # The stills (selfattention._stills) are the one inline data: PNGs in
    # CSS; nbval's sanitizer for them is anchored on this literal prefix,
    # so it reads them in linear time (tests/nbval_sanitize.cfg).
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:STILL",
                  figure.data)
    doc = parse(figure)
    assert "http" not in text and "src=" not in text and "<link" not in text
    assert text.count("<script>") == text.count("</script>") == 1
    assert text.rstrip().endswith("</script>")
    ids = [e["attrs"]["id"] for e in doc.elements if "id" in e["attrs"]]
    assert len(ids) == len(set(ids))
    for e in doc.elements:         # every aria reference points inside
        for key in ("aria-labelledby", "aria-describedby"):
            for ref in e["attrs"].get(key, "").split():
                assert ref in ids, f"{key}={ref} refers to nothing"
    # nbval's sanitizing regexes backtrack over long runs without spaces
    assert max(len(run) for run in text.split()) < 200


@pytest.mark.parametrize("kind", KINDS)
def test_a_named_group_with_a_polite_live_region(rng, kind):
    doc = parse(every_figure(rng)[kind])
    box = doc.elements[0]
    assert box["attrs"]["role"] == "group" and box["attrs"]["data-testid"]
    title = doc.one(id=box["attrs"]["aria-labelledby"])
    assert title["text"].strip()
    live = doc.one(aria_live="polite")
    assert live["text"].strip() and live["attrs"]["data-testid"]


@pytest.mark.parametrize("kind", KINDS)
def test_reachable_and_driven_by_the_keyboard(rng, kind):
    figure = every_figure(rng)[kind]
    doc = parse(figure)
    focusable = [e for e in doc.elements if e["tag"] in ("button", "select")
                 or e["attrs"].get("tabindex") == "0"]
    assert focusable, "nothing a Tab key can reach"
    for canvas in doc.find(tag="canvas"):
        label = canvas["attrs"].get("aria-label", "")
        assert canvas["attrs"].get("role") in ("img", "application")
        assert len(label.split()) >= 5, f"canvas label {label!r}"
    pickers = doc.find(tag="canvas", tabindex="0")
    if kind in ("patch", "frames", "cross"):
        assert pickers and all(
            p["attrs"]["role"] == "application" for p in pickers)
        assert 'addEventListener("keydown"' in doc.script
        for key in ("ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"):
            assert key in doc.script
    buttons = doc.find(tag="button")
    for b in buttons:
        assert b["attrs"]["type"] == "button"
        assert b["attrs"]["aria-pressed"] in ("true", "false")
    if buttons:
        assert [b["attrs"]["aria-pressed"] for b in buttons].count(
            "true") == 1
    # each menu sits inside its <label>, which names it
    assert len(doc.find(tag="select")) == len(doc.find(tag="label"))
    for label in doc.find(tag="label"):
        assert label["text"].strip()


@pytest.mark.parametrize("kind", ["patch", "frames", "cross", "bars"])
def test_titles_and_labels_cannot_inject_markup(rng, kind):
    evil = 'x </script><b onclick="y">&'
    frames = rng.random((2, 8, 8))
    figure = {
        "patch": lambda: interactive.patch_explorer(
            two_squares(), weights(rng, (16, 16)), (4, 4), 4, title=evil),
        "frames": lambda: interactive.frames_explorer(
            frames, weights(rng, (8, 8)), (2, 2), 4, title=evil,
            labels=[evil, "b"]),
        "cross": lambda: interactive.frames_explorer(
            frames[:1], weights(rng, (4, 4)), (2, 2), 4, keys=frames[1:],
            title=evil, key_labels=[evil]),
        "bars": lambda: interactive.bar_explorer(
            weights(rng, (2, 1, 4)), [evil, "b"], [evil], title=evil,
            xlabel=evil),
    }[kind]()
    doc = parse(figure)
    assert figure.data.count("</script>") == 1
    assert not doc.find(tag="b")
    assert not [e for e in doc.elements if "onclick" in e["attrs"]]
    title = doc.one(id=doc.elements[0]["attrs"]["aria-labelledby"])
    assert title["text"] == evil


# ------------------------------------------------------------ patch explorer
def test_patch_data_holds_the_weights_and_one_scale(rng):
    A = weights(rng, (3, 16, 16))
    figure = interactive.patch_explorer(two_squares(), A, (4, 4), 4,
                                        query=6)
    D = payload(figure)
    np.testing.assert_allclose(D["weights"], A, atol=5e-4)
    assert (D["rows"], D["cols"], D["query"]) == (4, 4, 6)
    assert len(D["pixels"]) == 16 and max(map(max, D["pixels"])) == 255
    # one colour scale for the whole figure, covering every weight
    assert D["lo"] == 0 and A.max() <= D["hi"] < A.max() + 0.5
    viridis = colormaps["viridis"]
    assert D["lut"][0] == [round(255 * c) for c in viridis(0.0)[:3]]
    assert D["lut"][-1] == [round(255 * c) for c in viridis(1.0)[:3]]
    buttons = parse(figure).find(tag="button")
    assert [b["text"] for b in buttons] == ["head 1", "head 2", "head 3"]


def test_patch_live_text_names_the_strongest_weights(rng):
    A = weights(rng, (16, 16))
    q = 9
    text = live_text(interactive.patch_explorer(two_squares(), A, (4, 4), 4,
                                                query=q))
    row = np.round(A[q], 3)
    top = np.lexsort((np.arange(16), -row))[:3]
    expected = ", ".join(f"({j // 4}, {j % 4}) {row[j]:.3f}" for j in top)
    assert text == f"patch (2, 1): most weight on {expected}"
    several = interactive.patch_explorer(two_squares(), np.stack([A, A]),
                                         (4, 4), 4, query=q)
    assert "head 1 of 2" in live_text(several)


def test_patch_legend_reads_the_scale(rng):
    A = 0.3 * weights(rng, (16, 16))            # largest weight below 0.3
    doc = parse(interactive.patch_explorer(two_squares(), A, (4, 4), 4))
    legend = doc.one(**{"class": "sa-legend-text"})["text"]
    hi = payload(interactive.patch_explorer(two_squares(), A, (4, 4),
                                            4))["hi"]
    assert "attention weight" in legend and "0 (dark purple)" in legend
    assert f"{hi:g} (yellow)" in legend
    ticks = doc.one(**{"class": "sa-ticks"})
    values = [float(t) for t in ticks["text"].split()]
    assert values[0] == 0 and values[-1] <= hi + 1e-12
    assert values == sorted(values) and len(values) >= 3
    for v in values:                        # round numbers
        assert abs(v * 100 - round(v * 100)) < 1e-9


def test_patch_scale_can_be_fixed_across_figures(rng):
    A = weights(rng, (16, 16))
    low = interactive.patch_explorer(two_squares(), A * 0.2, (4, 4), 4,
                                     vmax=1.0)
    high = interactive.patch_explorer(two_squares(), A, (4, 4), 4, vmax=1.0)
    assert payload(low)["hi"] == payload(high)["hi"] == 1.0
    clipped = interactive.patch_explorer(two_squares(), A, (4, 4), 4,
                                         vmax=float(A.max()) / 2)
    assert "above" in parse(clipped).one(
        **{"class": "sa-legend-text"})["text"]
    assert "above" not in parse(high).one(
        **{"class": "sa-legend-text"})["text"]


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(A=np.full((9, 9), 1 / 9)), ValueError, "A"),
    (dict(img=np.zeros((12, 16))), ValueError, "img"),
    (dict(query=16), ValueError, "query"),
    (dict(query=-1), ValueError, "query"),
    (dict(grid="4x4"), TypeError, "grid"),
    (dict(patch=2.5), TypeError, "patch"),
    (dict(A=np.full((16, 16), np.nan)), ValueError, "A"),
    (dict(vmax=0.0), ValueError, "vmax"),
    (dict(A=np.full((2, 16, 16), 1 / 16), head_names=["one"]), ValueError,
     "head_names"),
])
def test_patch_explorer_refuses_what_it_cannot_draw(kwargs, error, name):
    args = dict(img=two_squares(), A=np.full((16, 16), 1 / 16), grid=(4, 4),
                patch=4)
    args.update(kwargs)
    with pytest.raises(error, match=name):
        interactive.patch_explorer(**args)


def test_patch_explorer_buttons_and_caption_name_the_heads():
    A = np.stack([np.eye(16), np.full((16, 16), 1 / 16)])
    figure = interactive.patch_explorer(
        two_squares(), A, (4, 4), 4, query=5,
        head_names=["itself", "<b>uniform</b>"])
    doc = parse(figure)
    assert [b["text"] for b in doc.find(tag="button")] == [
        "head 1: itself", "head 2: <b>uniform</b>"]      # text, not markup
    assert live_text(figure).startswith("patch (1, 1), head 1 of 2 (itself)")
    assert payload(figure)["names"] == ["itself", "<b>uniform</b>"]
    assert "names" not in payload(interactive.patch_explorer(
        two_squares(), A, (4, 4), 4))                   # unnamed: as before


# ------------------------------------------------------------ frames explorer
def test_frames_per_frame_caption_names_each_map_s_strongest_key(rng):
    frames = rng.random((2, 8, 8))
    A = np.zeros((8, 8))
    A[:, 2], A[:, 4 + 3] = 0.6, 0.9          # map 0: key (1, 0); map 1: (1, 1)
    figure = interactive.frames_explorer(frames, A, (2, 2), 4, query=1,
                                         labels=["a", "b"], per_frame=True)
    assert live_text(figure) == ("patch (0, 1) of each panel, picked in a; "
                                 "where it looks most in each map: a (1, 0) "
                                 "0.600, b (1, 1) 0.900")
    assert payload(figure)["perFrame"] is True
    assert "perFrame" not in payload(interactive.frames_explorer(
        frames, A, (2, 2), 4))
    with pytest.raises(TypeError, match="per_frame"):
        interactive.frames_explorer(frames, A, (2, 2), 4, per_frame="yes")


def test_frames_live_text_and_displacement(rng):
    frames = rng.random((2, 8, 8))
    A = np.zeros((8, 8))
    A[1, 6] = 0.7                            # frame 0 (0, 1) -> frame 1 (1, 0)
    A[1, 0] = 0.2
    A[1, 3] = 0.1
    A[np.arange(8) != 1] = 1 / 8
    figure = interactive.frames_explorer(frames, A, (2, 2), 4, query=1)
    assert live_text(figure) == (
        "query: frame 0, patch (0, 1); most weight on frame 1 (1, 0) 0.700, "
        "frame 0 (0, 0) 0.200, frame 0 (1, 1) 0.100; displacement to the "
        "strongest (rows, columns): (1, -1)")
    D = payload(figure)
    assert D["cross"] is False and D["labels"] == ["frame 0", "frame 1"]
    doc = parse(figure)
    assert len(doc.find(tag="canvas", tabindex="0")) == 2   # query frames
    assert len(doc.find(tag="canvas", role="img")) == 2     # their maps


def test_frames_cross_attention_has_key_frames_and_their_maps(rng):
    frames = rng.random((3, 8, 8))
    figure = interactive.frames_explorer(
        frames[:1], weights(rng, (4, 8)), (2, 2), 4, keys=frames[1:],
        labels=["left"], key_labels=["right 1", "right 2"])
    doc = parse(figure)
    assert len(doc.find(tag="canvas", tabindex="0")) == 1
    assert len(doc.find(tag="canvas", role="img")) == 4     # 2 keys, 2 maps
    D = payload(figure)
    assert D["cross"] is True and D["keyLabels"] == ["right 1", "right 2"]
    assert live_text(figure).startswith("query: left, patch (0, 0)")


@pytest.mark.parametrize("kwargs, name", [
    (dict(A=np.ones((12, 8)) / 8), "A"),
    (dict(frames=np.zeros((3, 8, 6))), "frames"),
    (dict(query=12), "query"),
    (dict(labels=["a"]), "labels"),
    (dict(keys=np.zeros((1, 4, 4))), "keys"),
])
def test_frames_explorer_refuses_what_it_cannot_draw(kwargs, name):
    args = dict(frames=np.zeros((3, 8, 8)), A=np.ones((12, 12)) / 12,
                grid=(2, 2), patch=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        interactive.frames_explorer(**args)


# ------------------------------------------------------------ bar explorer
def test_bars_live_text_gives_each_panels_largest_bar():
    values = np.array([[[0.1, 0.7, 0.2], [0.3, 0.3, 0.4]],
                       [[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]])
    figure = interactive.bar_explorer(values, ["one", "two"], ["p", "s"],
                                      xlabel="key", choice=1)
    assert live_text(figure) == ("two: p largest 0.5000 at key 0; "
                                 "s largest 0.6000 at key 2")
    pressed = parse(figure).one(aria_pressed="true")
    assert pressed["text"] == "two"
    assert payload(figure)["values"] == values.tolist()


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(values=np.zeros((2, 5))), ValueError, "values"),
    (dict(values=-np.ones((3, 2, 4))), ValueError, "values"),
    (dict(choices=["a"]), ValueError, "choices"),
    (dict(series="rs"), TypeError, "series"),
    (dict(choice=3), ValueError, "choice"),
])
def test_bar_explorer_refuses_what_it_cannot_draw(kwargs, error, name):
    args = dict(values=np.ones((3, 2, 4)) / 4, choices=["a", "b", "c"],
                series=["r", "s"])
    args.update(kwargs)
    with pytest.raises(error, match=name):
        interactive.bar_explorer(**args)


# ------------------------------------------------------------ cost calculator
def test_calculator_starts_with_the_numbers_of_the_cost_module():
    figure = interactive.cost_calculator(image_size=224, patch_size=1,
                                         heads=2)
    doc = parse(figure)
    cells = {e["attrs"]["data-row"]: e["text"] for e in doc.find(tag="td")}
    n = cost.tokens(224, 1)
    assert cells["0"] == f"{n:,}" == "50,176"
    assert cells["1"] == f"{cost.score_entries(n):,}"
    assert cells["2"] == cost.human_bytes(cost.attention_bytes(n, 2))
    assert cells["3"] == "65,536.00"
    heads = [e for e in doc.elements if "data-heads" in e["attrs"]]
    assert len(heads) == 1 and "2 head(s)" in heads[0]["text"]
    assert live_text(figure) == (
        "224 × 224 pixels in 1 × 1 patches: 50,176 tokens, 2,517,630,976 "
        "score entries per head, 20.14 GB for 2 head(s) in float32")
    row_headers = doc.find(tag="th", scope="row")
    assert len(row_headers) == len(cells) == 4


def test_calculator_menus_offer_exactly_the_patches_that_tile():
    figure = interactive.cost_calculator(image_size=96, patch_size=8)
    menu = re.search(r'data-in="patch">(.*?)</select>', figure.data)
    offered = re.findall(r'<option value="(\d+)"( selected)?>\1 × \1<',
                         menu.group(1))
    assert [int(v) for v, _ in offered] == [
        p for p in range(1, 97) if 96 % p == 0]
    assert [v for v, chosen in offered if chosen] == ["8"]
    labels = [e for e in parse(figure).find(tag="label")]
    assert [e["text"].split()[0] for e in labels] == [
        "image", "patch", "heads", "number"]


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(image_size=100), ValueError, "image_size"),
    (dict(patch_size=15), ValueError, "patch_size"),
    (dict(heads=17), ValueError, "heads"),
    (dict(heads=0), ValueError, "heads"),
    (dict(dtype="int8"), ValueError, "dtype"),
    (dict(patch_size="16"), TypeError, "patch_size"),
])
def test_calculator_refuses_settings_it_cannot_show(kwargs, error, name):
    with pytest.raises(error, match=name):
        interactive.cost_calculator(**kwargs)


# ------------------------------------------------------------ live widgets
def test_live_wraps_ipywidgets_with_labelled_controls():
    calls = []

    def draw(k=1, on=True):
        calls.append((k, on))

    widget = interactive.live(draw, k=(1, 5), on=True)
    controls = widget.children[:-1]
    assert [c.description for c in controls] == ["k", "on"]
    assert widget.children[-1].layout.min_height == "320px"
    assert calls                   # drawn once with the default state


# ------------------------------------------------------ the photo picker
def control(widget, description):
    """The control of ``widget`` (and its boxes) labelled ``description``."""
    todo = [widget]
    while todo:
        w = todo.pop()
        if getattr(w, "description", None) == description:
            return w
        todo += list(getattr(w, "children", ()))
    raise LookupError(description)


def upload(widget, name, content):
    import datetime

    control(widget, "upload").value = ({
        "name": name, "type": "image/png", "size": len(content),
        "content": memoryview(content),
        "last_modified": datetime.datetime(2026, 1, 1)},)


def texts(widget):
    todo, out = [widget], []
    while todo:
        w = todo.pop()
        if type(w).__name__ == "HTML":
            out.append(w.value)
        todo += list(getattr(w, "children", ()))
    return " ".join(out)


def picker(draw, names):
    """The picker of the packaged photographs ``names``, as the chapter
    builds it."""
    return interactive.photo_picker(draw, names, photos.photograph,
                                    photos.photo_from_bytes)


def test_the_picker_draws_its_first_state_then_each_change():
    calls = []
    widget = picker(
        lambda crop, query, title: calls.append((crop.copy(), query, title)),
        ["clock", "camera"])
    first = photo.crop_at(photos.photograph("clock", 384), 0.5, 0.5, 32)[0]
    assert len(calls) == 1 and calls[0][1] == 4 * 8 + 4
    np.testing.assert_array_equal(calls[0][0], first)
    control(widget, "patch row").value = 1
    control(widget, "patch column").value = 2
    assert calls[-1][1] == 1 * 8 + 2
    control(widget, "crop from top").value = 0.0
    control(widget, "crop from left").value = 1.0
    whole = photos.photograph("clock", 384)
    np.testing.assert_array_equal(calls[-1][0], whole[:32, -32:])
    control(widget, "photograph").value = "camera"
    np.testing.assert_array_equal(calls[-1][0],
                                  photos.photograph("camera", 384)[:32, -32:])


def test_an_upload_is_drawn_and_a_bad_one_is_explained(rng):
    calls = []
    widget = picker(lambda crop, query, title: calls.append(crop.copy()),
                    ["clock"])
    grey = (rng.random((100, 150)) * 255).astype(np.uint8)
    upload(widget, "mine.png", encoded(grey))
    menu = control(widget, "photograph")
    assert len(menu.options) == 2 and menu.value == menu.options[-1]
    want = photo.crop_at(photos.photo_from_bytes(encoded(grey), 384, 32),
                         0.5, 0.5, 32)[0]
    np.testing.assert_array_equal(calls[-1], want)
    drawn = len(calls)
    for kind, content in hostile_files().items():
        upload(widget, f"<script>{kind}</script>.png", content)
        assert len(calls) == drawn, kind               # the figure stays
        assert menu.options[-1] == menu.value          # and the menu
        assert len(menu.options) == 2
        assert texts(widget).strip() and "<script" not in texts(widget)
