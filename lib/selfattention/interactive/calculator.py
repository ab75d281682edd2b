"""The cost calculator: score-matrix cost of global and windowed attention from
:mod:`selfattention.cost` (:ref:`ch-cost`).
"""

from __future__ import annotations

import numpy as np

from .. import cost
from .._validate import (Constraint, boundary, divides, integer, one_of,
                         positive_int)
from ._figure import _OWN_KEYS, _escape, _html, _payload, _script, _shell, _uid


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
          checks=(lambda image_size, patch_size: divides(
              "patch_size", patch_size, (image_size,), "image_size"),))
def cost_calculator(image_size=224, patch_size=16, heads=1,
                    dtype="float32"):
    """A kernel-free calculator: patch size → tokens, entries, bytes."""
    rows = _calculator_rows(image_size, patch_size, heads, dtype)
    uid = _uid("sa-cost-", f"{image_size}-{patch_size}-{heads}-{dtype}")

    def options(values, chosen, label=str):
        return "".join(
            f'<option value="{v}"{" selected" if v == chosen else ""}>'
            f"{label(v)}</option>" for v in values)

    def menu(text, key, choices):
        return (f'<label>{text} <select {_OWN_KEYS} data-in="{key}">'
                f"{choices}</select></label>\n")

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
        caption=f"{image_size} × {image_size} pixels in {patch_size} × "
                f"{patch_size} patches: {rows[0][1]} tokens, {rows[1][1]} "
                f"score entries per head, {rows[2][1]} for {heads} head(s) in "
                f"{dtype}",
        caption_testid="cost-caption",
        help_text="Choose an image size, a patch size, a number of heads "
                  "and a number type; the table and the sentence below "
                  "follow.",
        payload=_payload({"vit": _VIT_ENTRIES}), script=_CALC_JS))


_CALC_JS = _script("cost_calculator.js")
