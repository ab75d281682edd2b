"""The judges of :ref:`ch-matching`, Matching and motion: hidden cases, judges
and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import functools

import numpy as np
from selfattention import stereo
from selfattention.matching import displacements
from selfattention.exercises.core import (NotDone, Opaque, Wrong,
                                          expect_shape,
                                          returned_array, returned_arrays,
                                          type_name)

from . import Judge


def _array(out, what: str, dtype=None) -> np.ndarray:
    if isinstance(out, (str, Opaque)) or out is None:
        raise Wrong(f"{what} should return an array, got {type_name(out)}",
                    "type")
    try:
        return np.asarray(out, dtype=dtype)
    except (TypeError, ValueError):
        raise Wrong(f"{what} should return an array of numbers, got "
                    f"{type_name(out)}", "type") from None


def _number(value, what: str) -> float:
    try:
        if isinstance(value, (str, Opaque, tuple, list, bool)):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise Wrong(f"{what} should be a number, got "
                    f"{type_name(value)}", "not-a-number") from None


def _texture(rng, channels=6, waves=8):
    """A smooth random texture along a row: ``u`` (any shape) -> features
    (..., channels), a sum of waves, so that neighbours look alike."""
    freq = rng.uniform(0.2, 1.6, waves)
    amp = rng.standard_normal((channels, waves))
    phase = rng.uniform(0, 2 * np.pi, (channels, waves))
    return lambda u: np.einsum(
        "cm,...cm->...c", amp,
        np.cos(np.asarray(u)[..., None, None] * freq + phase))


def row_scene(rng, W, max_disp, noise=0.15):
    """One row of a made-up scene seen by two rectified cameras.

    A far surface fills the row; one or two near ones, narrower, stand in
    front of it, at real-valued disparities. Each camera sees, at each
    pixel, the nearest surface there: left pixel ``x`` sees the surface
    point at ``x``, right pixel ``x'`` the point that lands there, at
    ``x' + d``. -> features ``(W, 6)`` of the left and right row, centred,
    unit length, with noise; the true disparity ``(W,)`` of the left row.
    """
    far = rng.uniform(1, max_disp / 3)
    layers = [(far, -np.inf, np.inf, _texture(rng))]
    for _ in range(int(rng.integers(1, 3))):
        width = rng.uniform(5, W / 3)
        start = rng.uniform(0, W - width)
        layers.append((rng.uniform(far + 3, max_disp - 0.5), start,
                       start + width, _texture(rng)))
    layers.sort(key=lambda layer: layer[0])          # far to near
    x = np.arange(W, dtype=float)

    def seen(right):
        F, depth = np.zeros((W, 6)), np.full(W, -1.0)
        for d, start, stop, texture in layers:
            u = x + d if right else x                  # point's left column
            on = (u >= start) & (u < stop)             # later layers: nearer
            F[on], depth[on] = texture(u[on]), d
        F = F + noise * rng.standard_normal(F.shape)
        F = F - F.mean(axis=-1, keepdims=True)
        return F / np.linalg.norm(F, axis=-1, keepdims=True), depth

    (F_left, truth), (F_right, _) = seen(False), seen(True)
    return F_left, F_right, truth


def scene_rows(rng):
    """Rows of made-up scenes -> (F_left, F_right) (H, W, 6), the true
    disparity (H, W) and d_max."""
    H, W = int(rng.integers(2, 5)), int(rng.integers(30, 61))
    max_disp = int(rng.integers(8, 17))
    rows = [row_scene(rng, W, max_disp) for _ in range(H)]
    F_left, F_right, truth = (np.stack(r) for r in zip(*rows))
    return F_left, F_right, truth, max_disp


def consistent(C, tolerance=1, back=1, at_own_column=False,
               left_winners=False, clipped=False):
    """The left-right check on a volume ``C`` (H, W, d_max + 1): left pixel
    ``x`` picks ``d``, right pixel ``x' = x - d`` picks ``d'`` among the
    left pixels ``x' + d'`` (read from the same volume, at
    ``C[y, x' + d', d']``), and ``x`` passes if ``x' + d'`` is within
    ``tolerance`` of it -> bool (H, W).

    The other settings are mistakes the check names: ``back=-1`` (back to
    ``x' - d'``), ``at_own_column`` (the right winner of column ``x``, not
    ``x - d``), ``left_winners`` (the left image's winners stand in for the
    right's), ``clipped`` (candidates off the right edge read at column
    W - 1 instead of left out).
    """
    H, W, K = C.shape
    d = np.argmax(C, axis=-1)                          # (H, W) left winners
    x = np.arange(W)
    cols = x[:, None] + np.arange(K)                   # (W, K): x' + d'
    R = C[:, np.minimum(cols, W - 1), np.arange(K)]    # (H, W, K)
    if not clipped:
        R = np.where(cols < W, R, -np.inf)
    d_right = d if left_winners else np.argmax(R, axis=-1)
    target = x - d                                     # (H, W) right pixel
    asked = np.broadcast_to(x, d.shape) if at_own_column else target
    lands = target + back * np.take_along_axis(d_right, asked, axis=1)
    return np.abs(lands - x) <= tolerance


def _consistency_slips(C):
    """(code, what the slip returns, message) for each slip the check
    names, in the order it tries them."""
    occluded = stereo.occluded(np.argmax(C, axis=-1).astype(float))
    return [
        ("inverted", ~consistent(C), "True marks the pixels that fail; "
         "return True where the match points back (the book's masks: True "
         "= keep)"),
        ("own-column", consistent(C, at_own_column=True), "you asked the "
         "right pixel in the left pixel's own column x; ask the one its "
         "match lands on, x - d"),
        ("left-winners", consistent(C, left_winners=True), "you reused the "
         "left image's disparities at the right pixel; the right pixel "
         "must choose among the left pixels it could match, from its own "
         "side of the volume"),
        ("back-sign", consistent(C, back=-1), "right pixel x' at disparity "
         "d' points back to left pixel x' + d', to the right of it"),
        ("exact-only", consistent(C, tolerance=0), "that asks the match to "
         "point back exactly; within one pixel, |x - (x' + d')| <= 1, "
         "passes too"),
        ("too-lenient", consistent(C, tolerance=2), "that lets a match "
         "point back two pixels away; within one pixel passes, two do not"),
        ("off-image", consistent(C, clipped=True), "near the right edge "
         "some left pixels x' + d' fall off the image: leave them out of "
         "the right pixel's choice rather than reading column W - 1"),
        ("one-map", ~occluded, "that is the occlusion of the left "
         "disparities alone; the check asks the right image for its own "
         "matches"),
        ("one-map", occluded, "that is the occlusion of the left "
         "disparities alone; the check asks the right image for its own "
         "matches")]


def _consistency_case(rng, every_slip=False):
    # Redraw (a few times at most) until every slip the check names gives
    # another map than the check: the border and the tolerance matter on
    # few pixels, and a case where they do not tells nothing about them.
    for _ in range(100):
        F_left, F_right, _, max_disp = scene_rows(rng)
        C = stereo.disparity_volume(F_left, F_right, max_disp)
        want = consistent(C)
        if not every_slip or all(not np.array_equal(want, slip)
                                 for _, slip, _ in _consistency_slips(C)):
            break
    return {"C": C}


def _consistency_cases(rng):
    return [_consistency_case(rng), _consistency_case(rng, every_slip=True)]


def _consistency_judge(out, C):
    if isinstance(out, (str, Opaque)) or out is None:
        raise Wrong(f"my_consistent should return a boolean array, got "
                    f"{type_name(out)}", "type")
    got = np.asarray(out)
    expect_shape(got, "my_consistent(C)", C.shape[:2], "(H, W)",
                 "one answer per left pixel")
    if got.dtype != bool:
        if got.dtype.kind not in "biuf" or not np.isin(got, (0, 1)).all():
            raise Wrong("return True or False for each left pixel: whether "
                        "its match points back within one pixel",
                        "not-boolean")
        got = got.astype(bool)
    want = consistent(C)
    if np.array_equal(got, want):
        return None
    for code, slip, message in _consistency_slips(C):
        if np.array_equal(got, slip):
            raise Wrong(message, code)
    wrong = int((got != want).sum())
    raise Wrong(f"{wrong} of the {got.size} left pixels get another answer "
                f"than the check: left pixel x picks d, right pixel x - d "
                f"picks among the left pixels that could match it, and x "
                f"passes if that one is within one pixel of x",
                "not-the-check")


def pyramid_entries(H, W, levels, floor=True, frame1=True, first=0):
    """Entries of levels ``first … levels − 1`` of a correlation pyramid.

    ``floor=False`` divides exactly; ``frame1=False`` pools frame 1 too:
    the mistakes the check names.
    """
    total = 0
    for k in range(first, levels):
        h, w = ((H // 2 ** k, W // 2 ** k) if floor
                else (H / 2 ** k, W / 2 ** k))
        total += (H * W if frame1 else h * w) * h * w
    return total


def correlation_macs(H, W, D, levels, radius, updates, coarse=False,
                     side=None, per_level=True, per_update=True,
                     channels=True):
    """Multiply-adds of the dot products: ``(built, on_demand)``. Built:
    the finest level, ``(HW)² D`` (the coarser ones are pooled from it,
    additions only). On demand: at each update, each pixel of frame 1 dots
    its feature with one pooled (and interpolated) feature of frame 2 per
    value it reads, ``(2r + 1)²`` per level. The keywords make the usual
    slips: ``coarse`` (coarse levels' dot products counted), ``side`` (the
    window's side), ``per_level``, ``per_update``, ``channels``."""
    c = D if channels else 1
    built = (pyramid_entries(H, W, levels) if coarse else (H * W) ** 2) * c
    window = (2 * radius + 1 if side is None else side) ** 2
    on_demand = (H * W * window * c * (levels if per_level else 1)
                 * (updates if per_update else 1))
    return built, on_demand


def _pyramid_cases(rng):
    cases = [{"H": 47, "W": 63, "levels": 4, "D": 256, "radius": 4,
              "updates": 12}]                        # odd: pooling floors
    for _ in range(2):
        levels = int(rng.integers(2, 6))
        low = 2 ** (levels - 1)                        # no level is empty
        cases.append({"H": int(rng.integers(low, 400)),
                      "W": int(rng.integers(low, 400)), "levels": levels,
                      "D": int(rng.integers(8, 513)),
                      "radius": int(rng.integers(1, 7)),
                      "updates": int(rng.integers(2, 33))})
    return cases


def _pyramid_judge(out, H, W, levels, D, radius, updates):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Wrong("expected the two answers' values", "not-a-number")
    entries, macs = out
    _entries_judge(entries, H, W, levels)
    _macs_judge(macs, H, W, D, levels, radius, updates)
    return None


def _macs_judge(out, H, W, D, levels, radius, updates):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Wrong(f"my_correlation_macs should return the pair (built, "
                    f"on_demand), got {type_name(out)}", "macs-not-a-pair")
    got = tuple(_number(v, "each count of my_correlation_macs") for v in out)
    args = (H, W, D, levels, radius, updates)
    want = correlation_macs(*args)
    if got == want:
        return None
    where = (f"for H={H}, W={W}, D={D}, levels={levels}, radius={radius}, "
             f"updates={updates}")
    slips = [
        ({"coarse": True}, 0, "coarse-levels-multiplied", "the coarse "
         "levels are averages of the finest one's correlations: building "
         "them adds, it multiplies nothing"),
        ({"side": 2 * radius}, 1, "window-side", "a window of radius r "
         "holds (2r + 1)² values, the centre included"),
        ({"per_level": False}, 1, "one-level", "each level of the pyramid "
         "is read at every update: multiply by the levels"),
        ({"per_update": False}, 1, "one-update", "on demand, the "
         "correlations are computed again at every update"),
        ({"channels": False}, None, "no-channels", "each correlation is a "
         "dot product of D channels: D multiply-adds"),
    ]
    for kwargs, part, code, message in slips:
        other = correlation_macs(*args, **kwargs)
        if (part is None and got == other) or (
                part is not None and got[part] == other[part]
                and got[1 - part] == want[1 - part]):
            raise Wrong(f"{where}: {message}", code)
    raise Wrong(f"{where} the counts should be {want[0]:,} built and "
                f"{want[1]:,} on demand; you give ({got[0]:,.0f}, "
                f"{got[1]:,.0f})", "not-the-macs")


def _entries_judge(out, H, W, levels):
    value = _number(out, "my_pyramid_entries(H, W, levels)")
    want = pyramid_entries(H, W, levels)
    if value == want:
        return None
    slips = [
        (pyramid_entries(H, W, levels, floor=False), "not-floored",
         "a pooled side is a "
         "whole number: 2 × 2 average pooling floors odd sides, so level k "
         "has ⌊H/2^k⌋ × ⌊W/2^k⌋ targets"),
        (pyramid_entries(H, W, levels, frame1=False), "frame-1-pooled",
         "only the last two "
         "axes (frame 2) are pooled; every pixel of frame 1 keeps its own "
         "slice at every level"),
        (pyramid_entries(H, W, levels) // (H * W), "one-slice-per-level",
         "each level holds one "
         "slice per pixel of frame 1: multiply by H·W"),
        (pyramid_entries(H, W, levels + 1), "level-too-many",
         "one level too many: the finest "
         "level is level 0, so the levels are k = 0 … levels − 1"),
        (pyramid_entries(H, W, levels - 1), "level-too-few",
         "one level too few: the finest "
         "level counts too, k = 0 … levels − 1"),
        (pyramid_entries(H, W, levels, first=levels - 1), "coarsest-only",
         "that is only the "
         "coarsest level; the pyramid keeps all of them"),
    ]
    for other, code, message in slips:    # exact division: up to rounding
        if abs(value - other) < 1 <= abs(other - want):
            raise Wrong(message, code)
    raise Wrong(f"for H={H}, W={W}, levels={levels} the pyramid holds "
                f"{want:,} entries, you give {value:,.0f}", "not-the-entries")


def bilinear_lookup(C, flow, radius, how="bilinear", swap=False):
    """RAFT's lookup at real-valued targets, indices wrapping around.

    ``how`` = "round" or "floor" and ``swap`` (each pixel's nearer neighbour
    weighted less) are the mistakes the check names.
    """
    H, W = C.shape[:2]
    d = np.arange(-radius, radius + 1)
    dy, dx = (o.ravel() for o in np.meshgrid(d, d, indexing="ij"))
    ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    py = ys[..., None] + flow[..., :1] + dy                 # (H, W, k²)
    px = xs[..., None] + flow[..., 1:] + dx
    if how != "bilinear":
        cut = np.rint if how == "round" else np.floor
        py, px = cut(py), cut(px)
    y0, x0 = np.floor(py), np.floor(px)
    a, b = py - y0, px - x0                                # in [0, 1)
    if swap:
        a, b = 1 - a, 1 - b
    y0, x0 = y0.astype(int), x0.astype(int)
    i, j = ys[..., None], xs[..., None]
    out = 0.0
    for oy, wy in ((0, 1 - a), (1, a)):
        for ox, wx in ((0, 1 - b), (1, b)):
            out = out + wy * wx * C[i, j, (y0 + oy) % H, (x0 + ox) % W]
    return out


def _bilinear_cases(rng):
    cases = []
    for whole in (True, False):
        H, W = int(rng.integers(4, 7)), int(rng.integers(7, 10))
        flow = rng.uniform(-3, 3, size=(H, W, 2))
        cases.append({"C": rng.standard_normal((H, W, H, W)),
                      "flow": np.round(flow) if whole else flow,
                      "radius": int(rng.integers(1, 3))})
    return cases


def _bilinear_judge(L, C, flow, radius):
    L = returned_array(L, "my_bilinear_lookup")
    H, W = C.shape[:2]
    expect_shape(L, "L", (H, W, (2 * radius + 1) ** 2),
                 "(H, W, (2·radius + 1)²)", "one window per pixel")
    if _allclose(L, bilinear_lookup(C, flow, radius)):
        return None
    swap = "the weights are swapped: the nearer neighbour must get the " \
        "larger weight, 1 − a for a fraction a past it"
    if np.array_equal(flow, np.round(flow)):                  # whole pixels
        if _allclose(L, bilinear_lookup(C, flow[..., ::-1], radius)):
            raise Wrong("flow is (d_row, d_col): its first component moves "
                        "along the rows", "columns-first")
        if _allclose(L, bilinear_lookup(C, flow, radius, swap=True)):
            raise Wrong(swap, "weights-swapped")
        raise Wrong("wrong already for whole-pixel flows, where the lookup "
                    "must agree with the chapter's: C[x, x + f + d]",
                    "whole-pixels-wrong")
    for kwargs, code, message in [
            ({"how": "round"}, "rounded", "you rounded each target to the "
             "nearest pixel; between pixels, mix the four neighbours"),
            ({"how": "floor"}, "floored", "you dropped the fractional part "
             "of the target; mix the four neighbours by how close each is"),
            ({"swap": True}, "weights-swapped", swap)]:
        if _allclose(L, bilinear_lookup(C, flow, radius, **kwargs)):
            raise Wrong(message, code)
    raise Wrong("right for whole-pixel flows, wrong between pixels: with "
                "y₀ = ⌊y⌋, a = y − y₀ (and x₀, b alike) the value is "
                "Σ weights × C at the four neighbours, e.g. (1−a)(1−b) at "
                "(y₀, x₀)", "between-pixels-wrong")


def _allclose(a, b) -> bool:
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12)


def _spreads_close(a, b) -> bool:
    # sqrt turns a rounding of 1e-13 in a variance near 0 into 3e-7: the
    # two honest formulas, E[d²] - E[d]² and Σ p (d - mean)², may differ so
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-6)


def soft_argmax_of(C, temperature, spread="std", scale="divide", shift=True,
                   first=0, radius=None, window="around", renormalise=True):
    """Expected disparity and spread of ``softmax(C / T)`` over the
    candidates within ``radius`` of each pixel's winner (all of them when
    ``radius`` is None); the other settings are mistakes the check names:
    ``spread="var"``, ``scale="multiply"``, ``shift=False`` (no max
    subtracted), ``first=1`` (disparities counted from 1), ``window=
    "above"`` (only the winner and the disparities above it), ``window=
    "strict"`` (``|d - winner| < radius``), ``renormalise=False`` (the
    global weights cut to the window, not summing to one)."""
    C = np.asarray(C, dtype=float)
    d = np.arange(first, first + C.shape[-1])
    keep = np.ones(C.shape, bool)
    if radius is not None:
        gap = np.arange(C.shape[-1]) - np.argmax(C, axis=-1)[..., None]
        keep = {"around": np.abs(gap) <= radius,
                "strict": np.abs(gap) < radius,
                "above": (gap >= 0) & (gap <= radius)}[window]
    Z = C / temperature if scale == "divide" else C * temperature
    if renormalise:
        Z = np.where(keep, Z, -np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        P = np.exp(Z - Z.max(axis=-1, keepdims=True) if shift else Z)
        P = P / P.sum(axis=-1, keepdims=True)
    if not renormalise:
        P = np.where(keep, P, 0.0)
    mean = P @ d
    var = np.maximum(P @ d ** 2 - mean ** 2, 0.0)
    return mean, (var if spread == "var" else np.sqrt(var))


def _soft_cases(rng):
    cases = []
    for H, W, D, T, r in [(2, 5, 6, 0.5, 1),
                          (3, 6, 9, float(rng.uniform(0.05, 2)),
                           int(rng.integers(1, 4))),
                          (1, 7, 8, 0.001, 2),        # exp(C / T) overflows
                          (2, 12, 12, float(rng.uniform(0.2, 1)), 2)]:
        C = rng.uniform(-1, 1, (H, W, D))
        x, d = np.arange(W)[:, None], np.arange(D)[None, :]
        C = np.where(d <= x, C, -np.inf)     # off the image, as on a row
        cases.append({"C": C, "temperature": T, "radius": r})
    return cases


def _soft_judge(out, C, temperature, radius):
    mean, spread = returned_arrays(out, 2, "my_local_soft_argmax should "
                                           "return the pair (mean, spread)")
    for arr, name in ((mean, "mean"), (spread, "spread")):
        expect_shape(arr, name, C.shape[:-1], "(H, W)",
                     "one number per pixel: sum over the last axis")
    want_mean, want_spread = soft_argmax_of(C, temperature, radius=radius)
    if _allclose(mean, want_mean) and _spreads_close(spread, want_spread):
        return None
    if not (np.isfinite(mean).all() and np.isfinite(spread).all()):
        raise Wrong(f"at temperature {temperature:g} some results are NaN or "
                    f"infinite: exp(C / T) overflows; subtract each pixel's "
                    f"largest C / T before the exponential (the -inf "
                    f"candidates then get weight 0)", "overflow")
    where = f"at temperature {temperature:g} with radius {radius}"
    for kwargs, code, message in [
            ({"radius": None}, "not-windowed", "these are the chapter's "
             "soft-argmax over every candidate: keep only the disparities "
             "within the radius of each pixel's winner"),
            ({"window": "above"}, "window-one-sided", "the window runs "
             "from winner - radius to winner + radius, both sides"),
            ({"window": "strict"}, "window-too-narrow", "the window keeps "
             "|d - winner| <= radius, the ends included"),
            ({"renormalise": False}, "not-renormalised", "the weights in "
             "the window must sum to one: take the softmax over the window, "
             "not the global softmax cut to it"),
            ({"spread": "var"}, "variance-not-spread", "the spread is in "
             "pixels: take the square root of the variance"),
            ({"scale": "multiply"}, "multiplied-by-temperature", "divide the "
             "correlations by the temperature: a small T must sharpen the "
             "weights"),
            ({"first": 1}, "disparities-from-one", "candidate k of the last "
             "axis is disparity k, counted from 0")]:
        m, sp = soft_argmax_of(C, temperature,
                               **{"radius": radius, **kwargs})
        if _allclose(mean, m) and _spreads_close(spread, sp):
            raise Wrong(f"{where}: {message}", code)
    if _allclose(mean, want_mean):
        raise Wrong("the means are right but the spreads are not: the "
                    "spread is sqrt(Σ p_d (d − mean)²) under the same "
                    "weights", "not-the-spread")
    raise Wrong(f"{where} the expected disparities differ from Σ_d p_d d "
                f"with p the softmax of C / T over the window around each "
                f"pixel's winner", "not-the-mean")


WINDOWS = (3, 5, 7, 9, 11)
#: A case is a band of consecutive rows cut anywhere from the half-
#: resolution pair, with Gaussian noise of this standard deviation (the
#: images are in [0, 1]) drawn afresh for each case, and rows of that band
#: to score: its images exist only when it is drawn, so no table of scores
#: made beforehand can hold it.
BAND_ROWS, ROWS_PER_CASE, NOISE = 24, 5, 0.02


def _window_cases(rng):
    # Two distinct windows per run, so that one of them is not the
    # chapter's 5; each on a band of its own.
    pair = stereo.half_resolution_pair()
    H = pair.disparity.shape[0]
    cases = []
    for k in rng.choice(WINDOWS, 2, replace=False):
        top = int(rng.integers(0, H - BAND_ROWS + 1))
        band = slice(top, top + BAND_ROWS)
        left, right = (img[band] + rng.normal(0, NOISE, img[band].shape)
                       for img in (pair.left, pair.right))
        cases.append({
            "left": left, "right": right,
            "truth": np.array(pair.disparity[band]), "k": int(k),
            "rows": np.sort(rng.choice(BAND_ROWS, ROWS_PER_CASE,
                                       replace=False))})
    return cases


def window_scores(left, right, truth, k, rows, context=True,
                  max_disp=stereo.MAX_DISP):
    """The experiment on ``rows`` of the pair ``left``, ``right`` (H, W, 3)
    with true disparity ``truth`` (H, W): winner-take-all on ``k × k`` patch
    features, scored -> (EPE, within 1 px, within 3 px).

    ``context=False`` (the features of the chosen rows stacked into one
    image, so that a patch's upper and lower rows come from other rows)
    and ``max_disp=MAX_DISP - 1`` are mistakes the check names.
    """
    rows = np.asarray(rows)
    F_left, F_right = (
        stereo.patch_features(img, k, rows=rows) if context
        else stereo.patch_features(img[rows], k)
        for img in (left, right))                        # (m, W, 3k²)
    C = stereo.disparity_volume(F_left, F_right, max_disp)
    s = stereo.disparity_scores(stereo.winner_take_all(C).astype(float),
                                truth[rows])
    return s["epe"], s["within_1"], s["within_3"]


@functools.lru_cache(maxsize=None)
def held_out_scores(k):
    """:func:`window_scores` on the chapter's held-out rows of the pair."""
    pair = stereo.half_resolution_pair()
    return window_scores(pair.left, pair.right, pair.disparity, k,
                         pair.held_out)


def _window_judge(out, left, right, truth, k, rows):
    got = tuple(float(a) for a in returned_arrays(
        out, 3, "my_window_scores should return (EPE, within 1 px, within "
                "3 px)"))
    epe, w1, w3 = got
    run = (f"for k = {k} on rows {np.asarray(rows).tolist()} of a "
           f"{len(truth)}-row band of the pair with noise")
    if not (0 <= w1 <= 1 and 0 <= w3 <= 1):
        raise Wrong(f"{run}: the shares are {w1:g} and {w3:g}; give shares "
                    f"of the scored pixels, in [0, 1]", "shares")
    if w1 > w3:
        raise Wrong(f"{run}: more pixels are within 1 px ({w1:.1%}) than "
                    f"within 3 px ({w3:.1%}); every pixel within 1 px is "
                    f"also within 3", "shares-order")
    given = functools.partial(window_scores, left, right, truth)
    if _same_scores(got, given(k, rows)):
        return None
    pair = stereo.half_resolution_pair()
    slips = [
        ("no-context", functools.partial(given, k, rows, context=False),
         "the features come from the chosen rows stacked into one image, "
         "so a patch's upper and lower rows are other rows of the pair: "
         "take st.patch_features of the whole images, with rows=rows"),
        ("max-disp", functools.partial(given, k, rows,
                                       max_disp=stereo.MAX_DISP - 1),
         "one candidate is missing: the disparities run from 0 to "
         "st.MAX_DISP, both included")]
    for other in sorted({k - 2, k + 2, 5} - {k}):
        slips.append(("window", functools.partial(given, other, rows),
                      f"these are the scores of {other} × {other} patches; "
                      f"use the window k = {k} the function is given"))
    slips += [
        ("chapter-pair", functools.partial(
            window_scores, pair.left, pair.right, pair.disparity, k, rows),
         "these are the scores of the chapter's pair P; use the images "
         "`left`, `right` and the truth `truth` the function is given"),
        ("rows-ignored", functools.partial(given, k, np.arange(len(truth))),
         "these are the scores of every row of the images; score the rows "
         "the function is given, `rows`"),
        ("rows-ignored", functools.partial(held_out_scores, k),
         "these are the scores of the chapter's held-out rows; score the "
         "rows the function is given, `rows`, of the images it is given")]
    for code, scores, message in slips:
        if _same_scores(got, scores()):
            raise Wrong(f"{run}: {message}", code)
    raise Wrong(f"{run}: these are not the scores of the experiment: "
                f"st.patch_features(img, {k}, rows=rows) of both images, "
                f"st.disparity_volume up to st.MAX_DISP, winner-take-all, "
                f"scored by st.disparity_scores against truth[rows]",
                "scores")


def _same_scores(got, want) -> bool:
    # Two candidates of a pixel tie within rounding (1e-15) only by
    # accident of the noise, so honest routes, which round differently,
    # pick the same winners; the scores then differ by rounding only.
    return bool(np.allclose(got, want, rtol=0, atol=1e-9))


def landing_matches(seed, dy, dx, periodic=True, transpose=False):
    """Each patch's displacement to its best match, in patches (8 × 8 grid).

    ``periodic=False`` and ``transpose`` (best query per key) are mistakes
    the check names.
    """
    from selfattention.data import shifted_pair, textured_scene
    from selfattention.matching import normalize
    from selfattention.patches import center, patchify

    rng = np.random.default_rng(seed)
    img1, img2 = shifted_pair(textured_scene(rng), (dy, dx), rng)
    X1, X2 = (normalize(center(patchify(im, 4))) for im in (img1, img2))
    S = X1 @ X2.T                                     # (64, 64)
    return displacements(S.T if transpose else S, (8, 8), periodic)


def _landing_cases(rng):
    def whole():
        return int(4 * rng.integers(-3, 3))
    return [{"seed": int(rng.integers(0, 2 ** 31)), "dy": whole() + 1,
             "dx": whole()},
            {"seed": int(rng.integers(0, 2 ** 31)), "dy": whole() + 3,
             "dx": whole() + int(rng.choice([1, 3]))},
            {"seed": int(rng.integers(0, 2 ** 31)), "dy": whole(),
             "dx": whole() - 8}]               # whole patches, some negative


def _landing_judge(out, seed, dy, dx):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Wrong("the check needs `prediction` and `my_matches`", "type")
    prediction, D = out
    if prediction is None:
        raise NotDone("`prediction` is still empty; commit to a number "
                      "before you compute")
    guess = _number(prediction, "prediction")
    if not 0 <= guess <= 1:
        raise Wrong(f"prediction is a fraction of the 64 patches, between 0 "
                    f"and 1; got {guess}", "not-a-share")
    D = _array(D, "my_matches")
    expect_shape(D, "my_matches(seed, dy, dx)", (64, 2), "(64, 2)",
                 "one (d_row, d_col) per patch of frame 1")
    want = landing_matches(seed, dy, dx)
    if np.array_equal(D, want):
        return None
    for other, code, message in [
            (4 * want, "pixels-not-patches", "these are pixels; give the "
             "displacement in patches of 4 pixels"),
            (want[:, ::-1], "columns-first", "give (d_row, d_col), rows "
             "first"),
            (landing_matches(seed, dy, dx, periodic=False), "not-wrapped",
             "wrap the displacements as mt.displacements does: the motion "
             "is cyclic, so +5 patches is the same as −3"),
            (landing_matches(seed, dy, dx, transpose=True),
             "argmax-over-queries", "each patch of frame 1 is a query: take "
             "the best key of each row of the scores, not the best query of "
             "each column")]:
        if np.array_equal(D, other):
            raise Wrong(message, code)
    wrong = int((D != want).any(axis=1).sum())
    raise Wrong(f"for seed {seed} and motion ({dy}, {dx}) px, {wrong} of the "
                f"64 displacements differ from those of the centred, "
                f"unit-length patches matched by their dot products",
                "not-the-matches")


JUDGES = {
    "ex-matching-consistency": Judge(
        cases=_consistency_cases, judge=_consistency_judge),
    "ex-matching-pyramid": Judge(cases=_pyramid_cases, judge=_pyramid_judge),
    "ex-matching-bilinear": Judge(
        cases=_bilinear_cases, judge=_bilinear_judge),
    "ex-matching-soft-argmax": Judge(cases=_soft_cases, judge=_soft_judge),
    "ex-matching-window": Judge(cases=_window_cases, judge=_window_judge),
    "ex-matching-landing": Judge(cases=_landing_cases, judge=_landing_judge),
}
