"""Chapter 8's exercise checks accept right answers, explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import expect, own, run
from selfattention import attention, cost, position
from selfattention import windows as lib
from selfattention_exercises import windows as checks
from selfattention_course.judges import windows as judges

partition = own(lib.window_partition)
reverse = own(lib.window_reverse)


# ------------------------------------------------------------------ kernel
def kernel(W_merge):
    C, C_out = W_merge.shape[0] // 4, W_merge.shape[1]
    return W_merge.reshape(2, 2, C, C_out).transpose(3, 2, 1, 0)


def kernel_by_probing(W_merge):
    # reads the kernel off the library's merging, one pixel at a time
    C = W_merge.shape[0] // 4
    out = np.zeros((W_merge.shape[1], C, 2, 2))
    for c in range(C):
        for a in range(2):
            for b in range(2):
                x = np.zeros((2, 2, C))
                x[a, b, c] = 1.0
                out[:, c, a, b] = lib.patch_merging(x, W_merge)[0, 0]
    return out


@pytest.mark.parametrize("answer, status, code", [
    (kernel, "correct", None),
    (None, "not done", "not-done"),
    (lambda W: kernel(W).transpose(1, 0, 2, 3), "wrong",
     "shape"),
    (lambda W: kernel(W).transpose(0, 1, 3, 2), "wrong",
     "neighbours-row-major"),
    (lambda W: kernel(W)[..., ::-1, ::-1], "wrong", "kernel-flipped"),
    (lambda W: W.reshape(W.shape[0] // 4, 2, 2, -1).transpose(3, 0, 2, 1),
     "wrong", "channel-first"),
    (lambda W: 2 * kernel(W), "wrong", "not-the-merging"),
    (lambda W: "kernel", "wrong", "type"),
    (kernel_by_probing, "for review", "for-review"),
])
def test_merging_kernel_check(answer, status, code):
    expect(run(checks.check_merging_kernel, answer), status, code)


def test_the_kernel_is_what_conv2d_needs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4, 3))
    W_merge = rng.standard_normal((12, 5))
    conv = torch.nn.functional.conv2d(
        torch.from_numpy(x.transpose(2, 0, 1))[None],
        torch.from_numpy(kernel(W_merge).copy()), stride=2)[0].numpy()
    z = np.concatenate([x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2],
                        x[1::2, 1::2]], axis=-1)
    np.testing.assert_allclose(conv.transpose(1, 2, 0), z @ W_merge,
                               atol=1e-12)


# ------------------------------------------------------------------ macs
def swin_macs(image_size, patch_size, C, M, depths):
    counts = []
    for s, depth in enumerate(depths):
        side = image_size // patch_size // 2**s
        n, width = side * side, C * 2**s
        make = (n * 3 * patch_size**2 * width if s == 0
                else n * 2 * width * width)
        counts.append(make + depth * (12 * n * width**2
                                      + 2 * M**2 * n * width))
    return counts


def with_library(image_size, patch_size, C, M, depths):
    counts = swin_macs(image_size, patch_size, C, M, depths)
    cost.window_msa_macs((M, M), C, M)
    return counts


def variant(**change):
    return lambda *a: own(judges._swin_macs)(*a, **change)


@pytest.mark.parametrize("answer, status, code", [
    (swin_macs, "correct", None),
    (lambda *a: [float(v) for v in swin_macs(*a)], "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: [2 * v for v in swin_macs(*a)], "wrong", "macs-doubled"),
    (variant(window=False), "wrong", "global-attention"),
    (variant(mlp=False), "wrong", "mlp-missing"),
    (variant(entry=False), "wrong", "entry-missing"),
    (variant(new_width=True), "wrong", "merging-width"),
    (variant(doubling=False), "wrong", "width-not-doubled"),
    (lambda *a: swin_macs(*a)[:-1], "wrong", "shape"),
    (lambda *a: sum(swin_macs(*a)), "wrong", "type"),
    (lambda *a: [v + 1000 for v in swin_macs(*a)], "wrong", "stage-off"),
    (with_library, "for review", "for-review"),
])
def test_swin_macs_check(answer, status, code):
    expect(run(checks.check_swin_macs, answer), status, code)


def test_swin_t_costs_what_liu_et_al_report():
    """4.49 billion multiply-adds: Table 1 gives Swin-T 4.5G FLOPs."""
    total = sum(swin_macs(224, 4, 96, 7, (2, 2, 6, 2)))
    assert round(total / 1e9, 1) == 4.5


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_swin_macs_passes_hidden_cases(seed):
    assert run(checks.check_swin_macs, swin_macs, seed).passed


# ------------------------------------------------------------------ padding
def padded(x, W_q, W_k, W_v, W_o, h, M, shift, table, mask_keys=True,
           bias=True, fill=0.0):
    H, W, _ = x.shape
    pad = [(M - shift, shift), (M - shift, shift), (0, 0)]
    real = np.pad(np.ones((H, W, 1), dtype=bool), pad)
    keys = partition(real, M)[..., 0]
    B = position.relative_position_bias(table, (M, M)) if bias else None
    Y, A = attention.multi_head_attention(
        partition(np.pad(x, pad, constant_values=fill), M), W_q, W_k, W_v,
        W_o, h, mask=keys[:, None, None, :] if mask_keys else None, bias=B)
    Y = reverse(Y, (H + M, W + M), M)
    return Y[M - shift:M - shift + H, M - shift:M - shift + W], A


def cyclic_by_hand(x, W_q, W_k, W_v, W_o, h, M, shift, table):
    # the cyclic shift, written with np.roll: right outputs, too few windows
    H, W, _ = x.shape
    labels = np.zeros((H, W), int)
    for axis, n in ((0, H), (1, W)):
        strip = np.zeros(n, int)
        strip[n - M:], strip[n - shift:] = 1, 2
        labels += strip[:, None] * 3 if axis == 0 else strip[None, :]
    win = partition(labels[..., None], M)[..., 0]
    mask = win[:, :, None] == win[:, None, :]
    Y, A = attention.multi_head_attention(
        partition(np.roll(x, (-shift, -shift), (0, 1)), M), W_q, W_k, W_v,
        W_o, h, mask=mask[:, None],
        bias=position.relative_position_bias(table, (M, M)))
    Y = np.roll(reverse(Y, (H, W), M), (shift, shift), (0, 1))
    return Y, A


def loose_mask(*args):
    return padded(*args, mask_keys=False)


def made_up_maps(x, W_q, W_k, W_v, W_o, h, M, shift, table):
    # the right Y with maps that only look right: the right shape, rows
    # summing to one and no weight on padding (uniform over real keys)
    Y, A = padded(x, W_q, W_k, W_v, W_o, h, M, shift, table)
    real = A.max(axis=(1, 2), keepdims=True) > 0
    return Y, np.broadcast_to(real / real.sum(-1, keepdims=True), A.shape)


def padded_with_ones(*args):
    # what fills the padding changes only the padded queries' rows
    return padded(*args, fill=1.0)


@pytest.mark.parametrize("answer, status, code", [
    (padded, "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: padded(*a)[0], "wrong", "type"),
    (lambda *a: (padded(*a)[0][1:], padded(*a)[1]), "wrong", "shape"),
    (cyclic_by_hand, "wrong", "cyclic-window-count"),
    (loose_mask, "wrong", "padding-not-masked"),
    (lambda *a: padded(*a, bias=False), "wrong", "bias-missing"),
    (lambda *a: (padded(*a)[0] + 1.0, padded(*a)[1]), "wrong",
     "not-the-attention"),
    (lambda *a: (padded(*a)[0], 2 * padded(*a)[1]), "wrong",
     "rows-not-normalised"),
    (made_up_maps, "wrong", "maps-not-the-attention"),
    (lib.window_attention, "for review", "for-review"),
])
def test_padding_check(answer, status, code):
    expect(run(checks.check_padding, answer), status, code)


def test_padding_on_the_wrong_side_is_named():
    def other_side(x, W_q, W_k, W_v, W_o, h, M, shift, table):
        return padded(x, W_q, W_k, W_v, W_o, h, M, M - shift, table)

    ex = checks.check_padding
    cases = [c for c in ex.public_cases() if 2 * c["shift"] != c["M"]]
    fb = ex.assess(ex.attempt([other_side], cases), cases)
    expect(fb, "wrong", "padding-wrong-side")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_padding_passes_hidden_cases(seed):
    assert run(checks.check_padding, padded, seed).passed
    assert run(checks.check_padding, padded_with_ones, seed).passed


# ------------------------------------------------------------------ spread
def spread(grid, M, source, blocks, seed, shifted=True, threshold=0.0,
           shifted_block=1):
    rng = np.random.default_rng(seed)
    C, h = 8, 2
    x = rng.standard_normal((*grid, C))
    y = x.copy()
    y[source] += 1.0
    counts = []
    for b in range(blocks):
        W_q, W_k = 0.1 * rng.standard_normal((2, C, C)) / np.sqrt(C)
        W_v, W_o = rng.standard_normal((2, C, C)) / np.sqrt(C)
        s = M // 2 if b % 2 == shifted_block and shifted else 0
        x = x + lib.window_attention(x, W_q, W_k, W_v, W_o, h, M, s)[0]
        y = y + lib.window_attention(y, W_q, W_k, W_v, W_o, h, M, s)[0]
        counts.append(int((np.abs(x - y) > threshold).any(axis=-1).sum()))
    return counts


def spread_by_masks(grid, M, source, blocks, seed):
    H, W = grid
    reached = np.zeros(H * W, bool)
    reached[source[0] * W + source[1]] = True
    counts = []
    for b in range(blocks):
        mask = lib.shifted_window_mask(grid, M, M // 2 * (b % 2))
        reached = mask[reached].any(axis=0)
        counts.append(int(reached.sum()))
    return counts


def wrapped(grid, M, source, blocks, seed):
    # a cyclic shift without its mask: the spread wraps around the edges
    H, W = grid
    ids = np.arange(H * W).reshape(H, W)
    regular = (ids // W // M) * (W // M) + ids % W // M
    rolled = np.roll(regular, (M // 2, M // 2), axis=(0, 1))
    reached = np.zeros(H * W, bool)
    reached[source[0] * W + source[1]] = True
    counts = []
    for b in range(blocks):
        group = (rolled if b % 2 else regular).ravel()
        reached = np.isin(group, group[reached])
        counts.append(int(reached.sum()))
    return counts


@pytest.mark.parametrize("answer, status, code", [
    (spread, "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: spread(*a, shifted=False), "wrong", "windows-not-shifted"),
    (wrapped, "wrong", "wrap-not-masked"),
    (lambda *a: spread(*a, shifted_block=0), "wrong", "shift-order"),
    (lambda *a: spread(*a, threshold=1e-2), "wrong", "too-few-tokens"),
    (lambda *a: [v + 1 for v in spread(*a)], "wrong", "not-the-spread"),
    (lambda *a: spread(*a)[:-1], "wrong", "shape"),
    (spread_by_masks, "for review", "for-review"),
])
def test_spread_check(answer, status, code):
    expect(run(checks.check_spread, answer), status, code)


@pytest.mark.parametrize("seed", range(6))
def test_spread_passes_hidden_cases(seed):
    assert run(checks.check_spread, spread, seed).passed


def test_checks_never_raise_on_garbage(capsys):
    for check in (checks.check_merging_kernel, checks.check_swin_macs,
                  checks.check_padding, checks.check_spread):
        check(lambda *a: "nonsense")
        check(42)
    out = capsys.readouterr().out
    assert out.count("Not yet") == 8
