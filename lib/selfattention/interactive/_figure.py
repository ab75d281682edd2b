"""What every kernel-free figure shares (not part of the API): the scripts and
styles of ``static/``, the box and live caption, the colour scale and legend.
"""

from __future__ import annotations

import hashlib
import html
import json
from importlib import resources

import numpy as np

from .._validate import Constraint


def _static(name: str) -> str:
    """The text of ``selfattention/static/<name>``, without its header (a
    leading ``/* ... */`` comment, which says what the file is for)."""
    text = resources.files("selfattention").joinpath("static", name).read_text(
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
    """``data`` as JSON that can stand inside a ``<script>`` element."""
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
    """The fixed colour scale of a figure: ``(lo, hi, ticks)``."""
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
    """The box every kernel-free figure shares, and its script."""
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
