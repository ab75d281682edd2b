"""Chapter 10's checks accept right answers and name typical mistakes."""


import numpy as np
import pytest
import torch

from exercise_answers import expect, hidden, own, verdict
from selfattention import data, patches, stereo
from selfattention import matching as lib
from selfattention_exercises import matching as checks
from selfattention_models.motorcycle import half_resolution_pair
from selfattention_course.judges import _correlation as volume
from selfattention_course.judges import matching as judges


def row_scores(F_left, F_right, max_disp):
    """One row's ``Q Kᵀ`` (W, W), ``-inf`` off the epipolar band."""
    S = F_left @ F_right.T
    return np.where(stereo.epipolar_mask(len(S), max_disp), S, -np.inf)


displacements = own(lib.displacements)
lookup = own(lib.lookup)


# ------------------------------------------------------------ 10.1
def lr_check(C):
    """The check as the chapter's solution writes it: the right pixels'
    choices gathered from the same volume."""
    H, W, K = C.shape
    d = np.argmax(C, axis=-1)
    x = np.arange(W)
    cols = x[:, None] + np.arange(K)
    R = np.where(cols < W, C[:, np.minimum(cols, W - 1), np.arange(K)],
                 -np.inf)
    match = x - d
    back = match + np.take_along_axis(np.argmax(R, axis=-1), match, axis=1)
    return np.abs(back - x) <= 1


def by_scores(C):
    """Another honest route: each row's masked score matrix Q Kᵀ (keys are
    right columns), the best key of each query and the best query of that
    key, its column."""
    H, W, K = C.shape
    out = np.zeros((H, W), bool)
    for y in range(H):
        S = np.full((W, W), -np.inf)
        for d in range(K):
            S[np.arange(d, W), np.arange(W - d)] = C[y, d:, d]
        key = np.argmax(S, axis=1)
        out[y] = np.abs(np.argmax(S[:, key], axis=0) - np.arange(W)) <= 1
    return out


def test_the_reference_is_mutual_matching_on_the_row_s_scores():
    """On the features of drawn scenes, the check on the volume is the
    round trip through each row's masked Q Kᵀ, and the right image's
    choices are those of the volume built with the images swapped (and
    mirrored, so that the right image's matches lie to its right)."""
    rng = np.random.default_rng(3)
    for _ in range(5):
        F_l, F_r, _, D = judges.scene_rows(rng)
        C = stereo.disparity_volume(F_l, F_r, D)
        ref = judges.consistent(C)
        assert np.array_equal(ref, by_scores(C))
        C_right = stereo.disparity_volume(F_r[:, ::-1], F_l[:, ::-1],
                                          D)[:, ::-1]
        x = np.arange(C.shape[1])
        for y in range(len(C)):
            S = row_scores(F_l[y], F_r[y], D)
            key = np.argmax(S, axis=1)                  # right columns
            back = key + np.argmax(C_right[y], axis=-1)[key]
            assert np.array_equal(ref[y], np.abs(back - x) <= 1)


def test_the_check_flags_occluded_pixels():
    """In the drawn scenes, most pixels that the near surfaces hide fail
    the check, and few of the others do."""
    rng = np.random.default_rng(4)
    hidden_fail, visible_fail = [], []
    for _ in range(30):
        F_l, F_r, truth, D = judges.scene_rows(rng)
        ok = judges.consistent(stereo.disparity_volume(F_l, F_r, D))
        hidden = stereo.occluded(truth)
        hidden_fail.append((~ok)[hidden])
        visible_fail.append((~ok)[~hidden])
    hidden_fail, visible_fail = (np.concatenate(a) for a in
                                 (hidden_fail, visible_fail))
    assert len(hidden_fail) > 500
    assert hidden_fail.mean() > 0.5 and visible_fail.mean() < 0.15


def test_every_draw_tells_each_slip_from_the_check():
    """The border and the tolerance matter on few pixels; each draw holds a
    case where every slip the check names gives another map."""
    for seed in range(10):
        cases = checks.check_consistency.draw(np.random.default_rng(seed))
        told = [[not np.array_equal(judges.consistent(c["C"]), other)
                 for _, other, _ in judges._consistency_slips(c["C"])]
                for c in cases]
        assert np.any(told, axis=0).all()


