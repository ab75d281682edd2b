"""Interactive figures, in two layers (every chapter's "Try it" section).

* :func:`patch_explorer`, :func:`frames_explorer`, :func:`bar_explorer` and
  :func:`cost_calculator` return self-contained HTML/JavaScript figures
  built from precomputed numbers. They need no kernel, so they work in the
  static book: pick a patch, see where it attends.
* :func:`live` wraps ``ipywidgets.interactive`` for Jupyter, Colab and
  Binder, where sliders recompute the figure with Python.

Every kernel-free figure works with a keyboard as well as a mouse, and with
a screen reader: the picture you pick a query on is focusable (Tab), the
arrow keys move the query patch, buttons are real buttons that say whether
they are pressed, and a live region states the selection and its strongest
weights in words ("patch (0, 1): most weight on (4, 6) 0.357, ..."), which
screen readers announce after each change. The text is also written into
the HTML by Python, so the figure says something before any script runs.

Weights are drawn in viridis on one fixed colour scale per figure, the
same for every query and head, with a legend that gives its tick values:
two maps of a figure can be compared by their colours. The query patch is
outlined black-white-black, which stands out on every colour of viridis and
on grey images, for every kind of colour vision.

The HTML is a pure function of the inputs (numbers printed with fixed
precision, element ids derived from a hash of the data), so it is byte for
byte stable and nbval can compare it, and it loads nothing from anywhere.
"""

from __future__ import annotations

import hashlib
import html
import json
from importlib import resources

import numpy as np

from . import _stills

from . import cost
from .stereo import DISPARITIES as _DISPARITIES
from ._relations import (bars_fit_labels, explorer_fits_grid,
                         frames_fit_grid, patch_divides_side,
                         stereo_band_fits)
from ._validate import (Constraint, boundary, floats, instance, integer, ints,
                        one_of, optional, pair, positive, positive_int)

__all__ = ["patch_explorer", "frames_explorer", "bar_explorer",
           "cost_calculator", "live", "stereo_explorer", "pad_image",
           "drawing_pad"]


# ------------------------------------------------------------ shared pieces
def _static(name: str) -> str:
    """The text of ``selfattention/static/<name>``, without its header (a
    leading ``/* ... */`` comment, which says what the file is for)."""
    text = resources.files(__package__).joinpath("static", name).read_text(
        encoding="utf-8")
    if text.startswith("/*"):
        text = text[text.index("*/\n") + 3:]
    return text


#: The line of a figure's script where :data:`_COMMON_JS` goes.
_COMMON_AT = "  // common.js: the helpers every figure shares\n"


def _script(name: str) -> str:
    """A figure's script from ``static/``, the shared helpers put in at
    the line that names ``common.js``."""
    return _static(name).replace(_COMMON_AT, _COMMON_JS)


def _viridis_stops(k: int = 16) -> list[list[int]]:
    """``k`` evenly spaced colours of viridis as ``[r, g, b]`` in 0 … 255."""
    from matplotlib import colormaps

    rgba = colormaps["viridis"](np.linspace(0, 1, k))
    return [[int(round(255 * c)) for c in rgb[:3]] for rgb in rgba]


def _rounded(values, digits: int) -> list:
    """``values`` as nested lists of floats with ``digits`` decimals."""
    values = np.asarray(values, dtype=float)
    if values.ndim > 1:
        return [_rounded(v, digits) for v in values]
    return [float(f"{v:.{digits}f}") + 0.0 for v in values]   # no -0.0


def _grey_levels(img) -> list:
    """Grey levels 0 … 255 of an image with values roughly in [0, 1]."""
    return np.clip(np.round(255 * np.asarray(img)), 0, 255).astype(int).tolist()


def _payload(data: dict) -> str:
    """``data`` as JSON that can stand inside a ``<script>`` element.

    Items are separated by ``", "``: long arrays then hold no long run of
    characters without a space, over which the sanitizing regexes of nbval
    would backtrack quadratically.
    """
    text = json.dumps(data, separators=(", ", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c")     # no "</script>" inside


def _escape(text) -> str:
    """Escape ``&``, ``<``, ``>`` and quotes for HTML text and attributes."""
    return html.escape(str(text), quote=True)


def _uid(prefix: str, *parts: str) -> str:
    """An element id made from the figure's content: stable, and distinct
    for two different figures on one page."""
    digest = hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:10]
    return prefix + digest


def _number(x: float) -> str:
    """A tick value as short as it can be: 0, 0.1, 0.25, 2."""
    return np.format_float_positional(round(float(x), 10), trim="-")


def _colour_scale(values, vmax: float | None) -> tuple[float, float, list]:
    """The fixed colour scale of a figure: ``(lo, hi, ticks)``.

    ``lo`` is 0 unless some value is negative; ``hi`` is ``vmax`` when
    given, otherwise the first round tick at or above the largest value;
    ticks are round numbers from matplotlib's ``MaxNLocator``.
    """
    from matplotlib.ticker import MaxNLocator

    values = np.asarray(values, dtype=float)
    locator = MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10])
    low = min(0.0, float(values.min()))
    high = float(values.max()) if vmax is None else float(vmax)
    if high <= low:
        high = low + 1.0
    ticks = [float(t) for t in locator.tick_values(low, high)]
    lo = ticks[0] if low < 0 else 0.0
    hi = ticks[-1] if vmax is None else high
    ticks = [t for t in ticks if lo - 1e-12 <= t <= hi * (1 + 1e-9) + 1e-12]
    return lo, hi, ticks


