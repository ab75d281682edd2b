"""The frames explorer: a query on one frame and its weights on all frames
(:ref:`ch-nonlocal`, :ref:`ch-misconceptions`).
"""

from __future__ import annotations

import numpy as np

from .. import _stills
from .._validate import (boundary, floats, instance, integer, optional, pair,
                         positive, positive_int, require)
from ._figure import (_OWN_KEYS, _TOP, _at, _colour_scale, _escape,
                      _grey_levels, _html, _legend, _payload, _rounded,
                      _script, _shell, _strongest, _uid, _viridis_stops)


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


def _frames_fit_grid(frames, A, grid, patch, query, keys=None) -> None:
    """Frames of the patch grid, and weights between all their patches."""
    (rows, cols), n = grid, grid[0] * grid[1]
    want = (rows * patch, cols * patch)
    for key, arr in (("frames", frames), ("keys", keys)):
        require(arr is None or arr.shape[1:] == want, f"{key} must have shape "
                f"(count, {want[0]}, {want[1]}) for a {rows} x {cols} grid of "
                f"{patch}-pixel patches, got {getattr(arr, 'shape', None)}")
    shape = (len(frames) * n, len(frames if keys is None else keys) * n)
    require(A.shape == shape, f"A must have shape {shape}, got {A.shape}")
    require(query < shape[0], f"query must be below {shape[0]} (frames x "
                              f"patches), got {query}")


@boundary(frames=floats(ndim=3), A=floats(ndim=2),
          grid=pair(positive_int()), patch=positive_int(),
          query=integer(0, what="a query index"),
          keys=optional(floats(ndim=3)), scale=positive_int(),
          vmax=optional(positive()), per_frame=instance(bool),
          checks=(_frames_fit_grid,))
def frames_explorer(frames, A, grid, patch, query=0, keys=None, title="",
                    labels=None, key_labels=None, scale=6, vmax=None,
                    per_frame=False):
    """A kernel-free figure: pick a patch of one frame, see where it looks."""
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