slip = own(judges.consistent)


@pytest.mark.parametrize("answer, status, code", [
    (lr_check, "correct", None),
    (by_scores, "correct", None),
    (lambda C: lr_check(C).astype(int), "correct", None),
    (None, "not done", None),
    (lambda C: ~lr_check(C), "wrong", "inverted"),
    (lambda C: slip(C, at_own_column=True), "wrong", "own-column"),
    (lambda C: slip(C, left_winners=True), "wrong", "left-winners"),
    (lambda C: slip(C, back=-1), "wrong", "back-sign"),
    (lambda C: slip(C, tolerance=0), "wrong", "exact-only"),
    (lambda C: slip(C, tolerance=2), "wrong", "too-lenient"),
    (lambda C: slip(C, clipped=True), "wrong", "off-image"),
    (lambda C: ~stereo.occluded(np.argmax(C, -1).astype(float)), "wrong",
     "one-map"),
    (lambda C: np.abs(np.argmax(C, -1) - 1.5), "wrong", "not-boolean"),
    (lambda C: lr_check(C)[:, :-1], "wrong", "shape"),
    (lambda C: "consistent", "wrong", "type"),
    (lambda C: lr_check(C) ^ (np.arange(C.shape[1]) == 3), "wrong",
     "not-the-check"),
])
def test_consistency_check(answer, status, code):
    verdict(checks.check_consistency, [answer], status, code)


@pytest.mark.parametrize("answer", [lr_check, by_scores])
def test_honest_consistency_checks_pass_hidden_cases(answer):
    hidden(checks.check_consistency, answer)


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
    assert volume.pyramid_entries(H, W, levels) == built_pyramid(H, W, levels)