def _legend(lo: float, hi: float, ticks: list, what: str,
            clipped: bool) -> str:
    """HTML colour bar with tick values and a sentence that reads it."""
    stops = _viridis_stops()
    gradient = ",".join(
        f"rgb({r},{g},{b}) {100 * k / (len(stops) - 1):.2f}%"
        for k, (r, g, b) in enumerate(stops))
    marks = " ".join(
        f'<span style="left:{100 * (t - lo) / (hi - lo):.2f}%">'
        f"{_number(t)}</span>" for t in ticks)
    note = (f" Weights above {_number(hi)} are drawn in the colour of "
            f"{_number(hi)}." if clipped else "")
    return (f'<div class="sa-legend">\n'
            f'<p class="sa-legend-text">Colour: {what}, on one scale for '
            f"the whole figure, from {_number(lo)} (dark purple) to "
            f"{_number(hi)} (yellow).{note}</p>\n"
            f'<div class="sa-bar" aria-hidden="true" style="background:'
            f'linear-gradient(to right,{gradient})"></div>\n'
            f'<div class="sa-ticks" aria-hidden="true">{marks}</div>\n'
            f"</div>\n")


#: Styles of every kernel-free figure. A figure carries its own white
#: background and dark text, so it reads the same in the book's light and
#: dark modes and in Jupyter; focus is a 3-pixel outline (WCAG 2.4.7).
_STYLE = "<style>\n" + _static("figure.css") + "</style>\n"

#: JavaScript shared by the explorers: colours, the query's outline, the
#: patch under the pointer, the arrow keys, the strongest weights.
_COMMON_JS = _static("common.js")

#: How many of the strongest weights the live region reads out.
_TOP = 3


def _strongest(w, k: int = _TOP) -> list[int]:
    """Indices of the ``k`` largest entries of ``w``, ties by index."""
    return sorted(range(len(w)), key=lambda j: (-w[j], j))[:k]


def _at(j: int, cols: int) -> str:
    return f"({j // cols}, {j % cols})"


def _shell(*, uid: str, css_class: str, testid: str, title: str,
           max_width: int, body: str, caption: str, caption_testid: str,
           help_text: str, payload: str, script: str) -> str:
    """The box every kernel-free figure shares, and its script.

    Parameters
    ----------
    uid : str
        Id of the box; ``uid + "-title"``, ``"-help"`` and ``"-cap"`` name
        the title, the instructions and the live caption.
    css_class, testid : str
        Class and ``data-testid`` of the box.
    title : str
        Title above the figure, escaped here; it names the figure's group.
    max_width : int
        Largest width of the box in screen pixels.
    body : str
        HTML between the title and the instructions (controls, canvases,
        legend).
    caption : str
        Text of the live region when the page loads (escaped here); the
        script rewrites it after every change, and screen readers announce
        the new text.
    caption_testid : str
        ``data-testid`` of the live region.
    help_text : str
        How to use the figure with a mouse and with the keyboard.
    payload : str
        JSON from :func:`_payload`, which the script reads as ``D``.
    script : str
        The figure's JavaScript; it can use ``D``, ``root`` (the box) and
        ``cap`` (the live region).

    Returns
    -------
    str
    """
    return (
        f'<div id="{uid}" class="sa-fig {css_class}" data-testid="{testid}" '
        f'role="group" aria-labelledby="{uid}-title" '
        # Lumino (JupyterLab, Notebook 7) skips its keyboard shortcuts for
        # keys pressed inside an element with this attribute; each control
        # carries it too (_OWN_KEYS, which says why).
        f"{_OWN_KEYS} "
        f'style="max-width:{max_width}px">\n{_STYLE}'
        f'<div class="sa-title" id="{uid}-title">{_escape(title)}</div>\n'
        f"{body}"
        f'<p class="sa-help" id="{uid}-help">{_escape(help_text)}</p>\n'
        f'<p class="sa-still-note">{_STILL_NOTE}</p>\n'
        f'<p class="sa-caption" id="{uid}-cap" '
        f'data-testid="{caption_testid}" aria-live="polite">'
        f"{_escape(caption)}</p>\n</div>\n"
        f"<script>\n(function() {{\n  var D = {payload};\n"
        f'  var root = document.getElementById("{uid}");\n'
        f'  var cap = document.getElementById("{uid}-cap");\n'
        '  root.querySelector(".sa-still-note").remove();\n'
        f"{script}}})();\n</script>")


#: Shown under a figure whose script did not run (an untrusted notebook);
#: the script removes it.
_STILL_NOTE = ("This is a still of the figure as it opens. To explore it, "
               "run this cell, or trust the notebook (in JupyterLab: File "
               "\u2192 Trust Notebook).")


def _html(text: str):
    from IPython.display import HTML

    return HTML(text)


#: Lumino (JupyterLab, Notebook 7) matches a shortcut's selector against
#: the focused element first and then its ancestors, and stops at the first
#: element with this attribute (``targetDistance`` in @lumino/commands). The
#: arrow keys of command mode are bound to ``.jp-Notebook.jp-mod-commandMode
#: :not(.jp-mod-readWrite) :focus``, which a focused canvas matches itself,
#: so the attribute must be on each focusable control, not only on the
#: figure. (JupyterLab dispatches shortcuts in the bubbling phase, after the
#: figure's own handler has taken the key; Notebook 7 in the capture phase,
#: before it, so there only the attribute lets the key through.)
_OWN_KEYS = 'data-lm-suppress-shortcuts="true"'


def _buttons(group_label: str, attribute: str, labels, pressed: int) -> str:
    """A row of toggle buttons, one of them pressed."""
    buttons = "".join(
        f'<button type="button" {_OWN_KEYS} {attribute}="{k}" aria-pressed='
        f'"{"true" if k == pressed else "false"}">{_escape(label)}</button>'
        for k, label in enumerate(labels))
    return (f'<div class="sa-buttons" role="group" '
            f'aria-label="{_escape(group_label)}">{buttons}</div>\n')


