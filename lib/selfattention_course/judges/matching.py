"""The judges of :ref:`ch-matching`, Matching and motion: hidden cases, judges
and the reference helpers they use (see :mod:`selfattention_course.judges`;
those on the correlation volume are in
:mod:`selfattention_course.judges._correlation`)."""

from __future__ import annotations

import functools

import numpy as np
from selfattention import stereo
from selfattention.matching import displacements
from selfattention_models.motorcycle import half_resolution_pair
from selfattention_exercises.core import (NotDone, Opaque, Wrong,
                                          expect_shape,
                                          returned_arrays,
                                          type_name)

from . import Judge
from ._correlation import (_array, _bilinear_cases, _bilinear_judge,
                           _number, _pyramid_cases, _pyramid_judge,
                           _soft_cases, _soft_judge)


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
    pair = half_resolution_pair()
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
    pair = half_resolution_pair()
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
    pair = half_resolution_pair()
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
