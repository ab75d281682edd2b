"""Diagrams of the transformer: the pre-LN block and the vision transformer's
pipeline (:ref:`ch-transformer`)."""

from __future__ import annotations

from ._base import (FILL, INK, RULE, SIZE, SMALL, WIDTH, _arrow, _box, _canvas,
                    _elbow, _image, _label, _matrix, _plus, _tint, diagram)


# -------------------------------------------------- ch-transformer
@diagram("transformer_block", """
The pre-LN transformer block. The tokens X, n by d, enter on the left. A
layer normalisation feeds multi-head self-attention, where the tokens
exchange information, and a residual connection adds its output to X,
giving X'. A second layer normalisation feeds the MLP, which widens each
token from d to d_mlp, applies a GELU and narrows it back to d, one token at
a time; a second residual connection adds its output to X', giving X'', n by
d, the input of the next block.""")
def transformer_block():
    """:ref:`ch-transformer`: LN → multi-head attention → add → LN → MLP →
    add."""
    from matplotlib.patches import FancyBboxPatch

    fig, ax = _canvas(2.35)
    y, top = 1.2, 1.85                       # main line, residual line
    ax.add_patch(FancyBboxPatch(
        (0.92, 0.62), 5.72, 1.62, boxstyle="round,pad=0,rounding_size=0.08",
        fill=False, ec=RULE, lw=0.8, ls=(0, (4, 3))))
    _label(ax, 0.98, 2.2, "one block", size=SMALL, ha="left", va="top",
           color=RULE)
    _matrix(ax, 0.15, y - 0.24, 6, 6, 0.08, FILL["x"], "", "")
    _label(ax, 0.39, y - 0.3, r"$X$, $n \times d$", size=SMALL, va="top")
    for start, stop, step, extra in (
            (0.75, 3.45, ("LN", "multi-head\nattention"), "q"),
            (3.85, 6.45, ("LN", "MLP"), "v")):
        _arrow(ax, (start - 0.12 if start < 1 else start, y), (start + 0.3, y))
        ln = _box(ax, start + 0.3, y - 0.2, 0.42, 0.4, step[0], FILL["norm"])
        _arrow(ax, (ln[0] + ln[2], y), (ln[0] + ln[2] + 0.2, y))
        body = _box(ax, ln[0] + ln[2] + 0.2, y - 0.27, 1.2, 0.54, step[1],
                    FILL[extra])
        _arrow(ax, (body[0] + body[2], y), (stop - 0.13, y))
        _plus(ax, stop, y)
        _elbow(ax, [(start + 0.12, y), (start + 0.12, top), (stop, top),
                    (stop, y + 0.12)])
        _label(ax, (start + stop) / 2 + 0.05, top + 0.06, "residual",
               size=SMALL, va="bottom")
        if extra == "q":
            _label(ax, body[0] + body[2] / 2, body[1] - 0.06,
                   r"$h$ heads, $W_O$", size=SMALL, va="top")
        else:
            _label(ax, body[0] + body[2] / 2, body[1] - 0.06,
                   r"$d \to d_{\mathrm{mlp}} \to d$, GELU", size=SMALL,
                   va="top")
    _arrow(ax, (3.58, y), (3.85, y))
    _label(ax, 3.72, y + 0.1, "$X'$", va="bottom")
    _arrow(ax, (6.58, y), (6.7, y))
    _matrix(ax, 6.7, y - 0.24, 6, 6, 0.08, FILL["out"], "", "")
    _label(ax, 6.94, y - 0.3, r"$X''$", size=SMALL, va="top")
    _label(ax, WIDTH / 2, 0.3,
           r"$X' = X + \operatorname{MSA}(\operatorname{LN}(X)), \qquad "
           r"X'' = X' + \operatorname{MLP}(\operatorname{LN}(X'))$")
    return fig


def _column(ax, x, y_top, count, w, cell, fills, names=()):
    """A column of ``count`` token rows from ``y_top`` down."""
    from matplotlib.patches import Rectangle

    for i in range(count):
        ax.add_patch(Rectangle((x, y_top - (i + 1) * cell), w, cell,
                               fc=fills[i] if i < len(fills) else fills[-1],
                               ec=INK, lw=0.5))
    return (x, y_top - count * cell, w, count * cell)


VIT_PATCH = 4                    # chapter 6: 28 × 28 digits, 7 × 7 patches
SHOWN = 6                        # token rows drawn before the ellipsis


def _token_rows(ax, x, y_top, w, cell, fills, cls=None):
    """A column of tokens: an optional class token, ``SHOWN`` rows, an
    ellipsis and the last row. ``fills`` gives a colour per drawn row."""
    from matplotlib.patches import Rectangle

    rows = ([cls] if cls is not None else []) + list(fills[:SHOWN]) + [
        None, fills[-1]]
    for i, fill in enumerate(rows):
        y = y_top - (i + 1) * cell
        if fill is None:
            _label(ax, x + w / 2, y + cell / 2, "\u22ee", size=SIZE)
            continue
        ax.add_patch(Rectangle((x, y), w, cell, fc=fill, ec=INK, lw=0.6))
    return (x, y_top - len(rows) * cell, w, len(rows) * cell)


