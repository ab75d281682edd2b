"""Diagrams beyond one image: the non-local block (:ref:`ch-nonlocal`) and
cross-attention against a correlation volume (:ref:`ch-matching`)."""

from __future__ import annotations

import numpy as np

from selfattention import attention as _attention
from ._base import (FILL, RULE, SIZE, SMALL, _arrow, _box, _canvas, _elbow,
                    _example_attention, _heat, _image, _label, _matrix, _plus,
                    diagram)


# ----------------------------------------------------- ch-nonlocal
def _clip(ax, video, x, y, side, step=0.1):
    """The frames of a video as a stack, first frame at the back."""
    T = len(video)
    for t in range(T):
        _image(ax, np.clip(video[t], 0, 1), x + t * step,
               y + (T - 1 - t) * step, side, side)
    return (x, y, side + (T - 1) * step, side + (T - 1) * step)


@diagram("nonlocal", """
The non-local block of Wang et al. on a video feature map of T frames of H
by W positions with C channels, drawn as a stack of four frames. Three 1 by
1 convolutions, theta, phi and g, embed every position; reshaped, they are
N by d_k, N by d_k and N by d_v matrices, with N = T H W. The scores theta
times phi transposed form an N by N matrix, every position against every
position in every frame; a softmax over each row gives f; y = f g averages
the g features. A last 1 by 1 convolution W_z maps y back to C channels, and
a residual connection adds the input x, giving z of the same shape T by H by
W by C.""")
def nonlocal_block():
    """:ref:`ch-nonlocal`: θ, φ, g as 1×1 convolutions, f = softmax(θφᵀ), y =
    f·g,
    W_z and the residual, on a T × H × W × C map."""
    from selfattention import data

    video = data.moving_square_video(np.random.default_rng(0))
    fig, ax = _canvas(2.85)
    mid = 1.5
    clip = _clip(ax, video, 0.15, mid - 0.42, 0.55)
    _label(ax, 0.15 + clip[2] / 2, clip[1] - 0.06,
           r"$\mathbf{x}$: $T \times H \times W \times C$", size=SMALL,
           va="top")
    rows = {"q": mid + 0.75, "k": mid, "v": mid - 0.75}
    names = {"q": (r"W_\theta", r"\theta", "d_k"),
             "k": (r"W_\phi", r"\phi", "d_k"),
             "v": ("W_g", "g", "d_v")}
    for role, y in rows.items():
        W, name, width = names[role]
        _arrow(ax, (clip[0] + clip[2] + 0.05, mid), (1.25, y))
        _box(ax, 1.25, y - 0.17, 0.62, 0.34, f"${W}$", FILL[role])
        _arrow(ax, (1.87, y), (2.1, y))
        _matrix(ax, 2.1, y - 0.2, 4, 3, 0.1, FILL[role], f"${name}$",
                lines=False)
        _label(ax, 2.48, y, f"$N \\times {width}$", size=SMALL, ha="left")
    _label(ax, 1.56, 0.3, r"$1 \times 1 \times 1$ convolutions",
           size=SMALL)
    # scores and weights
    n = 6
    _, Q, K, V, S, _ = _example_attention(n, seed=3)
    from selfattention.attention import softmax
    f = softmax(Q @ K.T)                          # scale 1, as Wang et al.
    h = 0.13
    sx, sy = 3.45, mid + 0.375 - n * h / 2
    for role in ("q", "k"):
        _arrow(ax, (3.05, rows[role]), (sx - 0.04, mid + 0.375 + (
            0.15 if role == "q" else -0.15)))
    sc = _heat(ax, sx, sy, f, h, vmin=0)
    _label(ax, sx + sc[2] / 2, sy + sc[3] + 0.07,
           r"$f = \operatorname{softmax}(\theta \phi^{\top})$", va="bottom")
    _label(ax, sx + sc[2] / 2, sy - 0.05, r"$N \times N$, $N = THW$",
           size=SMALL, va="top")
    # y = f g
    yx = 4.75
    _elbow(ax, [(sc[0] + sc[2] + 0.04, mid + 0.375),
                (yx + 0.15, mid + 0.375), (yx + 0.15, mid + 0.05)])
    _elbow(ax, [(3.05, rows["v"]), (yx + 0.15, rows["v"]),
                (yx + 0.15, mid - 0.45)])
    _matrix(ax, yx, mid - 0.45, 4, 3, 0.1, FILL["out"], "$y$", lines=False)
    _label(ax, yx + 0.35, mid - 0.05, r"$y = f g$", ha="left")
    _arrow(ax, (yx + 0.3, mid - 0.25), (5.45, mid - 0.25))
    _box(ax, 5.45, mid - 0.42, 0.55, 0.34, "$W_z$", FILL["op"])
    _arrow(ax, (6.0, mid - 0.25), (6.27, mid - 0.25))
    _plus(ax, 6.38, mid - 0.25)
    _elbow(ax, [(0.15 + clip[2] / 2, clip[1] + clip[3] + 0.04),
                (0.15 + clip[2] / 2, 2.62), (6.38, 2.62),
                (6.38, mid - 0.13)])
    _label(ax, 6.3, 2.57, "residual", size=SMALL, ha="right", va="top")
    _arrow(ax, (6.49, mid - 0.25), (6.62, mid - 0.25))
    _label(ax, 6.9, mid - 0.25, r"$\mathbf{z}$", size=SIZE)
    _label(ax, 6.65, mid - 0.5, r"$T \times H \times W$", size=SMALL,
           va="top")
    _label(ax, 6.65, mid - 0.68, r"$\times\, C$", size=SMALL, va="top")
    return fig


