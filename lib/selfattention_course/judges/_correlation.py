"""The judges of :ref:`ch-matching` on the correlation volume (its pyramid,
the bilinear lookup around a flow, the soft argmax), with the reference
helpers they use; :mod:`selfattention_course.judges.matching` holds their
table."""


from __future__ import annotations


import numpy as np
from selfattention_exercises.core import (Opaque, Wrong,
                                          expect_shape,
                                          returned_array, returned_arrays,
                                          type_name)


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