def _labels(what: str) -> Constraint:
    """A sequence of labels (not a single string), returned as strings."""

    def convert(value, name):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise TypeError(f"{name} must be a sequence of {what}, got "
                            f"{type(value).__name__}")
        return [str(x) for x in value]

    return Constraint(convert, f"a sequence of {what}", valid=lambda: ["a"],
                      invalid=lambda: [("ab", TypeError), (3, TypeError)])


# ---------------------------------------------------------- patch explorer
def _patch_caption(w, query: int, cols: int, head: int, heads: int,
                   names=None) -> str:
    head_text = f", head {head + 1} of {heads}" if heads > 1 else ""
    if names:
        head_text += f" ({names[head]})"
    return (f"patch {_at(query, cols)}{head_text}: most weight on "
            + ", ".join(f"{_at(j, cols)} {w[j]:.3f}" for j in _strongest(w)))


@boundary(img=floats(ndim=2), A=floats(min_ndim=2),
          grid=pair(positive_int()), patch=positive_int(),
          query=integer(0, what="a patch index"), scale=positive_int(),
          vmax=optional(positive()),
          head_names=optional(_labels("head names")),
          checks=(explorer_fits_grid,))
def patch_explorer(img, A, grid, patch, query=0, title="", scale=8,
                   vmax=None, head_names=None):
    """A kernel-free figure: pick a patch, see its attention map.

    The image (left) and the attention weights of the query patch over all
    patches (right), one colour scale for every query and head with a
    legend. Click a patch of either picture, or focus the image with Tab
    and move the query with the arrow keys (Home, End: first and last
    patch); buttons switch heads. Below, a live region reads out the query
    and its strongest weights.

    Parameters
    ----------
    img : array_like, shape (H·P, W·P)
        Grayscale image with values roughly in [0, 1].
    A : array_like, shape (n, n) or (h, n, n)
        Attention weights, one row per query patch, ``n = H·W``. With a
        head axis, buttons switch between the heads.
    grid : (H, W)
        Patch grid.
    patch : int
        Patch side ``P`` in pixels.
    query : int
        Patch selected when the page loads, ``r·W + c``.
    title : str
        Title shown above the figure, and the name of its group.
    scale : int
        Screen pixels per image pixel.
    vmax : float, optional
        Top of the colour scale; by default the first round number at or
        above the largest weight. Pass the same value to figures that are
        compared.
    head_names : sequence of str, optional
        One name per head (what the text calls it), shown on its button
        and in the caption beside its number.

    Returns
    -------
    IPython.display.HTML
        Self-contained HTML and JavaScript, byte-for-byte stable for the
        same inputs (weights are stored with 3 decimals).

    Raises
    ------
    ValueError
        If ``A`` or ``img`` does not fit the grid, ``query`` is not one
        of its patches, or ``head_names`` does not name every head.
    """
    A = A[None] if A.ndim == 2 else A
    H, W = grid
    heads, n = A.shape[0], H * W
    weights = _rounded(A, 3)
    lo, hi, ticks = _colour_scale(weights, vmax)
    data = {
        "pixels": _grey_levels(img), "weights": weights,
        "rows": H, "cols": W, "patch": patch, "scale": scale,
        "query": query, "lut": _viridis_stops(), "lo": lo, "hi": hi,
        "top": _TOP,
    }
    if head_names is not None:
        data["names"] = head_names
    payload = _payload(data)
    uid = _uid("sa-", payload, str(title))
    size = W * patch * scale, H * patch * scale
    controls = _buttons("attention head", "data-head",
                        [f"head {k + 1}" + (f": {head_names[k]}"
                                            if head_names else "")
                         for k in range(heads)],
                        0) if heads > 1 else ""
    heads_text = " of the selected head" if heads > 1 else ""
    side = patch * scale
    r, c = divmod(query, W)
    pick_still = _stills.outline(_stills.grey(data["pixels"], scale), r, c,
                                 side)
    map_still = _stills.outline(_stills.attention_map(
        weights[0][query], H, W, side, lo, hi, data["lut"]), r, c, side)
    body = (
        controls + '<div class="sa-row">\n'
        f'<figure><canvas class="sa-pick" width="{size[0]}" '
        f'height="{size[1]}" style="{_stills.background(pick_still)}" '
        f'tabindex="0" role="application" {_OWN_KEYS} '
        f'aria-label="Image cut into {H} by {W} patches, the query patch '
        f'outlined: arrow keys move the query" '
        f'aria-describedby="{uid}-help"></canvas>'
        "<figcaption>image: pick the query patch</figcaption></figure>\n"
        f'<figure><canvas class="sa-map" width="{size[0]}" '
        f'height="{size[1]}" style="{_stills.background(map_still)}" '
        f'role="img" aria-label="Attention '
        f"weights{heads_text} of the query patch over the {n} patches, in "
        f'the grid of the image" aria-describedby="{uid}-cap"></canvas>'
        "<figcaption>attention weights of the query patch</figcaption>"
        "</figure>\n</div>\n"
        + _legend(lo, hi, ticks, "the attention weight of the query patch "
                  "on each patch", clipped=float(np.max(weights)) > hi))
    help_text = ("Click a patch, or focus the image and press the arrow "
                 "keys (Home and End: first and last patch), to move the "
                 "query." + (" The buttons switch heads." if heads > 1
                             else ""))
    caption = _patch_caption(weights[0][query], query, W, 0, heads,
                             head_names)
    return _html(_shell(
        uid=uid, css_class="sa-explorer", testid="patch-explorer",
        title=title or "Attention of one patch", max_width=2 * size[0] + 40,
        body=body, caption=caption, caption_testid="explorer-caption",
        help_text=help_text, payload=payload, script=_PATCH_JS))


