"""Chapter 10's checks accept right answers and name typical mistakes."""

import numpy as np
import pytest
import torch

from exercise_answers import own
from selfattention import data, masks, patches
from selfattention import matching as lib
from selfattention.attention import attention
from selfattention.exercises import matching as checks
from selfattention_course.judges import matching as judges

displacements = own(lib.displacements)
lookup = own(lib.lookup)


# ------------------------------------------------------------ 10.1
def disp(A, grid):
    rows, cols = grid
    n = rows * cols
    best = np.argmax(A, axis=1)
    return np.stack(np.divmod(best, cols), 1) \
        - np.stack(np.divmod(np.arange(n), cols), 1)


@pytest.mark.parametrize("answer, status, words", [
    (disp, "correct", []),
    (lambda A, g: displacements(A, g, periodic=False), "correct", []),
    (lambda A, g: disp(A, g)[:, ::-1], "wrong", ["(d_col, d_row)"]),
    (lambda A, g: -disp(A, g), "wrong", ["signs"]),
    (lambda A, g: np.stack(np.divmod(np.argmax(A, 1), g[1]), 1), "wrong",
     ["positions of the best keys"]),
    (lambda A, g: disp(A.T, g), "wrong", ["axis 1"]),
    (lambda A, g: np.argmax(A, 1), "wrong", ["shape"]),
    (lambda A, g: disp(A, g) + (np.arange(len(A))[:, None] == 0), "wrong",
     ["some displacements"]),
    (None, "not done", []),
    (lambda A, g: lib.displacements(A, g, periodic=False), "for review",
     ["displacements"]),
])
def test_displacement_check(answer, status, words):
    fb = checks.check_displacements.feedback(answer)
    assert fb.status == status
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ 10.2 pyramid
def built_pyramid(H, W, levels):
    """Entries of a pyramid built as RAFT builds it, with avg_pool2d."""
    corr = torch.zeros(H * W, 1, H, W)           # one slice per pixel
    total = corr.numel()
    for _ in range(levels - 1):
        corr = torch.nn.functional.avg_pool2d(corr, 2, stride=2)
        total += corr.numel()
    return total


@pytest.mark.parametrize("H, W, levels", [(7, 9, 3), (12, 5, 2), (16, 16, 4),
                                          (5, 11, 1)])
def test_the_formula_counts_a_pyramid_built_with_pytorch(H, W, levels):
    assert judges.pyramid_entries(H, W, levels) == built_pyramid(H, W, levels)


