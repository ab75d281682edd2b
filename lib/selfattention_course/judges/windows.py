"""The judges of :ref:`ch-windows`, Windows and shifted windows: hidden cases,
judges and the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import numpy as np
from selfattention_exercises.core import (
    Opaque,
    Wrong,
    expect_shape,
    returned_array,
    returned_arrays,
    type_name,
)
from selfattention.attention import multi_head_attention
from selfattention.masks import window_ids
from selfattention.position import relative_position_bias
from selfattention.windows import (
    padded_window_ids,
    window_attention,
    window_partition,
)

from . import Judge


def _kernel_cases(rng):
    C, C_out = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    return [{"W_merge": rng.standard_normal((4 * 2, 3))},
            {"W_merge": rng.standard_normal((4 * C, C_out))}]


def _kernel_judge(out, W_merge):
    kernel = returned_array(out, "my_merging_kernel", "an array (C', C, 2, "
                            "2)")
    C, C_out = W_merge.shape[0] // 4, W_merge.shape[1]
    expect_shape(kernel, "the kernel", (C_out, C, 2, 2), "(C', C, 2, 2)",
                 "conv2d's weight is (out_channels, in_channels, kH, kW)")
    blocks = W_merge.reshape(2, 2, C, C_out)      # [b, a, c, o]: k = a + 2b
    want = blocks.transpose(3, 2, 1, 0)           # (o, c, a, b)
    if np.allclose(kernel, want):
        return None
    if np.allclose(kernel, want.transpose(0, 1, 3, 2)):
        raise Wrong("the neighbours are in row-major order; Swin's are "
                    "top-left, bottom-left, top-right, bottom-right: "
                    "(2i, 2j), (2i+1, 2j), (2i, 2j+1), (2i+1, 2j+1)",
                    "neighbours-row-major")
    if np.allclose(kernel, want[..., ::-1, ::-1]):
        raise Wrong("the kernel is flipped: conv2d computes a "
                    "cross-correlation, kernel[o, c, a, b] multiplies "
                    "x[c, 2i + a, 2j + b]", "kernel-flipped")
    by_channel = W_merge.reshape(C, 2, 2, C_out).transpose(3, 0, 2, 1)
    if np.allclose(kernel, by_channel):
        raise Wrong("the rows of W_merge come in four blocks of C, one per "
                    "neighbour; you split them channel first", "channel-first")
    raise Wrong("conv2d(x, kernel, stride=2) is not the merging's linear "
                "map: compare both on a small grid with one non-zero pixel",
                "not-the-merging")


def _macs_cases(rng):
    stages = int(rng.integers(2, 5))
    M, patch = int(rng.integers(2, 8)), int(rng.choice([2, 4, 8]))
    side = M * 2 ** (stages - 1) * int(rng.integers(1, 3))
    depths = tuple(int(v) for v in rng.integers(1, 5, size=stages))
    drawn = (side * patch, patch, int(rng.choice([8, 16, 32])), M, depths)
    return [{"image_size": s, "patch_size": P, "C": C, "M": M,
             "depths": d} for s, P, C, M, d in
            [(224, 4, 96, 7, (2, 2, 6, 2)), (64, 2, 8, 4, (1, 3, 2)), drawn]]


def _swin_macs(image_size, patch_size, C, M, depths, mlp=True,
               window=True, entry=True, new_width=False, doubling=True):
    """Multiply-adds of every stage, and the mistakes the judge names."""
    side, per_stage = image_size // patch_size, []
    for s, depth in enumerate(depths):
        G, width = side // 2 ** s, C * (2 ** s if doubling else 1)
        n = G * G
        pairs = n * M * M if window else n * n
        block = 4 * n * width**2 + 2 * pairs * width + (
            8 * n * width**2 if mlp else 0)
        if s == 0:
            into = n * 3 * patch_size**2 * width       # patch embedding
        else:
            prev = width if new_width else width // (2 if doubling else 1)
            into = n * 4 * prev * (2 * prev if doubling else prev)
        per_stage.append(depth * block + (into if entry else 0))
    return per_stage


def _macs_judge(out, image_size, patch_size, C, M, depths):
    if isinstance(out, (str, Opaque)) or np.ndim(out) != 1:
        raise Wrong(f"my_swin_macs should return one number per stage, got "
                    f"{type_name(out)}", "type")
    got = np.asarray(out, dtype=float)
    expect_shape(got, "the counts", (len(depths),), "(number of stages,)")
    args = (image_size, patch_size, C, M, depths)
    want = np.array(_swin_macs(*args), dtype=float)
    if np.allclose(got, want, rtol=1e-12, atol=0.5):
        return None
    where = f"for image {image_size}, patch {patch_size}, C={C}, M={M}"
    named = [
        (2 * want, "that is twice the count: a multiply-add is one "
                   "operation here, FlopCounterMode counts it as two FLOPs",
         "macs-doubled"),
        (_swin_macs(*args, window=False), "you counted global attention, "
         "(HW)² pairs per stage; in windows each token meets M² tokens",
         "global-attention"),
        (_swin_macs(*args, mlp=False), "each block also has an MLP, two "
         "linear maps C -> 4C -> C", "mlp-missing"),
        (_swin_macs(*args, entry=False), "count what makes each stage's "
         "tokens: the patch embedding (3P² -> C) before stage 1 and a patch "
         "merging (4C -> 2C) before every later stage", "entry-missing"),
        (_swin_macs(*args, new_width=True), "patch merging reads four tokens "
         "of the previous stage's width C and writes 2C",
         "merging-width"),
        (_swin_macs(*args, doubling=False), "the width doubles at every "
         "merging: stage s has C·2^(s-1) channels", "width-not-doubled"),
    ]
    for variant, why, code in named:
        if np.allclose(got, variant, rtol=1e-12, atol=0.5):
            raise Wrong(f"{where}: {why}", code)
    wrong = int(np.flatnonzero(~np.isclose(got, want, rtol=1e-12,
                                           atol=0.5))[0])
    raise Wrong(f"{where}: stage {wrong + 1} is off ({got[wrong]:,.0f}); "
                f"sum its blocks (attention and MLP) and what makes its "
                f"tokens", "stage-off")


def _padding_cases(rng):
    M_d, h_d = int(rng.integers(2, 5)), int(rng.integers(1, 3))
    grid = (M_d * int(rng.integers(1, 4)), M_d * int(rng.integers(1, 4)))
    cases = []
    for (H, W), M, shift, h in [((8, 12), 4, 2, 2), ((6, 3), 3, 1, 1),
                                (grid, M_d, int(rng.integers(1, M_d)), h_d)]:
        C = 2 * h
        cases.append({"x": rng.standard_normal((H, W, C)),
                      "W_q": rng.standard_normal((C, C)) / np.sqrt(C),
                      "W_k": rng.standard_normal((C, C)) / np.sqrt(C),
                      "W_v": rng.standard_normal((C, C)),
                      "W_o": rng.standard_normal((C, C)),
                      "h": h, "M": M, "shift": shift,
                      "table": rng.standard_normal((h, 2 * M - 1,
                                                    2 * M - 1))})
    return cases


def _padded_maps(x, W_q, W_k, W_v, W_o, h, M, shift, table):
    """The maps of the windows of the grid padded with zeros, M - shift
    patches before and shift after, padded keys masked."""
    H, W, _ = x.shape
    pad = [(M - shift, shift), (M - shift, shift), (0, 0)]
    real = window_partition(np.pad(np.ones((H, W, 1), bool), pad), M)[..., 0]
    _, A = multi_head_attention(
        window_partition(np.pad(x, pad), M), W_q, W_k, W_v, W_o, h,
        mask=real[:, None, None, :],
        bias=relative_position_bias(table, (M, M)))
    return A                                   # (windows, h, M², M²)


def _padding_judge(out, x, W_q, W_k, W_v, W_o, h, M, shift, table):
    Y, A = returned_arrays(out, 2, "my_padded_attention should return a "
                           "pair (Y, A)")
    (H, W, _), Ws = x.shape, (W_q, W_k, W_v, W_o)
    expect_shape(Y, "Y", x.shape, "(H, W, C)", "crop the padding away")
    n_pad = (H // M + 1) * (W // M + 1)
    if A.ndim == 4 and A.shape[0] == (H // M) * (W // M):
        raise Wrong(f"A holds {A.shape[0]} windows, as many as the cyclic "
                    f"shift uses; the padded grid has (H/M + 1)·(W/M + 1) "
                    f"= {n_pad}", "cyclic-window-count")
    expect_shape(A, "A", (n_pad, h, M * M, M * M), "(windows, h, M², M²)")
    if not np.allclose(A.sum(axis=-1), 1.0):
        raise Wrong("some rows of A do not sum to one", "rows-not-normalised")
    pad = [(M - shift, shift)] * 2 + [(0, 0)]
    real = window_partition(np.pad(np.ones((H, W, 1), bool), pad), M)[..., 0]
    padded_keys = (A * ~real[:, None, None, :]).max() > 1e-12
    want, _ = window_attention(x, *Ws, h, M, shift, table)
    if np.allclose(Y, want, atol=1e-10) and not padded_keys:
        # The maps of the real queries, whatever fills the padding: their
        # padded keys are masked, so only the grid's tokens decide them.
        maps = _padded_maps(x, *Ws, h, M, shift, table)
        rows = np.broadcast_to(real[:, None, :, None], A.shape)
        if np.allclose(A[rows], maps[rows], rtol=0, atol=1e-10):
            return None
        raise Wrong("Y is right but A is not the weights of the padded "
                    "windows: return the (windows, h, M², M²) maps that "
                    "produced Y, which the real queries' rows must match",
                    "maps-not-the-attention")
    if 2 * shift != M and np.allclose(
            Y, window_attention(x, *Ws, h, M, M - shift, table)[0]):
        raise Wrong(f"these are the windows shifted by M - shift = "
                    f"{M - shift}: pad M - shift patches before the grid "
                    f"and shift after it, not the other way round",
                    "padding-wrong-side")
    if padded_keys:                                # real: (windows, M²)
        raise Wrong("queries give weight to padded keys: mask every key "
                    "that is padding, in every window", "padding-not-masked")
    if np.allclose(Y, window_attention(x, *Ws, h, M, shift)[0]):
        raise Wrong("the windows are right but the bias is missing: add "
                    "relative_position_bias(table, (M, M)) to every "
                    "window's scores", "bias-missing")
    bad = np.argwhere(~np.isclose(Y, want, atol=1e-10).all(axis=-1))
    raise Wrong(f"Y differs from shifted-window attention at {len(bad)} of "
                f"{H * W} tokens, the first at {tuple(int(v) for v in bad[0])}",
                "not-the-attention")


def _spread_cases(rng):
    M = int(rng.integers(2, 5))
    grid = (M * int(rng.integers(2, 5)), M * int(rng.integers(2, 5)))
    source = (int(rng.integers(grid[0])), int(rng.integers(grid[1])))
    return [{"grid": (16, 16), "M": 4, "source": (5, 6), "blocks": 5,
             "seed": 0},
            {"grid": grid, "M": M, "source": source,
             "blocks": int(rng.integers(3, 7)),
             "seed": int(rng.integers(1000))}]


def _spread(grid, M, source, blocks, ids_of):
    """Tokens reached from ``source`` after each block."""
    H, W = grid
    reached = np.zeros(H * W, bool)
    reached[source[0] * W + source[1]] = True
    counts = []
    for b in range(blocks):
        ids = ids_of(b).ravel()
        reached = np.isin(ids, ids[reached])
        counts.append(int(reached.sum()))
    return np.array(counts)


def _spread_judge(out, grid, M, source, blocks, seed):
    got = returned_array(out, "my_spread", "one count per block")
    expect_shape(got, "the counts", (blocks,), "(blocks,)")
    s = M // 2
    want = _spread(grid, M, source, blocks,
                   lambda b: padded_window_ids(grid, M, s * (b % 2)))
    if np.array_equal(got, want):
        return None
    where = f"for grid {grid}, M={M}, source {source}"
    regular = window_ids(grid, M).reshape(grid)
    if np.array_equal(got, _spread(grid, M, source, blocks,
                                   lambda b: regular)):
        raise Wrong(f"{where} the spread stops at one window: every other "
                    f"block must shift its windows by M // 2",
                    "windows-not-shifted")
    wrapped = np.roll(regular, (s, s), axis=(0, 1))   # rolled, no mask
    if np.array_equal(got, _spread(grid, M, source, blocks, lambda b: (
            wrapped if b % 2 else regular))):
        raise Wrong(f"{where} influence crosses the grid's edge: the rolled "
                    f"windows need their mask", "wrap-not-masked")
    if np.array_equal(got, _spread(grid, M, source, blocks, lambda b: (
            padded_window_ids(grid, M, s * ((b + 1) % 2))))):
        raise Wrong(f"{where} the first block uses regular windows, the "
                    f"second shifted ones", "shift-order")
    if np.all(got <= want):
        raise Wrong(f"{where} you count too few tokens ({got.tolist()}): "
                    f"count every output that changed at all, and keep the "
                    f"softmax soft (small W_q, W_k), or a far change falls "
                    f"below the rounding of the output", "too-few-tokens")
    raise Wrong(f"{where} the counts {got.tolist()} are not those of a stack "
                f"of regular and shifted window blocks", "not-the-spread")


JUDGES = {
    "ex-windows-merging-conv": Judge(cases=_kernel_cases, judge=_kernel_judge),
    "ex-windows-hierarchy-cost": Judge(cases=_macs_cases, judge=_macs_judge),
    "ex-windows-padding": Judge(cases=_padding_cases, judge=_padding_judge),
    "ex-windows-spread": Judge(cases=_spread_cases, judge=_spread_judge),
}