_PATCH_JS = _script("patch_explorer.js")


# --------------------------------------------------------- frames explorer
def _frames_caption(w, query: int, n: int, cols: int, labels,
                    key_labels, per_frame: bool = False) -> str:
    def where(j):
        return j // n, (j % n) // cols, j % cols

    f, r, c = where(query)
    if per_frame:
        best = [t * n + _strongest(w[t * n:(t + 1) * n], 1)[0]
                for t in range(len(key_labels))]
        return (f"patch ({r}, {c}) of each panel, picked in {labels[f]}; "
                f"where it looks most in each map: " + ", ".join(
                    f"{key_labels[j // n]} {_at(j % n, cols)} {w[j]:.3f}"
                    for j in best))
    order = _strongest(w)
    kf, kr, kc = where(order[0])
    return (f"query: {labels[f]}, patch ({r}, {c}); most weight on "
            + ", ".join(f"{key_labels[j // n]} {_at(j % n, cols)} "
                        f"{w[j]:.3f}" for j in order)
            + f"; displacement to the strongest (rows, columns): "
              f"({kr - r}, {kc - c})")


@boundary(frames=floats(ndim=3), A=floats(ndim=2),
          grid=pair(positive_int()), patch=positive_int(),
          query=integer(0, what="a query index"),
          keys=optional(floats(ndim=3)), scale=positive_int(),
          vmax=optional(positive()), per_frame=instance(bool),
          checks=(frames_fit_grid,))