def pyramid(H, W, levels):
    return sum(H * W * (H // 2 ** k) * (W // 2 ** k) for k in range(levels))


def macs(H, W, D, levels, radius, updates):
    window = (2 * radius + 1) ** 2
    return (H * W) ** 2 * D, updates * H * W * levels * window * D


def counted_macs(H, W, D, levels, radius, updates):
    """Another honest route: count the dot products, values of the finest
    level and values read per level and update, then D multiply-adds each."""
    built = len(range(H * W)) * len(range(H * W))     # every pixel pair
    reads = 0
    for _ in range(updates):
        for _ in range(levels):
            reads += H * W * (2 * radius + 1) ** 2
    return built * D, reads * D


@pytest.mark.parametrize("answer, status, code", [
    (pyramid, "correct", "correct"),
    (None, "not done", "not-done"),
    (lambda H, W, L: int(sum(H * W * H * W / 4 ** k for k in range(L))),
     "wrong", "not-floored"),
    (lambda H, W, L: sum(((H // 2 ** k) * (W // 2 ** k)) ** 2
                         for k in range(L)), "wrong", "frame-1-pooled"),
    (lambda H, W, L: pyramid(H, W, L) // (H * W), "wrong",
     "one-slice-per-level"),
    (lambda H, W, L: pyramid(H, W, L + 1), "wrong", "level-too-many"),
    (lambda H, W, L: pyramid(H, W, L) - pyramid(H, W, L - 1), "wrong",
     "coarsest-only"),
    (lambda H, W, L: 12345, "wrong", "not-the-entries"),
    (lambda H, W, L: "many", "wrong", "not-a-number"),
])
def test_pyramid_check(answer, status, code):
    verdict(checks.check_pyramid, [answer, macs], status, code)


@pytest.mark.parametrize("answer, status, code", [
    (macs, "correct", "correct"),
    (counted_macs, "correct", "correct"),
    (None, "not done", "not-done"),
    (lambda H, W, D, L, r, U: (pyramid(H, W, L) * D,
                               macs(H, W, D, L, r, U)[1]), "wrong",
     "coarse-levels-multiplied"),
    (lambda H, W, D, L, r, U: (macs(H, W, D, L, r, U)[0],
                               U * H * W * L * (2 * r) ** 2 * D), "wrong",
     "window-side"),
    (lambda H, W, D, L, r, U: (macs(H, W, D, L, r, U)[0],
                               macs(H, W, D, L, r, U)[1] // L), "wrong",
     "one-level"),
    (lambda H, W, D, L, r, U: (macs(H, W, D, L, r, U)[0],
                               macs(H, W, D, L, r, U)[1] // U), "wrong",
     "one-update"),
    (lambda H, W, D, L, r, U: tuple(v // D for v in macs(H, W, D, L, r, U)),
     "wrong", "no-channels"),
    (lambda H, W, D, L, r, U: (1, 2), "wrong", "not-the-macs"),
    (lambda H, W, D, L, r, U: macs(H, W, D, L, r, U)[0], "wrong",
     "macs-not-a-pair"),
])
def test_correlation_macs_check(answer, status, code):
    verdict(checks.check_pyramid, [pyramid, answer], status, code)


@pytest.mark.parametrize("answer", [macs, counted_macs])
def test_pyramid_passes_hidden_cases(answer):
    hidden(checks.check_pyramid, [pyramid, answer])


def test_on_demand_values_equal_the_pyramid_s():
    # the linearity the written part asks for, checked on real tensors
    rng = np.random.default_rng(3)
    F1, F2 = rng.standard_normal((2, 6, 8, 5))
    C = np.einsum("ijc,klc->ijkl", F1, F2)
    pooled_C = torch.nn.functional.avg_pool2d(
        torch.tensor(C.reshape(48, 1, 6, 8)), 2, stride=2).numpy()
    pooled_F2 = torch.nn.functional.avg_pool2d(
        torch.tensor(F2.transpose(2, 0, 1)[None]), 2, stride=2)[0].numpy()
    on_demand = np.einsum("ijc,ckl->ijkl", F1, pooled_F2)
    np.testing.assert_allclose(pooled_C.reshape(6, 8, 3, 4), on_demand,
                               rtol=1e-12, atol=1e-12)


def test_one_level_too_few_is_named():
    case = {"H": 47, "W": 63, "levels": 4}
    with pytest.raises(judges.Wrong) as raised:
        volume._entries_judge(pyramid(47, 63, 3), **case)
    assert raised.value.code == "level-too-few"


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
        ref = volume.bilinear_lookup(**case)
        assert np.abs(ref - grid_sample_lookup(**case)).max() < 1e-12


def test_whole_pixel_flows_read_what_the_chapter_s_lookup_reads():
    case = checks.check_bilinear_lookup.public_cases()[0]
    flow = case["flow"].astype(int)
    assert np.array_equal(volume.bilinear_lookup(**case),
                          lookup(case["C"], flow, case["radius"]))


def four_lookups(C, flow, radius):
    base = np.floor(flow)
    a, b = flow[..., :1] - base[..., :1], flow[..., 1:] - base[..., 1:]
    base = base.astype(int)
    return sum(wy * wx * lookup(C, base + [oy, ox], radius)
               for oy, wy in ((0, 1 - a), (1, a))
               for ox, wx in ((0, 1 - b), (1, b)))


@pytest.mark.parametrize("answer, status, code", [
    (four_lookups, "correct", "correct"),
    # PyTorch's sampler does the interpolation the exercise asks for
    (grid_sample_lookup, "for review", "for-review"),
    (lambda C, f, r: lib.lookup(C, np.floor(f).astype(int), r), "wrong",
     "floored"),
    (None, "not done", "not-done"),
    (lambda C, f, r: lookup(C, np.rint(f).astype(int), r), "wrong",
     "rounded"),
    (lambda C, f, r: own(volume.bilinear_lookup)(C, f, r, swap=True), "wrong",
     "weights-swapped"),
    (lambda C, f, r: four_lookups(C, f[..., ::-1].copy(), r), "wrong",
     "columns-first"),
    (lambda C, f, r: four_lookups(C, f, r) + 1, "wrong",
     "whole-pixels-wrong"),
    (lambda C, f, r: four_lookups(C, f, r)[..., :1], "wrong", "shape"),
])
def test_bilinear_check(answer, status, code):
    verdict(checks.check_bilinear_lookup, [answer], status, code)


# ------------------------------------------------------------ 10.4 soft-argmax
def soft(C, T, r, naive=False, variance=False, times=False, from_one=False,
         one_sided=False, strict=False, cut_only=False, window=True):
    """A retyped windowed soft-argmax, with the slips the check names."""
    gap = np.arange(C.shape[-1]) - np.argmax(C, -1)[..., None]
    near = (gap >= 0) & (gap <= r) if one_sided else \
        (np.abs(gap) < r if strict else np.abs(gap) <= r)
    near = near | (not window)
    Z = C * T if times else C / T
    if not cut_only:
        Z = np.where(near, Z, -np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        E = np.exp(Z) if naive else np.exp(Z - Z.max(-1, keepdims=True))
        p = E / E.sum(-1, keepdims=True)
    if cut_only:
        p = np.where(near, p, 0.0)
    d = np.arange(C.shape[-1]) + (1 if from_one else 0)
    mean = p @ d
    var = np.maximum(p @ d ** 2 - mean ** 2, 0)
    return mean, var if variance else np.sqrt(var)


def by_slices(C, T, r):
    """Another honest route: a loop over pixels, slicing each window."""
    mean, spread = np.empty(C.shape[:-1]), np.empty(C.shape[:-1])
    for idx in np.ndindex(C.shape[:-1]):
        w = int(np.argmax(C[idx]))
        lo, hi = max(w - r, 0), min(w + r + 1, C.shape[-1])
        p = torch.softmax(torch.as_tensor(C[idx][lo:hi]) / T, 0).numpy()
        d = np.arange(lo, hi)
        mean[idx] = p @ d
        spread[idx] = np.sqrt(max(p @ (d - p @ d) ** 2, 0.0))
    return mean, spread


def masked_library(C, T, r):
    """The window by hand, the rest by the chapter's printed soft_argmax:
    the reasoning the exercise asks for is the window."""
    gap = np.arange(C.shape[-1]) - np.argmax(C, -1)[..., None]
    return stereo.soft_argmax(np.where(np.abs(gap) <= r, C, -np.inf), T)


@pytest.mark.parametrize("answer, status, code", [
    (soft, "correct", "correct"),
    (by_slices, "correct", "correct"),
    (masked_library, "correct", "correct"),
    (None, "not done", "not-done"),
    (lambda C, T, r: soft(C, T, r, window=False), "wrong", "not-windowed"),
    (lambda C, T, r: stereo.soft_argmax(C, T), "wrong", "not-windowed"),
    (lambda C, T, r: soft(C, T, r, one_sided=True), "wrong",
     "window-one-sided"),
    (lambda C, T, r: soft(C, T, r, strict=True), "wrong",
     "window-too-narrow"),
    (lambda C, T, r: soft(C, T, r, cut_only=True), "wrong",
     "not-renormalised"),
    (lambda C, T, r: soft(C, T, r, naive=True), "wrong", "overflow"),
    (lambda C, T, r: soft(C, T, r, variance=True), "wrong",
     "variance-not-spread"),
    (lambda C, T, r: soft(C, T, r, times=True), "wrong",
     "multiplied-by-temperature"),
    (lambda C, T, r: soft(C, T, r, from_one=True), "wrong",
     "disparities-from-one"),
    (lambda C, T, r: (soft(C, T, r)[0], soft(C, 2 * T, r)[1]), "wrong",
     "not-the-spread"),
    (lambda C, T, r: soft(C, 2 * T, r), "wrong", "not-the-mean"),
    (lambda C, T, r: soft(C, T, r)[0], "wrong", "type"),
    (lambda C, T, r: (soft(C, T, r)[0][..., None], soft(C, T, r)[1]),
     "wrong", "shape"),
])
def test_soft_argmax_check(answer, status, code):
    verdict(checks.check_soft_argmax, [answer], status, code)


@pytest.mark.parametrize("answer", [soft, by_slices])
def test_soft_argmax_passes_hidden_cases(answer):
    hidden(checks.check_soft_argmax, answer)


def test_the_windowed_mean_stays_within_the_radius_of_the_winner():
    rng = np.random.default_rng(5)
    C = rng.uniform(-1, 1, (4, 9, 12))
    for r in (1, 2, 3):
        mean, _ = soft(C, 5.0, r)               # warm: weights spread
        assert np.all(np.abs(mean - np.argmax(C, -1)) <= r + 1e-12)


# ------------------------------------------------------------ 10.5 window
PAIR = half_resolution_pair()


def window_scores(left, right, truth, k, rows, max_disp=stereo.MAX_DISP,
                  context=True):
    """The experiment as the chapter's solution runs it."""
    F_l, F_r = (stereo.patch_features(img, k, rows=rows) if context
                else stereo.patch_features(img[rows], k)
                for img in (left, right))
    C = stereo.disparity_volume(F_l, F_r, max_disp)
    s = stereo.disparity_scores(np.argmax(C, -1).astype(float), truth[rows])
    return s["epe"], s["within_1"], s["within_3"]


def by_attention(left, right, truth, k, rows):
    """Another honest route: each row's features from a slice with k // 2
    rows of context, the masked scores Q Kᵀ of the row (keys are right
    columns x'), the best key turned into a disparity x − x'."""
    r, H = k // 2, len(left)
    found = []
    for y in rows:
        a, b = max(y - r, 0), min(y + r + 1, H)
        F_l, F_r = (stereo.patch_features(img[a:b], k)[y - a]
                    for img in (left, right))                 # (W, 3k²)
        S = row_scores(F_l, F_r, stereo.MAX_DISP)
        found.append(np.arange(len(S)) - np.argmax(S, axis=1))
    s = stereo.disparity_scores(np.array(found, float), truth[rows])
    return s["epe"], s["within_1"], s["within_3"]


def test_the_reference_scores_the_whole_image_s_features():
    """On rows at the borders and inside, for the windows the grader
    draws: the judge's run is winner-take-all on the features of the whole
    images, restricted to the rows."""
    rows = np.array([0, 1, 2, 117, 247, 249])
    for k in (3, 5):
        F_l, F_r = (stereo.patch_features(img, k)[rows]
                    for img in (PAIR.left, PAIR.right))
        C = stereo.disparity_volume(F_l, F_r, stereo.MAX_DISP)
        s = stereo.disparity_scores(np.argmax(C, -1).astype(float),
                                    PAIR.disparity[rows])
        assert np.allclose(
            judges.window_scores(PAIR.left, PAIR.right, PAIR.disparity, k,
                                 rows),
            (s["epe"], s["within_1"], s["within_3"]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("answer", [
    window_scores, pytest.param(by_attention, marks=pytest.mark.slow)],
    ids=["solution", "attention"])
def test_honest_windows_pass_hidden_cases(answer):
    hidden(checks.check_window, answer, seeds=range(4))


def test_each_case_is_a_noisy_band_drawn_anywhere():
    """A case's images are a band of the pair plus noise drawn for it:
    never the same twice, near the pair (the noise is small), and in 200
    cases the bands come within 10 rows of both ends of the image."""
    rng = np.random.default_rng(0)
    cases = [c for _ in range(100) for c in checks.check_window.draw(rng)]
    tops = set()
    for c in cases:
        top = next(t for t in range(len(PAIR.left) - judges.BAND_ROWS + 1)
                   if np.array_equal(c["truth"], PAIR.disparity[
                       t:t + judges.BAND_ROWS], equal_nan=True))
        tops.add(top)
        clean = PAIR.left[top:top + judges.BAND_ROWS]
        assert 0 < np.abs(c["left"] - clean).max() < 10 * judges.NOISE
    noise = [c["left"].ravel()[:50].tobytes() for c in cases]
    assert len(set(noise)) == len(noise)
    last = len(PAIR.left) - judges.BAND_ROWS
    assert min(tops) < 10 and max(tops) > last - 10
    assert {c["k"] for c in cases} == set(judges.WINDOWS)


def tabulated(cases):
    """An answer that returns numbers measured at home: the scores of the
    case for its window, whatever images and rows it is given."""
    table = {c["k"]: window_scores(**c) for c in cases}
    return lambda left, right, truth, k, rows: table.get(
        k, next(iter(table.values())))


def on_the_chapter_pair(left, right, truth, k, rows):
    """An answer that ignores the images it is given for the chapter's."""
    return window_scores(PAIR.left, PAIR.right, PAIR.disparity, k, rows)


@pytest.mark.slow
def test_a_table_made_at_home_fails_the_hidden_cases():
    ex = checks.check_window
    at_home = tabulated(ex.public_cases())
    verdict(ex, [at_home], "correct")          # the public cases: right
    held = lambda left, right, truth, k, rows: window_scores(  # noqa: E731
        PAIR.left, PAIR.right, PAIR.disparity, k, PAIR.held_out)
    for seed in range(2):
        cases = ex.draw(np.random.default_rng(1000 + seed))
        for answer, code in ((at_home, "scores"), (held, "rows-ignored"),
                             (on_the_chapter_pair, "chapter-pair")):
            expect(ex.assess(ex.attempt([answer], cases), cases), "wrong",
                   code)


@pytest.mark.parametrize("answer, code", [
    (lambda l, r, t, k, rows: window_scores(l, r, t, k + 2, rows), "window"),
    (lambda l, r, t, k, rows: window_scores(l, r, t, k - 2, rows), "window"),
    (lambda l, r, t, k, rows: window_scores(l, r, t, 5, rows), "window"),
    (lambda l, r, t, k, rows: window_scores(l, r, t, k, rows,
                                            context=False), "no-context"),
    (lambda l, r, t, k, rows: window_scores(l, r, t, k, rows,
                                            stereo.MAX_DISP - 1),
     "max-disp"),
    (lambda l, r, t, k, rows: window_scores(l, r, t, k, np.arange(len(t))),
     "rows-ignored"),
    (on_the_chapter_pair, "chapter-pair"),
    (lambda *a: (np.sqrt(window_scores(*a)[0] ** 2 + 1e-3),
                 *window_scores(*a)[1:]), "scores"),
    (lambda *a: (window_scores(*a)[0], *(100 * np.array(
        window_scores(*a)[1:]))), "shares"),
    (lambda *a: tuple(np.array(window_scores(*a))[[0, 2, 1]]),
     "shares-order"),
    (lambda *a: window_scores(*a)[0], "type"),
    (None, "not-done"),
])
def test_window_check_names_the_mistake(answer, code):
    status = "not done" if answer is None else "wrong"
    verdict(checks.check_window, [answer], status, code)


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


@pytest.mark.parametrize("prediction, answer, status, code", [
    (0.9, matches, "correct", "correct"),
    (0.05, matches, "correct", "correct"),
    (None, matches, "not done", "not-done"),
    (0.9, None, "not done", "not-done"),
    (1.5, matches, "wrong", "not-a-share"),
    ("most", matches, "wrong", "not-a-number"),
    (0.5, lambda s, dy, dx: matches(s, dy, dx, wrap=False), "wrong",
     "not-wrapped"),
    (0.5, lambda s, dy, dx: 4 * matches(s, dy, dx), "wrong",
     "pixels-not-patches"),
    (0.5, lambda s, dy, dx: matches(s, dy, dx)[:, ::-1], "wrong",
     "columns-first"),
    (0.5, lambda s, dy, dx: own(judges.landing_matches)(s, dy, dx,
                                                   transpose=True),
     "wrong", "argmax-over-queries"),
    (0.5, lambda s, dy, dx: matches(s, dy, dx)[:10], "wrong", "shape"),
    (0.5, lambda s, dy, dx: matches(s, dy, dx) + 1, "wrong",
     "not-the-matches"),
])
def test_landing_check(prediction, answer, status, code):
    verdict(checks.check_landing, [prediction, answer], status, code)


def test_an_empty_prediction_is_named():
    fb = checks.check_landing.feedback(None, matches)
    expect(fb, "not done", "not-done")
    # Kept on purpose: of the exercise's two answers, the message names the
    # one still empty by the student's own variable name (`prediction`,
    # not `my_matches`): which cell to fill in.
    assert "`prediction`" in fb.message
