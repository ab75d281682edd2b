"""The patch explorer: click a patch of an image and see where it attends,
head by head (:ref:`ch-definition` and the chapters after it).
"""

from __future__ import annotations

import numpy as np

from .. import _stills
from .._validate import (boundary, floats, integer, optional, pair, positive,
                         positive_int, require)
from ._figure import (_OWN_KEYS, _TOP, _at, _buttons, _colour_scale,
                      _grey_levels, _html, _labels, _legend, _payload,
                      _rounded, _script, _shell, _strongest, _uid,
                      _viridis_stops)


def _patch_caption(w, query: int, cols: int, head: int, heads: int,
                   names=None) -> str:
    head_text = f", head {head + 1} of {heads}" if heads > 1 else ""
    if names:
        head_text += f" ({names[head]})"
    return (f"patch {_at(query, cols)}{head_text}: most weight on "
            + ", ".join(f"{_at(j, cols)} {w[j]:.3f}" for j in _strongest(w)))


def _explorer_fits_grid(img, A, grid, patch, query,
                        head_names=None) -> None:
    """Weights (n, n) or (h, n, n), an image of the patch grid, and a name
    for each head if any."""
    (rows, cols), n = grid, grid[0] * grid[1]
    require(A.ndim in (2, 3) and A.shape[-2:] == (n, n), f"A must have shape "
            f"(n, n) or (h, n, n) with n = {n} patches, got shape {A.shape}")
    require(img.shape == (rows * patch, cols * patch), f"img must have shape "
            f"{(rows * patch, cols * patch)} for a {rows} x {cols} grid of "
            f"{patch}-pixel patches, got {img.shape}")
    require(query < n, f"query must be a patch index below {n}, got {query}")
    heads = A.shape[0] if A.ndim == 3 else 1
    require(head_names is None or len(head_names) == heads, f"head_names must "
            f"name each of the {heads} heads, got {len(head_names or ())}")


@boundary(img=floats(ndim=2), A=floats(min_ndim=2),
          grid=pair(positive_int()), patch=positive_int(),
          query=integer(0, what="a patch index"), scale=positive_int(),
          vmax=optional(positive()),
          head_names=optional(_labels("head names")),
          checks=(_explorer_fits_grid,))
def patch_explorer(img, A, grid, patch, query=0, title="", scale=8,
                   vmax=None, head_names=None):
    """A kernel-free figure: pick a patch, see its attention map."""
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