def frames_explorer(frames, A, grid, patch, query=0, keys=None, title="",
                    labels=None, key_labels=None, scale=6, vmax=None,
                    per_frame=False):
    """A kernel-free figure: pick a patch of one frame, see where it looks.

    Attention between the patches of several frames: the frames of a video
    (self-attention over space and time, :ref:`ch-nonlocal`) or two
    different images (cross-attention, :ref:`ch-matching`). The top row
    shows the query frames; the bottom row the weights of the query patch
    over every key frame, on one colour scale for every query, with a
    legend; with ``keys``, a middle row shows the key frames. Click a
    patch, or focus a query frame with Tab and move the query with the
    arrow keys (Home, End: first and last patch; Enter or Space makes the
    focused frame the query's frame). A live
    region names the strongest keys and the displacement to the strongest,
    or with ``per_frame`` the strongest key of each key frame's map.

    Parameters
    ----------
    frames : array_like, shape (F, H·P, W·P)
        Query frames, grayscale with values roughly in [0, 1].
    A : array_like, shape (F·n, G·n)
        Attention weights, ``n = H·W`` patches per frame; query
        ``f·n + r·W + c`` is patch (r, c) of frame ``f``, keys likewise.
    grid : (H, W)
        Patch grid of every frame.
    patch : int
        Patch side ``P`` in pixels.
    query : int
        Query selected when the page loads.
    keys : array_like, shape (G, H·P, W·P), optional
        Key frames (cross-attention). By default the keys are the query
        frames themselves.
    title : str
        Title shown above the figure, and the name of its group.
    labels, key_labels : sequence of str, optional
        Names of the frames (default "frame 0", "frame 1", ...).
    scale : int
        Screen pixels per image pixel.
    vmax : float, optional
        Top of the colour scale; by default the first round number at or
        above the largest weight.
    per_frame : bool
        Each key frame's block of a row is a map of its own (one head's,
        one image's): the caption names each map's strongest key, and no
        displacement (which compares places in one scene).

    Returns
    -------
    IPython.display.HTML
        Self-contained HTML and JavaScript, byte-for-byte stable for the
        same inputs (weights are stored with 3 decimals).

    Raises
    ------
    ValueError
        If the frames do not fit the grid, ``A`` does not fit the frames,
        a label list has the wrong length, or ``query`` is out of range.
    """
    cross = keys is not None
    key_frames = keys if cross else frames
    H, W = grid
    n = H * W

    def names(given, count):
        return ([f"frame {t}" for t in range(count)] if given is None
                else [str(x) for x in given])

    labels = names(labels, len(frames))
    key_labels = labels if not cross and key_labels is None else names(
        key_labels, len(key_frames))
    if len(labels) != len(frames) or len(key_labels) != len(key_frames):
        raise ValueError(
            f"labels need one name per frame ({len(frames)} and "
            f"{len(key_frames)}), got {len(labels)} and {len(key_labels)}")
    weights = _rounded(A, 3)
    lo, hi, ticks = _colour_scale(weights, vmax)
    data = {
        "q": _grey_levels(frames), "k": _grey_levels(key_frames),
        "cross": cross, "weights": weights,
        "rows": H, "cols": W, "patch": patch, "scale": scale,
        "query": query, "lut": _viridis_stops(), "lo": lo, "hi": hi,
        "labels": labels, "keyLabels": key_labels, "top": _TOP,
    }
    if per_frame:
        data["perFrame"] = True
    payload = _payload(data)
    uid = _uid("sa-frames-", payload, str(title))
    w, h = W * patch * scale, H * patch * scale
    size = f'width="{w}" height="{h}"'

    # What the script draws first, as each canvas's background (_stills).
    side, (f0, r0, c0) = patch * scale, (query // n, *divmod(query % n, W))
    stills = {
        "sa-pick": lambda t: _stills.grey(data["q"][t], scale),
        "sa-key": lambda t: _stills.grey(data["k"][t], scale),
        "sa-map": lambda t: _stills.attention_map(
            weights[query][t * n:(t + 1) * n], H, W, side, lo, hi,
            data["lut"])}

    def still(kind, t):
        rgb = stills[kind](t)
        if t == f0 and (kind == "sa-pick" or (kind == "sa-map"
                                             and not cross)):
            rgb = _stills.outline(rgb, r0, c0, side)
        return _stills.background(rgb)

    def cells(kind, names, extra, label, caption):
        return "".join(
            f'<figure><canvas class="{kind}" data-frame="{t}" {size} '
            f'style="{still(kind, t)}" '
            f'{extra} aria-label="{label(_escape(name))}"></canvas>'
            f"<figcaption>{caption(_escape(name))}</figcaption></figure>\n"
            for t, name in enumerate(names))

    picks = cells(
        "sa-pick", labels, f'tabindex="0" role="application" {_OWN_KEYS} '
        f'aria-describedby="{uid}-help"',
        lambda name: f"{name}, cut into {H} by {W} patches: arrow keys "
                     "move the query in this frame",
        (lambda name: f"{name} (queries)") if cross else (lambda name: name))
    shown = cells(
        "sa-key", key_labels, 'role="img"',
        lambda name: f"{name}, the key frame",
        lambda name: f"{name} (keys)") if cross else ""
    maps = cells(
        "sa-map", key_labels, f'role="img" aria-describedby="{uid}-cap"',
        (lambda name: f"Attention weights of the patch at the picked "
                      f"position of {name} over its {n} patches")
        if per_frame else
        (lambda name: f"Attention weights of the query patch over the {n} "
                      f"patches of {name}"), lambda name: f"weights on {name}")
    # one row when every panel fits in it, else a row for each kind
    panels = [len(frames), len(key_frames) if cross else 0, len(key_frames)]
    one_row = sum(panels) <= 4
    rows = [picks + shown + maps] if one_row else [
        part for part in (picks, shown, maps) if part]
    body = "".join(f'<div class="sa-row">\n{part}</div>\n' for part in rows)
    body += _legend(
        lo, hi, ticks, "the attention weight of the query patch on each "
        "key patch", clipped=float(np.max(weights)) > hi)
    help_text = ("Click a patch, or focus a query frame and press the arrow "
                 "keys (Home and End: first and last patch; Enter or "
                 "Space: the same patch in the focused frame), to move the "
                 "query.")
    caption = _frames_caption(weights[query], query, n, W, labels,
                              key_labels, per_frame)
    widest = sum(panels) if one_row else max(panels)
    return _html(_shell(
        uid=uid, css_class="sa-frames", testid="frames-explorer",
        title=title or "Attention across frames",
        max_width=widest * (w + 12) + 30, body=body, caption=caption,
        caption_testid="frames-caption", help_text=help_text,
        payload=payload, script=_FRAMES_JS))


_FRAMES_JS = _script("frames_explorer.js")


# ------------------------------------------------------------ bar explorer
def _bars_caption(values, choice: str, series, xlabel: str) -> str:
    where = f" at {xlabel} " if xlabel else " at "
    return f"{choice}: " + "; ".join(
        f"{name} largest {max(v):.4f}{where}{_strongest(v, 1)[0]}"
        for name, v in zip(series, values))


@boundary(values=floats(ndim=3), choices=_labels("button labels"),
          series=_labels("panel titles"),
          ymax=optional(positive()), choice=integer(0, what="a choice"),
          width=integer(80, what="a width in pixels"),
          height=integer(80, what="a height in pixels"),
          checks=(bars_fit_labels,))
def bar_explorer(values, choices, series, title="", xlabel="", ymax=None,
                 choice=0, width=300, height=180, ylabel=""):
    """A kernel-free figure: buttons switch between precomputed bar charts.

    Each choice (a button) shows ``len(series)`` panels side by side, each a
    bar chart of ``n`` values on one fixed vertical scale; the live region
    gives each panel's largest bar and where it is. Each bar is numbered
    under its panel (every fifth when the bars are too narrow for all).
    :ref:`ch-scaling` uses it for one attention row at several ``d_k``,
    unscaled and scaled.

    Parameters
    ----------
    values : array_like, shape (n_choices, n_series, n)
        The bars: ``values[c, s]`` is panel ``s`` under choice ``c``.
    choices : sequence of str, length n_choices
        Button labels.
    series : sequence of str, length n_series
        Panel titles.
    title : str
        Title shown above the figure, and the name of its group.
    xlabel : str
        Label under every panel (what the bars are indexed by).
    ylabel : str
        Label of every panel's vertical axis (what the bars measure).
    ymax : float, optional
        Top of the vertical axis; defaults to the largest value.
    choice : int
        Choice shown when the page loads.
    width, height : int
        Size of one panel in screen pixels, at least 80 each (the
        margins take up to 56 across and 58 down).

    Returns
    -------
    IPython.display.HTML
        Self-contained HTML and JavaScript, byte-for-byte stable for the
        same inputs (values are stored with 4 decimals).

    Raises
    ------
    ValueError
        If ``values`` is not a finite non-negative 3-D array, the number of
        labels does not match its shape, or ``choice`` is out of range.
    """
    top = float(values.max()) if ymax is None else float(ymax)
    stored = _rounded(values, 4)
    data = {
        "values": stored,
        "choices": choices, "series": series, "xlabel": str(xlabel),
        "ylabel": str(ylabel), "ymax": float(f"{top:.4f}") or 1.0,
        "choice": choice, "w": width, "h": height,
        "colour": _viridis_stops(5)[1],
        # margins: left (room for a vertical label), top, bottom (numbers
        # and the label under the bars)
        "pad": 48 if ylabel else 34, "top": 22, "foot": 36,
    }
    payload = _payload(data)
    uid = _uid("sa-bars-", payload, str(title))
    size = len(series) * width
    panels = ", ".join(series)
    body = (
        _buttons("choice", "data-choice", choices, choice)
        + f'<canvas width="{size}" height="{height}" style="'
        + _stills.background(_stills.bars(
            stored[choice], data["ymax"], width, height, data["colour"],
            data["pad"], data["top"], data["foot"]))
        + '" role="img" '
        f'aria-label="Bar charts of the selected choice, one panel each for '
        f'{_escape(panels)}, on a vertical scale from 0 to '
        f'{data["ymax"]:g}" aria-describedby="{uid}-cap"></canvas>\n')
    caption = _bars_caption(stored[choice], choices[choice], series,
                            str(xlabel))
    return _html(_shell(
        uid=uid, css_class="sa-bars", testid="bar-explorer",
        title=title or "Bar charts", max_width=size + 30, body=body,
        caption=caption, caption_testid="bar-caption",
        help_text="The buttons switch between the choices (Tab to reach "
                  "them, Enter or Space to press one).",
        payload=payload, script=_BARS_JS))


_BARS_JS = _script("bar_explorer.js")


# --------------------------------------------------------- cost calculator
_SIDES = (32, 64, 96, 128, 224, 256, 384, 512, 1024)
_DTYPES = (("float16", 2), ("float32", 4), ("float64", 8))
_VIT_ENTRIES = 38_416            # 196² score entries: ViT-B/16 at 224 px


def _calculator_rows(image_size: int, patch_size: int, heads: int,
                     dtype: str) -> list[tuple[str, str]]:
    """The calculator's table, from the formulas of :mod:`.cost`."""
    n = cost.tokens((image_size, image_size), (patch_size, patch_size))
    per_head = cost.score_entries(n)
    return [("tokens n", f"{n:,}"),
            ("score entries per head, n²", f"{per_head:,}"),
            (f"memory for {heads} head(s), one layer",
             cost.human_bytes(cost.attention_bytes(n, heads,
                                                   np.dtype(dtype)))),
            (f"entries per head / ViT-B/16 at 224 px ({_VIT_ENTRIES:,})",
             f"{per_head / _VIT_ENTRIES:,.2f}")]


def _calculator_caption(image_size, patch_size, heads, dtype, rows) -> str:
    return (f"{image_size} × {image_size} pixels in {patch_size} × "
            f"{patch_size} patches: {rows[0][1]} tokens, {rows[1][1]} score "
            f"entries per head, {rows[2][1]} for {heads} head(s) in {dtype}")


def _offered_side(value, name):
    """An integer side that the calculator's menu offers."""
    side = positive_int()(value, name)
    return one_of(*_SIDES)(side, name)


_SIDE = Constraint(_offered_side, "one of " + ", ".join(map(str, _SIDES)),
                   valid=lambda: 224,
                   invalid=lambda: [(225, ValueError), (224.0, TypeError),
                                    ("224", TypeError)])


@boundary(image_size=_SIDE, patch_size=positive_int(),
          heads=integer(1, 16, what="a number of heads"),
          dtype=one_of(*(name for name, _ in _DTYPES)),
          checks=(patch_divides_side,))
def cost_calculator(image_size=224, patch_size=16, heads=1,
                    dtype="float32"):
    """A kernel-free calculator: patch size → tokens, entries, bytes.

    The table is first filled in Python, from :func:`.cost.tokens`,
    :func:`.cost.score_entries`, :func:`.cost.attention_bytes` and
    :func:`.cost.human_bytes` (:ref:`ch-cost`), so the stored page shows the
    default setting even without JavaScript; menus then recompute it in
    JavaScript with the same formulas, and a live region reads the new
    numbers out.

    Parameters
    ----------
    image_size : int
        Side of the square image in pixels, one of 32, 64, 96, 128, 224,
        256, 384, 512, 1024.
    patch_size : int
        Initial patch side; must divide ``image_size``.
    heads : int
        Initial number of heads (1 to 16).
    dtype : str
        ``"float16"``, ``"float32"`` or ``"float64"``.

    Returns
    -------
    IPython.display.HTML

    Raises
    ------
    ValueError
        If a setting is not one the menus offer.
    """
    rows = _calculator_rows(image_size, patch_size, heads, dtype)
    uid = _uid("sa-cost-", f"{image_size}-{patch_size}-{heads}-{dtype}")

    def options(values, chosen, label=str):
        return "".join(
            f'<option value="{v}"{" selected" if v == chosen else ""}>'
            f"{label(v)}</option>" for v in values)

    def menu(text, key, choices):
        return f'<label>{text} <select {_OWN_KEYS} data-in="{key}">' \
               f'{choices}</select>' \
               "</label>\n"

    patches = [p for p in range(1, image_size + 1) if image_size % p == 0]
    table = "".join(
        f'<tr><th scope="row"{" data-heads" if i == 2 else ""}>'
        f'{_escape(k)}</th><td data-row="{i}">{_escape(v)}</td></tr>\n'
        for i, (k, v) in enumerate(rows))
    body = (
        '<div class="sa-controls">\n'
        + menu("image", "side",
               options(_SIDES, image_size, lambda v: f"{v} × {v}"))
        + menu("patch", "patch",
               options(patches, patch_size, lambda v: f"{v} × {v}"))
        + menu("heads", "heads", options(range(1, 17), heads))
        + menu("number type", "bytes", "".join(
            f'<option value="{b}"{" selected" if name == dtype else ""}>'
            f"{name}</option>" for name, b in _DTYPES))
        + "</div>\n"
        f'<table><caption class="sa-help">One attention layer over one '
        f"image</caption>\n<tbody>\n{table}</tbody></table>\n")
    return _html(_shell(
        uid=uid, css_class="sa-cost", testid="cost-calculator",
        title="What attention over one image costs", max_width=560,
        body=body,
        caption=_calculator_caption(image_size, patch_size, heads, dtype,
                                    rows),
        caption_testid="cost-caption",
        help_text="Choose an image size, a patch size, a number of heads "
                  "and a number type; the table and the sentence below "
                  "follow.",
        payload=_payload({"vit": _VIT_ENTRIES}), script=_CALC_JS))


_CALC_JS = _script("cost_calculator.js")


# -------------------------------------------------------------------- live
def live(function, **widgets):
    """Wrap ``ipywidgets.interactive`` with the book's defaults.

    ``function`` draws a figure from keyword arguments; each keyword in
    ``widgets`` is an ipywidgets control (or an abbreviation such as a
    ``(min, max, step)`` tuple), which ipywidgets labels with the keyword's
    name. Returns the widget; display it as the last line of a cell. Runs
    in Jupyter, Colab and Binder, where a kernel is attached; the static
    book shows the figure drawn just before it.
    """
    import ipywidgets

    widget = ipywidgets.interactive(function, **widgets)
    for control in widget.children[:-1]:
        # the whole label ("temperature", not "temperat…"), and the slider
        # beside it
        control.style.description_width = "initial"
    widget.children[-1].layout.min_height = "320px"
    return widget


# --------------------------------------------------------- stereo explorer
def _hex_rows(levels, chunk: int = 32) -> list[str]:
    """Rows of values 0 … 255 as hex strings, a space every ``chunk``
    values (no long run without a space, see :func:`_payload`)."""
    rows = []
    for row in np.asarray(levels, dtype=int):
        text = "".join(f"{v:02x}" for v in row)
        rows.append(" ".join(text[i:i + 2 * chunk]
                             for i in range(0, len(text), 2 * chunk)))
    return rows


def _stereo_caption(levels, truth, row: int, c: int) -> str:
    """The caption the script writes, for weights stored as ``levels``
    (0 … 255) and the truth rounded to 0.1 (None: unknown)."""
    w = [v / 255 for v in levels]
    best = ", ".join(f"disparity {d} ({w[d]:.2f})" for d in _strongest(w))
    told = ("unknown" if truth is None else f"{truth:.1f}, right column "
            f"{c - truth:.1f}")
    return (f"left pixel: row {row}, column {c}; most weight on "
            f"{best}; true disparity {told}")


@boundary(left=floats(ndim=2), right=floats(ndim=2),
          weights=floats(ndim=3), truth=_DISPARITIES,
          step=positive_int(), query=pair(integer(0), ("row", "column")),
          image_rows=optional(ints(ndim=1)), scale=positive_int(),
          vmax=optional(positive()), checks=(stereo_band_fits,))
def stereo_explorer(left, right, weights, truth, step=5, query=(0, 0),
                    image_rows=None, title="", scale=2, vmax=None):
    """A kernel-free figure: pick a left pixel, see its weights on the
    right row (:ref:`ch-matching`).

    Parameters
    ----------
    left, right : array_like, shape (h, W)
        A band of rows of the two images, grey values roughly in [0, 1].
    weights : array_like, shape (h, W, D + 1)
        For each left pixel, its weights on the right pixels ``x − d`` of
        its row, ``d = 0 … D`` (each row sums to 1).
    truth : array_like, shape (h, W)
        True disparity of each left pixel, NaN where unknown.
    step : int
        Queries are every ``step``-th row and column of the band.
    query : (int, int)
        Pixel (row, column) of the band selected when the page loads;
        moved to the nearest query.
    image_rows : array_like of int, shape (h,), optional
        The row of the whole image that each row of the band shows (for
        the caption; a band may stack several blocks of rows). Default
        ``0 … h - 1``.
    title : str
        Title above the figure, and the name of its group.
    scale : int
        Screen pixels per image pixel.
    vmax : float, optional
        Top of the colour scale (larger weights get its colour); by default
        the first round number at or above the largest weight.

    Returns
    -------
    IPython.display.HTML
        Self-contained HTML and JavaScript. The images and the weights are
        stored as levels 0 … 255 (weights to 1/255), so the HTML is byte for
        byte stable for the same inputs.
    """
    h, W = left.shape
    rows, cols = np.arange(0, h, step), np.arange(0, W, step)
    P = weights[rows][:, cols]                          # (h', W', D + 1)
    lo, hi, ticks = _colour_scale(P, vmax)
    levels = np.clip(np.round(255 * P), 0, 255).astype(int) \
        .reshape(-1, P.shape[-1])
    t = truth[rows][:, cols]
    named = (np.arange(h) if image_rows is None else image_rows)[rows]
    qr = int(np.argmin(np.abs(rows - query[0])))
    qc = int(np.argmin(np.abs(cols - query[1])))
    data = {"left": _hex_rows(_grey_levels(left)),
            "right": _hex_rows(_grey_levels(right)),
            "weights": _hex_rows(levels), "rows": rows.tolist(),
            "cols": cols.tolist(), "W": W, "h": h, "scale": scale,
            "truth": [[None if not np.isfinite(v) else round(float(v), 1)
                       for v in row] for row in t],
            "imageRows": named.tolist(), "query": [qr, qc],
            "lut": _viridis_stops(),
            "lo": lo, "hi": hi, "top": _TOP}
    payload = _payload(data)
    uid = _uid("sa-stereo-", payload, str(title))
    w_px, h_px = W * scale, h * scale
    help_text = ("Click a pixel of the left image, or focus it and press the "
                 "arrow keys, to move the query; the strip under the right "
                 "image colours the right pixels of the query's row by the "
                 "query's weight, and the white tick marks the true match.")
    # What the script draws first, as each canvas's background (_stills):
    # the images with the query's mark, and the strip of its weights.
    r0, c0, t0 = int(rows[qr]), int(cols[qc]), data["truth"][qr][qc]
    mark = 4

    def marked(rgb, x):
        return _stills.frame(rgb, (x + 0.5) * scale - mark,
                             (r0 + 0.5) * scale - mark, 2 * mark, 2 * mark)
    pick_still = marked(_stills.grey(_grey_levels(left), scale), c0)
    key_still = _stills.grey(_grey_levels(right), scale)
    key_still[int((r0 + 0.5) * scale)] = 255           # the query's row
    if t0 is not None:
        key_still = marked(key_still, c0 - t0)
    strip = np.full((24, w_px, 3), 255, dtype=np.uint8)
    shown = levels[qr * len(cols) + qc] / 255
    for d in range(min(len(shown), c0 + 1)):
        strip[:18, (c0 - d) * scale:(c0 - d + 1) * scale] = _stills.colour(
            shown[d], lo, hi, data["lut"])
    if t0 is not None:
        x = int(round((c0 - t0 + 0.5) * scale))
        strip[14:24, max(x - 2, 0):x + 2] = 0
        strip[16:24, max(x - 1, 0):x + 1] = 255
    body = (
        f'<div class="sa-row">\n<figure><canvas class="sa-pick" '
        f'width="{w_px}" height="{h_px}" '
        f'style="{_stills.background(pick_still)}" '
        f'tabindex="0" role="application" {_OWN_KEYS} '
        f'aria-describedby="{uid}-help" aria-label="left image, {h} rows: '
        f'arrow keys move the query">'
        f'</canvas><figcaption>left image (queries)</figcaption></figure>\n'
        f'<figure><canvas class="sa-key" width="{w_px}" height="{h_px}" '
        f'style="{_stills.background(key_still)}" '
        f'role="img" aria-label="right image, the same rows"></canvas>'
        f'<canvas class="sa-map" width="{w_px}" height="24" '
        f'style="{_stills.background(strip)}" role="img" '
        f'aria-describedby="{uid}-cap" aria-label="weights of the query on '
        f'the right pixels of its row"></canvas>'
        f'<figcaption>right image (keys) and the weights on the query\'s '
        f'row</figcaption></figure>\n</div>\n')
    body += _legend(lo, hi, ticks, "the weight of the query pixel on each "
                    "right pixel of its row", clipped=float(P.max()) > hi)
    caption = _stereo_caption(levels[qr * len(cols) + qc],
                              data["truth"][qr][qc], int(named[qr]),
                              int(cols[qc]))
    return _html(_shell(
        uid=uid, css_class="sa-stereo", testid="stereo-explorer",
        title=title or "Matching along the row", max_width=w_px + 30,
        body=body, caption=caption, caption_testid="stereo-caption",
        help_text=help_text, payload=payload, script=_STEREO_JS))


_STEREO_JS = _script("stereo_explorer.js")


# ------------------------------------------------------------- drawing pad
def _cells_of(image, cells):
    """Which cells of a ``cells × cells`` grid over ``image`` hold ink."""
    side = image.shape[0] // cells
    blocks = image.reshape(cells, side, cells, side).mean(axis=(1, 3))
    return blocks > 0.3                                  # (cells, cells)


def _image_of(on, side, soften):
    """A grey image from the cells that are on: each cell ``side`` pixels
    of ink, softened by a Gaussian of ``soften`` pixels, peak at 1."""
    from scipy.ndimage import gaussian_filter

    img = np.kron(on.astype(float), np.ones((side, side)))
    img = gaussian_filter(img, soften) if soften else img
    return img / img.max() if img.max() > 0 else img


def pad_image(image, cells=14, soften=0.7):
    """What :func:`drawing_pad` draws when it starts from ``image``
    (28, 28): the cells with ink, softened; the default state's figure."""
    return _image_of(_cells_of(np.asarray(image), cells),
                     image.shape[-1] // cells, soften)


def drawing_pad(draw, images, cells=14, soften=0.7):
    """A live widget: draw a digit on a grid of toggle buttons, or start
    from one of ``images``, and see ``draw(image)`` redrawn.

    Each of the ``cells × cells`` buttons paints a square of
    ``28 / cells`` pixels; the picture is softened with a Gaussian of
    ``soften`` pixels so that its strokes look like a scanned pen's.
    ``draw`` receives the (28, 28) image in [0, 1] and makes a figure. It
    needs a kernel (Jupyter, Colab, Binder); the book shows the figure of
    the default state before it.
    """
    import ipywidgets as w

    side = images.shape[-1] // cells
    buttons = [w.ToggleButton(layout=w.Layout(width="16px", height="16px",
                                              padding="0", margin="0"))
               for _ in range(cells * cells)]
    pad = w.GridBox(buttons, layout=w.Layout(
        grid_template_columns=f"repeat({cells}, 16px)", grid_gap="1px"))
    start = w.Dropdown(options=[(f"test digit {k}", k)
                                for k in range(len(images))],
                       description="start from")
    clear = w.Button(description="clear")
    out = w.Output()
    busy = [False]

    def redraw(_=None):
        if busy[0]:
            return
        on = np.array([b.value for b in buttons]).reshape(cells, cells)
        with out:
            out.clear_output(wait=True)
            draw(_image_of(on, side, soften))

    def load(on):
        busy[0] = True
        for b, v in zip(buttons, on.ravel()):
            b.value = bool(v)
        busy[0] = False
        redraw()

    for b in buttons:
        b.observe(redraw, "value")
    start.observe(lambda c: load(_cells_of(images[c["new"]], cells)),
                  "value")
    clear.on_click(lambda _: load(np.zeros((cells, cells), bool)))
    load(_cells_of(images[0], cells))
    return w.HBox([w.VBox([start, pad, clear]), out])