def pyramid(H, W, levels):
    return sum(H * W * (H // 2 ** k) * (W // 2 ** k) for k in range(levels))


@pytest.mark.parametrize("answer, status, words", [
    (pyramid, "correct", ["Σ"]),
    (None, "not done", []),
    (lambda H, W, L: int(sum(H * W * H * W / 4 ** k for k in range(L))),
     "wrong", ["floors"]),
    (lambda H, W, L: sum(((H // 2 ** k) * (W // 2 ** k)) ** 2
                         for k in range(L)), "wrong", ["last two axes"]),
    (lambda H, W, L: pyramid(H, W, L) // (H * W), "wrong", ["H·W"]),
    (lambda H, W, L: pyramid(H, W, L + 1), "wrong", ["too many"]),
    (lambda H, W, L: pyramid(H, W, L) - pyramid(H, W, L - 1), "wrong",
     ["coarsest"]),
    (lambda H, W, L: 12345, "wrong", ["entries"]),
    (lambda H, W, L: "many", "wrong", ["number"]),
])
def test_pyramid_check(answer, status, words):
    fb = checks.check_pyramid.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


def test_one_level_too_few_is_named():
    case = {"H": 47, "W": 63, "levels": 4}
    with pytest.raises(judges.Wrong, match="too few"):
        judges._pyramid_judge(pyramid(47, 63, 3), **case)


# ------------------------------------------------------------ 10.3 bilinear
def grid_sample_lookup(C, flow, radius):
    """Bilinear lookup with PyTorch's grid_sample on a wrapped volume."""
    H, W = C.shape[:2]
    pad = radius + 5                              # covers |flow| ≤ 3
    big = np.pad(C, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="wrap")
    d = np.arange(-radius, radius + 1)
    dy, dx = (o.ravel() for o in np.meshgrid(d, d, indexing="ij"))
    ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    py = ys[..., None] + flow[..., :1] + dy + pad      # (H, W, k²)
    px = xs[..., None] + flow[..., 1:] + dx + pad
    h, w = big.shape[2:]
    grid = np.stack([2 * px / (w - 1) - 1, 2 * py / (h - 1) - 1], -1)
    out = torch.nn.functional.grid_sample(
        torch.from_numpy(big.reshape(H * W, 1, h, w)),
        torch.from_numpy(grid.reshape(H * W, 1, -1, 2)), align_corners=True)
    return out.numpy().reshape(H, W, -1)


def test_the_reference_is_grid_sample_on_a_wrapped_volume():
    for case in checks.check_bilinear_lookup.draw(np.random.default_rng(6)):
        ref = judges.bilinear_lookup(**case)
        assert np.abs(ref - grid_sample_lookup(**case)).max() < 1e-12


def test_whole_pixel_flows_read_what_the_chapter_s_lookup_reads():
    case = checks.check_bilinear_lookup.public_cases()[0]
    flow = case["flow"].astype(int)
    assert np.array_equal(judges.bilinear_lookup(**case),
                          lookup(case["C"], flow, case["radius"]))


def four_lookups(C, flow, radius):
    base = np.floor(flow)
    a, b = flow[..., :1] - base[..., :1], flow[..., 1:] - base[..., 1:]
    base = base.astype(int)
    return sum(wy * wx * lookup(C, base + [oy, ox], radius)
               for oy, wy in ((0, 1 - a), (1, a))
               for ox, wx in ((0, 1 - b), (1, b)))


@pytest.mark.parametrize("answer, status, words", [
    (four_lookups, "correct", ["four neighbours"]),
    (grid_sample_lookup, "correct", []),
    (lambda C, f, r: lib.lookup(C, np.floor(f).astype(int), r), "wrong",
     ["fractional part"]),
    (None, "not done", []),
    (lambda C, f, r: lookup(C, np.rint(f).astype(int), r), "wrong",
     ["rounded"]),
    (lambda C, f, r: own(judges.bilinear_lookup)(C, f, r, swap=True), "wrong",
     ["swapped"]),
    (lambda C, f, r: four_lookups(C, f[..., ::-1].copy(), r), "wrong",
     ["d_row, d_col"]),
    (lambda C, f, r: four_lookups(C, f, r) + 1, "wrong", ["whole-pixel"]),
    (lambda C, f, r: four_lookups(C, f, r)[..., :1], "wrong", ["shape"]),
])
def test_bilinear_check(answer, status, words):
    fb = checks.check_bilinear_lookup.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ 10.4 context
def rates(seed, noise, beta, draws=20, vague=False, cheat=False):
    rng = np.random.default_rng(seed)
    omegas = np.pi / np.array([8.0, 4.0, 2.0])
    hits = np.zeros(2)
    for _ in range(draws):
        pp = data.repeated_pattern_pair(rng, noise=noise)
        cols = pp.grid[1]
        pos = masks.grid_positions(pp.grid).astype(float)
        u = lib.normalize(patches.center(pp.marker.ravel()))
        pairs = []
        for img in (pp.img1, pp.img2):
            T = patches.center(patches.patchify(img, 4))
            Q = np.full((len(T), 1), 8.0 if vague else beta)
            ctx, _ = attention(Q, T @ u[:, None], pos, scale=1.0)
            ang = (ctx - pos)[..., None] * omegas
            E = np.concatenate([np.cos(ang), np.sin(ang)], -1)
            context = np.concatenate([T, E.reshape(len(T), -1)], 1)
            pairs.append((context if cheat else T, context))
        for k in (0, 1):
            _, A = attention(pairs[0][k], pairs[1][k], pairs[1][k], scale=4.0)
            for r, c in pp.copies:
                hits[k] += np.argmax(A[r * cols + c]) == \
                    (r + pp.shift[0]) * cols + c + pp.shift[1]
    return tuple(float(h) for h in hits / (4 * draws))


@pytest.mark.parametrize("answer, status, words", [
    (rates, "correct", ["uniform"]),
    (None, "not done", []),
    (lambda s, n, b: rates(s, n, b, vague=True), "wrong", ["use β"]),
    (lambda s, n, b: rates(s, n, b)[:1], "wrong", ["two rates"]),
    (lambda s, n, b: (0.25, 0.5), "wrong", ["β = 8"]),
    (lambda s, n, b: rates(s, n, b, cheat=True), "wrong", ["besides"]),
    (lambda s, n, b: (25.0, 100.0), "wrong", ["between 0"]),
    (lambda s, n, b: rates(int(np.random.default_rng().integers(9)), n, b,
                           draws=2), "wrong", ["same seed"]),
])
def test_context_check(answer, status, words):
    fb = checks.check_context.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


def test_a_vague_question_leaves_repeated_rings_ambiguous():
    """β = 0 sits well below the check's bound, β = 8 well above."""
    for seed in range(4):
        plain, vague = rates(seed, 0.05, 0.0)
        _, sharp = rates(seed, 0.05, 8.0)
        assert plain <= 0.4 and vague <= 0.75 and sharp == 1.0


# ------------------------------------------------------------ 10.5 landing
def matches(seed, dy, dx, wrap=True):
    rng = np.random.default_rng(seed)
    a, b = data.shifted_pair(data.textured_scene(rng), (dy, dx), rng)
    Z1, Z2 = (lib.normalize(patches.center(patches.patchify(im, 4)))
              for im in (a, b))
    return displacements(Z1 @ Z2.T, (8, 8), periodic=wrap)


def landed(seed, dy, dx):
    nearest = (np.rint(np.array([dy, dx]) / 4).astype(int) + 4) % 8 - 4
    return (matches(seed, dy, dx) == nearest).all(axis=1).mean()


def test_whole_patch_motions_land_and_one_pixel_more_does_not():
    assert landed(9, 4, 8) == 1.0 and landed(9, -8, -12) == 1.0
    assert landed(9, 1, 5) < 0.2 and landed(9, 0, 1) < 0.2


@pytest.mark.parametrize("prediction, answer, status, words", [
    (0.9, matches, "correct", ["prediction"]),
    (0.05, matches, "correct", []),
    (None, matches, "not done", ["prediction"]),
    (0.9, None, "not done", []),
    (1.5, matches, "wrong", ["between 0"]),
    ("most", matches, "wrong", ["number"]),
    (0.5, lambda s, dy, dx: matches(s, dy, dx, wrap=False), "wrong",
     ["wrap"]),
    (0.5, lambda s, dy, dx: 4 * matches(s, dy, dx), "wrong", ["pixels"]),
    (0.5, lambda s, dy, dx: matches(s, dy, dx)[:, ::-1], "wrong",
     ["rows first"]),
    (0.5, lambda s, dy, dx: own(judges.landing_matches)(s, dy, dx,
                                                   transpose=True),
     "wrong", ["each row"]),
    (0.5, lambda s, dy, dx: matches(s, dy, dx)[:10], "wrong", ["shape"]),
    (0.5, lambda s, dy, dx: matches(s, dy, dx) + 1, "wrong", ["differ"]),
])
def test_landing_check(prediction, answer, status, words):
    fb = checks.check_landing.feedback(prediction, answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message