@diagram("vit", f"""
The vision transformer pipeline. A 28 by 28 handwritten digit is cut into a
7 by 7 grid of patches of {VIT_PATCH} by {VIT_PATCH} pixels: n = 49 tokens
of p squared = {VIT_PATCH ** 2} values each, drawn as a column of patches.
One linear map W_E embeds every patch to width d; a learned class token
x_cls is placed in front, and the position embeddings E, one per slot, are
added: 1 + n tokens of width d. L transformer blocks process them. The
class token's output alone goes through a layer normalisation and a linear
head to ten class scores, one per digit.""")
def vit_pipeline():
    """:ref:`ch-transformer`: image → patches → W_E, + E, class token → L
    blocks →
    class token → head."""
    from selfattention import patches
    from selfattention_models.mnist import mnist_digits

    images, _ = mnist_digits()
    img, p = images[0], VIT_PATCH
    side = img.shape[0] // p                              # 7 patches a side
    fig, ax = _canvas(2.55)
    top, cell, mid = 2.15, 0.17, 1.3
    pic = _image(ax, img, 0.15, mid - 0.6, 1.2, 1.2, grid=(side, side))
    _label(ax, pic[0] + pic[2] / 2, pic[1] - 0.05,
           rf"${side} \times {side}$ patches, $p = {p}$", size=SMALL,
           va="top")
    _arrow(ax, (1.4, mid), (1.62, mid))
    # the patches, one per row, as their pixels
    tiles = patches.patchify(img, p)                      # (49, 16)
    shown = [*range(SHOWN), len(tiles) - 1]
    rows = [*range(SHOWN), SHOWN + 1]                     # skip the ellipsis
    for i, k in zip(rows, shown):
        _image(ax, tiles[k].reshape(p, p), 1.67,
               top - cell - (i + 1) * cell + 0.01, cell - 0.02, cell - 0.02)
    _label(ax, 1.67 + cell / 2, top - cell - (SHOWN + 0.5) * cell, "\u22ee",
           size=SIZE)
    _label(ax, 1.75, top - cell * 9 - 0.05, f"$n = {len(tiles)}$",
           size=SMALL, va="top")
    _label(ax, 1.75, top - cell * 9 - 0.23, f"$p^2 = {p * p}$ values",
           size=SMALL, va="top")
    _arrow(ax, (1.9, mid), (2.08, mid))
    _box(ax, 2.08, mid - 0.18, 0.45, 0.36, "$W_E$", FILL["k"])
    _arrow(ax, (2.53, mid), (2.78, mid))
    # class token + embedded patches, plus position embeddings
    cls = _tint(0.95, 0.3)
    col = _token_rows(ax, 2.85, top, 0.5, cell, [FILL["k"]] * 7, cls)
    _label(ax, 2.8, top - cell / 2, r"$\mathbf{x}_{\mathrm{cls}}$",
           size=SMALL, ha="right")
    _label(ax, 3.1, top + 0.05, "$d$", size=SMALL, va="bottom")
    _label(ax, 3.55, mid, "+", size=12)
    _token_rows(ax, 3.7, top, 0.3, cell, ["#dddddd"] * 7, "#dddddd")
    _label(ax, 3.85, top + 0.05, "$E$", size=SMALL, va="bottom")
    _label(ax, 3.43, col[1] - 0.05, "$1 + n$ tokens", size=SMALL, va="top")
    _arrow(ax, (4.05, mid), (4.25, mid))
    blocks = _box(ax, 4.25, mid - 0.75, 1.0, 1.5, "", FILL["q"])
    _label(ax, 4.75, mid + 0.25, "transformer", size=SIZE)
    _label(ax, 4.75, mid + 0.05, "block", size=SIZE)
    _label(ax, 4.75, mid - 0.25, r"$\times\, L$", size=SIZE)
    _arrow(ax, (blocks[0] + blocks[2], mid), (5.45, mid))
    out = _token_rows(ax, 5.48, top, 0.3, cell, ["#eeeeee"] * 7, cls)
    _label(ax, 5.63, out[1] - 0.05, "outputs", size=SMALL, va="top")
    _arrow(ax, (5.81, top - cell / 2), (6.1, top - cell / 2))
    _label(ax, 5.9, top + 0.05, "class token", size=SMALL, va="bottom")
    head = _box(ax, 6.1, top - 0.55, 0.7, 0.5, "LN,\nlinear", FILL["out"],
                size=SMALL)
    _arrow(ax, (6.45, head[1]), (6.45, 1.2))
    _matrix(ax, 5.95, 1.0, 1, 10, 0.1, FILL["out"])
    _label(ax, 6.45, 0.95, "10 class", size=SMALL, va="top")
    _label(ax, 6.45, 0.78, "scores", size=SMALL, va="top")
    return fig