# ----------------------------------------------------- ch-matching
def _frames(size=16, p=4):
    """Two frames of a textured scene, the second moved by one patch, and
    their patch tokens scaled to unit length: (img1, img2, X1, X2, grid)."""
    from selfattention import data, matching, patches

    rng = np.random.default_rng(0)
    img = data.textured_scene(rng, size=size, n_shapes=3)
    img1, img2 = data.shifted_pair(img, (p, p), rng)
    X1, X2 = (matching.normalize(patches.center(patches.patchify(i, p)))
              for i in (img1, img2))
    return img1, img2, X1, X2, (size // p, size // p)


@diagram("matching", """
Two ways to compare the patches of two frames, side by side. Left,
cross-attention: the queries Q = X_1 W_Q come from frame 1, the keys
K = X_2 W_K and the values V = X_2 W_V from frame 2; the n by m scores
Q K transposed over the square root of d_k go through a softmax of each
row, and each patch of frame 1 receives A V, an average of frame 2's
values. Right, RAFT's all-pairs correlation volume: both frames pass
through one shared encoder, giving features F_1 and F_2, HW by C each; the
volume C = F_1 F_2 transposed, HW by HW, keeps every dot product as it is:
no separate query and key projections, no softmax and no weighted sum; the
flow is read by looking up the correlations around its current
estimate.""")
def cross_attention_correlation():
    """:ref:`ch-matching`: queries from image 1, keys and values from image 2;
    RAFT's C = F1·F2ᵀ from one shared encoder, no softmax, no weighted
    sum."""
    from selfattention import matching

    img1, img2, X1, X2, grid = _frames()
    _, A = _attention.attention(4 * X1, 4 * X2, X2)       # sharp, as ch. 10
    C = matching.correlation_volume(X1.reshape(*grid, -1),
                                    X2.reshape(*grid, -1))
    C = C.reshape(X1.shape[0], X2.shape[0])               # (HW, HW)
    fig, ax = _canvas(3.2)
    side, h = 0.5, 0.06                   # frame side; one cell of A and C
    ax.plot([3.62, 3.62], [0.15, 3.05], color=RULE, lw=0.6)
    for x0, title in ((0.1, "cross-attention"),
                      (3.8, "RAFT's correlation volume")):
        _label(ax, x0, 3.05, title, ha="left", va="top")
    # cross-attention
    _image(ax, img1, 0.15, 1.95, side, side)
    _image(ax, img2, 0.15, 0.6, side, side)
    _label(ax, 0.4, 1.9, "frame 1", size=SMALL, va="top")
    _label(ax, 0.4, 0.55, "frame 2", size=SMALL, va="top")
    _arrow(ax, (0.7, 2.2), (0.95, 2.2))
    _box(ax, 0.95, 2.04, 0.45, 0.32, "$W_Q$", FILL["q"])
    for y, W, role in ((1.05, "W_K", "k"), (0.6, "W_V", "v")):
        _arrow(ax, (0.7, 0.85), (0.95, y))
        _box(ax, 0.95, y - 0.16, 0.45, 0.32, f"${W}$", FILL[role])
    a = _heat(ax, 1.85, 2.2 - 8 * h, A, h, vmin=0)
    _elbow(ax, [(1.4, 2.2), (1.8, 2.2)])
    _elbow(ax, [(1.4, 1.05), (a[0] + 0.2, 1.05), (a[0] + 0.2, a[1] - 0.03)])
    _label(ax, a[0] + a[2] / 2, a[1] + a[3] + 0.06,
           r"$\operatorname{softmax}(QK^{\top}/\sqrt{d_k})$", size=SMALL,
           va="bottom")
    _label(ax, a[0] + a[2] + 0.06, a[1] + a[3] / 2, r"$A$, $n \times m$",
           size=SMALL, ha="left")
    _box(ax, 2.75, 1.0, 0.6, 0.3, "$AV$", FILL["out"])
    _arrow(ax, (a[0] + a[2] - 0.15, a[1] - 0.03), (3.0, 1.3))
    _elbow(ax, [(1.4, 0.6), (3.05, 0.6), (3.05, 1.0)])
    _label(ax, 2.6, 0.38, "each patch of frame 1: an average",
           size=SMALL, va="top")
    _label(ax, 2.6, 0.2, "of frame 2's values", size=SMALL, va="top")
    # correlation volume
    _image(ax, img1, 3.85, 1.95, side, side)
    _image(ax, img2, 3.85, 0.6, side, side)
    _label(ax, 4.1, 1.9, "frame 1", size=SMALL, va="top")
    _label(ax, 4.1, 0.55, "frame 2", size=SMALL, va="top")
    enc = _box(ax, 4.6, 1.15, 0.8, 0.7, "one shared\nencoder", FILL["k"],
               size=SMALL)
    _arrow(ax, (4.4, 2.2), (4.75, enc[1] + enc[3]))
    _arrow(ax, (4.4, 0.85), (4.75, enc[1]))
    _arrow(ax, (5.4, 1.65), (5.6, 1.95))
    _arrow(ax, (5.4, 1.35), (5.6, 1.05))
    _label(ax, 5.65, 2.0, "$F_1$", size=SIZE, ha="left")
    _label(ax, 5.65, 1.0, "$F_2$", size=SIZE, ha="left")
    c = _heat(ax, 6.1, 1.5 - 8 * h + 0.35, C, h)
    _arrow(ax, (5.9, 2.0), (6.06, c[1] + c[3] - 0.1))
    _arrow(ax, (5.9, 1.0), (6.06, c[1] + 0.1))
    _label(ax, c[0] + c[2] / 2, c[1] + c[3] + 0.06,
           r"$C = F_1 F_2^{\top}$", size=SIZE, va="bottom")
    _label(ax, c[0] + c[2] / 2, c[1] - 0.05, r"$HW \times HW$",
           size=SMALL, va="top")
    for i, line in enumerate(("no softmax, no weighted sum:",
                              "look up the correlations",
                              "around the flow estimate")):
        _label(ax, 5.3, 0.55 - 0.18 * i, line, size=SMALL, va="top")
    return fig
