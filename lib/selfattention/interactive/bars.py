"""The bar explorer: a bar chart per panel, with buttons that switch between
precomputed choices (:ref:`ch-scaling`).
"""

from __future__ import annotations

from .. import _stills
from .._validate import (boundary, floats, integer, optional, positive,
                         require)
from ._figure import (_buttons, _escape, _html, _labels, _payload, _rounded,
                      _script, _shell, _strongest, _uid, _viridis_stops)


def _bars_caption(values, choice: str, series, xlabel: str) -> str:
    where = f" at {xlabel} " if xlabel else " at "
    return f"{choice}: " + "; ".join(
        f"{name} largest {max(v):.4f}{where}{_strongest(v, 1)[0]}"
        for name, v in zip(series, values))


def _bars_fit_labels(values, choices, series, choice) -> None:
    """Non-negative bars, one label per choice and per panel."""
    require(not (values < 0).any(), "values must be non-negative")
    for key, labels, axis, what in (("choices", choices, 0, "choice"),
                                    ("series", series, 1, "panel")):
        require(len(labels) == values.shape[axis], f"{key} must have one "
                f"label per {what} ({values.shape[axis]}), got {len(labels)}")
    require(choice < values.shape[0], f"choice must be between 0 and "
                                      f"{values.shape[0] - 1}, got {choice}")


@boundary(values=floats(ndim=3), choices=_labels("button labels"),
          series=_labels("panel titles"),
          ymax=optional(positive()), choice=integer(0, what="a choice"),
          width=integer(80, what="a width in pixels"),
          height=integer(80, what="a height in pixels"),
          checks=(_bars_fit_labels,))
def bar_explorer(values, choices, series, title="", xlabel="", ymax=None,
                 choice=0, width=300, height=180, ylabel=""):
    """A kernel-free figure: buttons switch between precomputed bar charts."""
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
