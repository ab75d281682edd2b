"""The judges of :ref:`ch-photographs`, what attention learns from
photographs: hidden cases, judges and the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import functools
import math

import numpy as np
from selfattention_exercises.core import Wrong, expect_shape, returned_array
from selfattention_exercises.photographs import BOX_MODEL

from . import Judge

# ------------------------------------------------------------------ 7.1


def _loss_cases(rng):
    """Batches whose rows hide different numbers of patches (one row hides
    a single patch), so that a mean per row differs from the batch's."""
    cases = []
    for B, n, d in [(3, 16, 4), (4, 9, 9), (2, 25, 16)]:
        hidden = np.zeros((B, n), bool)
        for b in range(B):
            k = 1 if b == 0 else int(rng.integers(2, n))
            hidden[b, rng.choice(n, k, replace=False)] = True
        target = rng.standard_normal((B, n, d))
        # the guesses are better on some patches than on others
        pred = target + rng.uniform(0.2, 2.0, (B, n, 1)) * \
            rng.standard_normal((B, n, d))
        cases.append({"pred": pred, "target": target, "hidden": hidden})
    return cases


def _loss_variants(pred, target, hidden):
    """The right loss and the named slips, as (value, code, message)."""
    sq = (pred - target) ** 2                                  # (B, n, d)
    per_patch = sq.mean(axis=-1)                               # (B, n)
    right = per_patch[hidden].mean()
    per_row = np.mean([per_patch[b][hidden[b]].mean()
                       for b in range(len(hidden))])
    return right, [
        (per_patch.mean(), "every-patch",
         "you averaged over every patch; the shown patches are the input, "
         "which the model could copy: score the hidden ones only"),
        (per_patch[~hidden].mean(), "shown-patches",
         "you averaged over the shown patches; the loss scores the hidden "
         "ones, those the model must fill in"),
        ((sq * hidden[..., None]).mean(), "masked-over-all",
         "you zeroed the shown patches' errors, then divided by every "
         "patch: divide by the number of hidden patches instead"),
        (per_row, "mean-of-rows",
         "you averaged each row's hidden patches, then the rows: a row that "
         "hides one patch then weighs as much as one that hides many. Count "
         "each hidden patch of the batch once"),
        (sq.sum(axis=-1)[hidden].mean(), "pixels-summed",
         "you summed each patch's squared errors over its pixels: the "
         "loss is a mean over pixels too"),
        (sq.sum(axis=-1)[hidden].sum(), "summed",
         "you summed the squared errors: the loss is their mean"),
        (np.abs(pred - target).mean(axis=-1)[hidden].mean(),
         "absolute-error",
         "you averaged absolute errors: the loss squares them"),
        (math.sqrt(right), "root-taken",
         "you took the square root: the loss is the mean squared error, "
         "not its root"),
    ]


def _loss_judge(out, pred, target, hidden):
    loss = returned_array(out, "masked_patch_loss", "one number")
    if loss.size != 1:
        raise Wrong(f"masked_patch_loss should return one number for the "
                    f"batch, got an array of shape {loss.shape}",
                    "not-one-number")
    loss = float(loss.reshape(()))
    right, slips = _loss_variants(pred, target, hidden)
    if math.isclose(loss, right, rel_tol=1e-6, abs_tol=1e-9):
        return None
    for value, code, message in slips:
        if math.isclose(loss, value, rel_tol=1e-6, abs_tol=1e-9):
            raise Wrong(message, code)
    raise Wrong(f"your loss is {loss:.6g} where the mean squared error over "
                f"the hidden patches is {right:.6g}; take the squared "
                f"errors of the hidden patches, then their mean",
                "not-the-loss")


# ------------------------------------------------------------------ 7.2
#: How many scenes one case of 7.2 draws, and the digit sizes they take.
BOX_SCENES, BOX_DIGIT_SIZES = 5, (14, 28)   # 5 scenes: not L


def _box_cases(rng):
    # Fresh scenes of held-out photographs and digits: only a measurement
    # of the model answers them.
    from selfattention_models import scenes
    from selfattention_models.photo_vit import (DIGIT_PATCH, SCENE,
                                                clutter_split)

    _, test_photos, _, test_digits = clutter_split()
    drawn = scenes.digit_scenes(rng, BOX_SCENES, list(test_photos),
                                test_digits, size=SCENE, n_digits=(1, 1),
                                digit_size=BOX_DIGIT_SIZES)
    assert SCENE % DIGIT_PATCH == 0
    return [{"images": drawn.images, "segments": drawn.segments,
             "boxes": drawn.boxes[:, 0]}]


@functools.lru_cache(maxsize=1)
def _box_model():
    from selfattention_models.photo_vit import load_clutter_model

    return load_clutter_model(BOX_MODEL)


def _class_rows(images):
    """The class token's rows over the patches (N, L, h, n), float64."""
    import torch
    from selfattention_models.photo_vit import clutter_inputs

    with torch.no_grad():
        A = _box_model()(clutter_inputs("vit", images,
                                        dtype=torch.float64))[1]
    return A[:, :, :, 0, 1:].numpy()                    # (N, L, h, n)


def _shares(masks):
    from selfattention.patches import patchify
    from selfattention_models.photo_vit import DIGIT_PATCH

    return patchify((masks != 0).astype(float), DIGIT_PATCH).mean(-1)


def _box_masks(boxes, size):
    masks = np.zeros((len(boxes), size, size))
    for i, (t, l, b, r) in enumerate(boxes):
        masks[i, t:b, l:r] = 1
    return masks


def _inside(rows, shares):
    """Share of each renormalised row (..., n) on ``shares`` (N, n)."""
    p = rows / rows.sum(axis=-1, keepdims=True)
    return (p * shares[:, None]).sum(axis=-1)


def _box_judge(out, images, segments, boxes):
    got = returned_array(out, "weight_in_box")
    rows = _class_rows(images)                          # (N, L, h, n)
    N, L, h, _ = rows.shape
    if got.shape == (L, N) and N != L:         # N = 5, L = 4
        raise Wrong("your array is (layers, scenes): return one row per "
                    "scene, (N, L)", "transposed")
    expect_shape(got, "the weights", (N, L), "(N, L)",
                 "one share per scene and layer")
    box = _shares(_box_masks(boxes, images.shape[-1]))  # (N, n)
    mean_rows = rows.mean(axis=2)                       # (N, L, n)
    want = _inside(mean_rows, box)
    if np.allclose(got, want, rtol=0, atol=1e-4):
        return None
    slips = [
        (_inside(mean_rows, _shares(segments)), "ink-mask",
         "these are the weights inside the digit's ink: the exercise asks "
         "for its box, the rectangle a detector would report"),
        ((mean_rows * box[:, None]).sum(-1), "not-renormalised",
         "the class token also attends to itself: renormalise its weights "
         "over the 64 patches before summing those inside the box"),
        (_inside(mean_rows, (box > 0).astype(float)), "whole-patches",
         "you counted every patch the box touches in full: weigh each "
         "patch by the share of its pixels inside the box"),
        (np.broadcast_to(box.mean(-1)[:, None], (N, L)), "area-share",
         "these are the box's shares of the image, what uniform attention "
         "puts inside it: measure the model's class token"),
    ] + [(_inside(rows[:, :, k], box), "one-head",
          f"these are head {k + 1}'s weights alone: average the class "
          f"token's rows over the {h} heads") for k in range(h)]
    for value, code, message in slips:
        if np.allclose(got, value, rtol=0, atol=1e-4):
            raise Wrong(message, code)
    i, layer = np.unravel_index(np.argmax(np.abs(got - want)), want.shape)
    raise Wrong(f"in scene {i}, layer {layer + 1}, you measure "
                f"{got[i, layer]:.3f} inside the box; the clutter ViT puts "
                f"{want[i, layer]:.3f} there", "not-the-measurement")


# ------------------------------------------------------------------ 7.3
def _uniform_cases(rng):
    """Square and oblong grids, with patch sizes from 1 to 16 pixels."""
    return [{"grids": [(int(rng.integers(2, 9)), int(rng.integers(2, 9)),
                        int(rng.integers(1, 5))),
                       (int(rng.integers(9, 20)), int(rng.integers(2, 6)),
                        int(rng.integers(4, 17))),
                       (1, int(rng.integers(3, 12)), 1)]}]


def _rms(H, W, p, axis_mean_square=lambda G: (G * G - 1) / 6):
    return p * math.sqrt(axis_mean_square(H) + axis_mean_square(W))


def _uniform_judge(out, grids):
    if not (isinstance(out, tuple) and len(out) == len(grids)):
        raise Wrong("the check could not read the results of "
                    "uniform_distance", "type")
    for got, (H, W, p) in zip(out, grids):
        value = returned_array(got, "uniform_distance", "one number")
        if value.size != 1:
            raise Wrong(f"uniform_distance({H}, {W}, {p}) should return one "
                        f"number, got shape {value.shape}", "not-one-number")
        value = float(value.reshape(()))
        right = _rms(H, W, p)
        if math.isclose(value, right, rel_tol=1e-9, abs_tol=1e-12):
            continue
        slips = [
            (_rms(H, W, p, lambda G: (G * G - 1) / 12), "one-variance",
             "you took one position's variance along an axis: the offset "
             "between two independent positions has twice that"),
            (_rms(H, W, p, lambda G: G * G / 6), "continuous",
             "you used G² where the patches are G discrete places: the "
             "variance of a uniform place in {0, ..., G-1} is (G² - 1)/12"),
            (_rms(H, W, 1), "no-patch-size",
             "your distance is in patches: multiply by the patch side p to "
             "get pixels"),
            (_rms(H, W, p) ** 2, "mean-square",
             "that is the mean square distance: return its root"),
            (p * math.sqrt((max(H, W) ** 2 - 1) / 6), "one-axis",
             "you counted one axis only: add the two axes' mean squares"),
        ]
        for wrong, code, message in slips:
            if math.isclose(value, wrong, rel_tol=1e-9, abs_tol=1e-12):
                raise Wrong(f"for a {H} × {W} grid of {p}-pixel patches: "
                            f"{message}", code)
        raise Wrong(f"for a {H} × {W} grid of {p}-pixel patches you give "
                    f"{value:.6g} px; derive the mean square offset along "
                    f"one axis first", "not-the-distance")
    return None


# ------------------------------------------------------------------ 7.4
#: Scenes of 7.4, in pixels of a 56-pixel scene before a random move:
#: digits as (class, box), queries as (class, box), ``None`` a query that
#: reports no object. Letters are classes drawn per case, "a" != "b".
COUNT_SCENES = {
    # one digit, reported twice (a duplicate) and once where none is
    "duplicate-and-stray": ([("a", (10, 10, 30, 30))],
                            [("a", (11, 10, 31, 30)), ("a", (10, 13, 30, 33)),
                             ("b", (36, 36, 52, 52)), None]),
    # two overlapping digits: the query that fits the first best must take
    # the second, or the other query finds nothing (greedy pairing fails)
    "greedy-trap": ([("a", (10, 10, 30, 30)), ("a", (10, 14, 30, 34))],
                    [("a", (10, 11, 30, 31)), ("a", (10, 6, 30, 26)),
                     None, None]),
    # an IoU of exactly 0.5 (200 / 400 pixels), then one of 13 / 27
    "exactly-half": ([("a", (10, 10, 30, 30))],
                     [("a", (10, 10, 30, 20)), None, None, None]),
    "just-under-half": ([("a", (10, 10, 30, 30))],
                        [("a", (10, 17, 30, 37)), None, None, None]),
    # the best-fitting query names the wrong class
    "wrong-class-first": ([("a", (10, 10, 30, 30))],
                          [("b", (10, 11, 30, 31)), ("a", (10, 13, 30, 33)),
                           None, None]),
    "wrong-class-only": ([("a", (10, 10, 30, 30)), ("b", (34, 30, 54, 50))],
                         [("b", (10, 11, 30, 31)), None, None, None]),
    # one query over two digits answers for one of them
    "one-for-two": ([("a", (10, 10, 30, 30)), ("a", (10, 14, 30, 34))],
                    [("a", (10, 11, 30, 31)), None, None, None]),
    "no-digit": ([], [None, ("a", (12, 8, 32, 26)), None, None]),
    "silent": ([("a", (8, 8, 28, 26)), ("b", (30, 28, 50, 46))],
               [None, None, None, None]),
}
COUNT_SIDE = 56


#: How many scenes of 7.4 are drawn at random besides those of
#: :data:`COUNT_SCENES`: the hidden cases are not the public case's scenes
#: moved, so that counts fitted to those scenes do not answer them.
COUNT_DRAWN = 6


def _counts_cases(rng):
    """Every scene of :data:`COUNT_SCENES`, moved, flipped and transposed
    at random (whole pixels, so each IoU stays exact), with fresh classes
    and random boxes for the queries that report nothing, then
    :data:`COUNT_DRAWN` scenes drawn at random (:func:`_drawn_scene`); all
    in a random order."""
    from selfattention.detection import NO_OBJECT

    scenes = []
    for digits, queries in COUNT_SCENES.values():
        a, b = (int(c) for c in rng.choice(10, 2, replace=False))
        named = {"a": a, "b": b}
        boxes = np.array([box for _, box in digits] +
                         [q[1] for q in queries if q is not None], float)
        dy = int(rng.integers(-boxes[:, 0].min(),
                              COUNT_SIDE - boxes[:, 2].max() + 1))
        dx = int(rng.integers(-boxes[:, 1].min(),
                              COUNT_SIDE - boxes[:, 3].max() + 1))
        move = (dy, dx, *rng.integers(2, size=2))   # and flip, transpose
        q_boxes, q_classes = [], []
        for q in queries:
            if q is None:
                q_boxes.append(_stray_box(rng))
                q_classes.append(NO_OBJECT)
            else:
                q_boxes.append(_place(q[1], *move))
                q_classes.append(named[q[0]])
        scenes.append((np.array(q_classes), np.array(q_boxes, float),
                       np.array([named[c] for c, _ in digits], int),
                       np.array([_place(box, *move) for _, box in digits],
                                float).reshape(-1, 4)))
    scenes += [_drawn_scene(rng) for _ in range(COUNT_DRAWN)]
    order = rng.permutation(len(scenes))
    return [{key: [scenes[i][k] for i in order] for k, key in enumerate(
        ("classes", "boxes", "labels", "true_boxes"))}]


def _stray_box(rng):
    """A box of 8 to 23 pixels a side, its top left corner in the
    scene's first 32 rows and columns."""
    t, l = rng.integers(0, COUNT_SIDE - 24, size=2)
    h, w = rng.integers(8, 24, size=2)
    return [t, l, t + h, l + w]


def _drawn_scene(rng):
    """A scene of one to three digits of two classes and four queries:
    most report a digit's box moved by a few pixels (now and then under
    the other class), the others nothing or a stray box. Drawn again while
    two pairings of the largest total IoU would count different digits
    found (the count would hang on a tie)."""
    from itertools import permutations

    from selfattention.detection import NO_OBJECT

    while True:
        a, b = (int(c) for c in rng.choice(10, 2, replace=False))
        k = int(rng.integers(1, 4))
        labels = rng.choice([a, b], k)
        sides = rng.integers(14, 23, size=(k, 2))
        corner = rng.integers(0, COUNT_SIDE - sides + 1)
        true_boxes = np.hstack([corner, corner + sides]).astype(float)
        classes, boxes = [], []
        for _ in range(4):
            j, roll = int(rng.integers(k)), rng.random()
            if roll < 0.7:                   # a digit's box, moved a little
                box = np.clip(true_boxes[j] + rng.integers(-5, 6, size=4),
                              0, COUNT_SIDE)
                if box[2] - box[0] < 4 or box[3] - box[1] < 4:
                    box = true_boxes[j].copy()
                boxes.append(box)
                same = rng.random() < 0.8
                classes.append(int(labels[j]) if same else
                               (b if labels[j] == a else a))
            else:
                boxes.append(np.array(_stray_box(rng), float))
                classes.append(NO_OBJECT if roll < 0.9 else
                               int(rng.choice([a, b])))
        classes, boxes = np.array(classes), np.array(boxes)
        shown = classes != NO_OBJECT
        if not shown.any():
            return classes, boxes, labels, true_boxes
        iou = _pair_iou(boxes[shown], true_boxes)
        iou = np.where(classes[shown][:, None] == labels[None], iou, 0.0)
        m = len(iou)
        pairings = ([list(zip(p, range(k))) for p in permutations(range(m), k)]
                    if k <= m else
                    [list(zip(range(m), p)) for p in permutations(range(k), m)])
        totals = [sum(iou[i, j] for i, j in pairs) for pairs in pairings]
        best = max(totals)
        if len({sum(iou[i, j] >= 0.5 for i, j in pairs)
                for pairs, total in zip(pairings, totals)
                if total > best - 1e-9}) == 1:
            return classes, boxes, labels, true_boxes


def _place(box, dy, dx, flip, swap):
    """``box`` moved by (dy, dx), then flipped left to right and
    transposed if asked."""
    t, l, b, r = box[0] + dy, box[1] + dx, box[2] + dy, box[3] + dx
    if flip:
        l, r = COUNT_SIDE - r, COUNT_SIDE - l
    return [l, t, r, b] if swap else [t, l, b, r]


def _area(start, stop, corners):
    """Areas of boxes from corners ``start`` to ``stop`` (..., 2)."""
    return np.prod(np.clip(stop - start + corners, 0, None), axis=-1)


def _pair_iou(boxes, true_boxes, corners=0.0):
    """(N, k) IoU; ``corners=1`` counts bottom and right as inside."""
    p, q = boxes[:, None], true_boxes[None]
    inter = _area(np.maximum(p[..., :2], q[..., :2]),
                  np.minimum(p[..., 2:], q[..., 2:]), corners)
    return inter / (_area(p[..., :2], p[..., 2:], corners) +
                    _area(q[..., :2], q[..., 2:], corners) - inter)


def _found(classes, boxes, labels, true_boxes, pairing="sum",
           classes_in="pairing", corners=0.0, strict=False):
    """How many digits a slip counts as found (the right count with the
    defaults): ``pairing`` one of "sum" (the assignment of largest total
    IoU), "greedy" (the largest IoU left, again and again), "in-order"
    (each query in turn takes its best digit left), "every-query" (each
    query that meets a digit), "every-digit" (each digit some query
    meets); ``classes_in`` "pairing", "nowhere" or "after" (pair on IoU,
    then ask for the class)."""
    from scipy.optimize import linear_sum_assignment
    from selfattention.detection import NO_OBJECT

    shown = classes != NO_OBJECT
    if not shown.any() or not len(labels):
        return 0
    iou = _pair_iou(boxes[shown], true_boxes, corners)
    same = classes[shown][:, None] == labels[None]
    gated = iou if classes_in != "pairing" else np.where(same, iou, 0.0)
    meets = (gated > 0.5) if strict else (gated >= 0.5)
    if pairing == "every-query":
        return int(meets.any(1).sum())
    if pairing == "every-digit":
        return int(meets.any(0).sum())
    if pairing == "sum":
        pairs = list(zip(*linear_sum_assignment(-gated)))
    elif pairing == "greedy":
        pairs, used = [], (set(), set())
        for flat in np.argsort(-gated, axis=None, kind="stable"):
            i, j = np.unravel_index(flat, gated.shape)
            if i not in used[0] and j not in used[1]:
                pairs.append((i, j))
                used[0].add(i)
                used[1].add(j)
    else:                                   # "in-order"
        pairs, free = [], list(range(len(labels)))
        for i in range(min(len(iou), len(labels))):
            j = max(free, key=lambda d: gated[i, d])
            pairs.append((i, j))
            free.remove(j)
    ok = [meets[i, j] and (classes_in != "after" or same[i, j])
          for i, j in pairs]
    return int(sum(ok))


def _read_counts(out, scenes: int) -> list[tuple]:
    """What detection_counts returned for each scene, as int triples."""
    if not (isinstance(out, tuple) and len(out) == scenes):
        raise Wrong("the check could not read the results of "
                    "detection_counts", "type")
    got = []
    for value in out:
        arr = returned_array(value, "detection_counts",
                             "three counts (found, reported, present)")
        if arr.shape != (3,) or not np.all(np.isfinite(arr)) or \
                not np.all(arr == np.round(arr)):
            raise Wrong(f"detection_counts should return three whole "
                        f"numbers (found, reported, present), got "
                        f"{arr.size} values", "not-three-counts")
        got.append(tuple(int(v) for v in arr))
    return got


#: Slips in what is found: how :func:`_found` makes each, its code, and
#: what to fix.
FOUND_SLIPS = [
    (dict(pairing="greedy"), "greedy",
     "you paired the largest IoU first, then the next: that can leave a "
     "query without the digit it alone fits. Pair them so that the IoU "
     "adds up most (scipy.optimize.linear_sum_assignment)"),
    (dict(pairing="in-order"), "in-order",
     "each query took its best digit in turn: an early query can take the "
     "digit a later one needed. Pair them all at once so that the IoU adds "
     "up most"),
    (dict(pairing="every-query"), "not-one-to-one",
     "two queries found the same digit: each digit may be found once, by "
     "one query"),
    (dict(pairing="every-digit"), "one-query-two-digits",
     "one query answered for two digits: each query answers for one"),
    (dict(strict=True), "strict-threshold",
     "an IoU of exactly 0.5 counts: the rule is at least 0.5"),
    (dict(corners=1.0), "inclusive-corners",
     "you counted the bottom and right edges as inside the box: they are "
     "excluded, so a box (t, l, b, r) holds (b - t)(r - l) pixels"),
    (dict(classes_in="nowhere"), "class-ignored",
     "a query found a digit of another class: a digit is found only when "
     "its class is named too"),
    (dict(classes_in="after"), "class-after-pairing",
     "you paired on IoU alone, then asked for the class: a query of the "
     "wrong class then takes the digit from one of the right class. Pair "
     "each query only with digits of its class"),
]


def _reported_slips(right, classes):
    """Slips in what is reported: (counts per scene, code, message)."""
    from selfattention.detection import NO_OBJECT

    return [
        ([min(r, p) for _, r, p in right], "unmatched-not-reported",
         "you counted only the reports paired with a digit: every query "
         "that names a digit is a report, and an unpaired one is a false "
         "positive"),
        ([k for k, _, _ in right], "found-as-reported",
         "your reported count is the found count: every query that names "
         "a digit is a report, found or not"),
        ([len(c) for c in classes], "no-object-reported",
         f"you counted the queries that report no object (class "
         f"{NO_OBJECT}) as reports"),
    ]


def _counts_judge(out, classes, boxes, labels, true_boxes):
    from selfattention.detection import NO_OBJECT

    scenes = list(zip(classes, boxes, labels, true_boxes))
    got = _read_counts(out, len(scenes))
    right = [(_found(*scene), int((scene[0] != NO_OBJECT).sum()),
              len(scene[2])) for scene in scenes]
    if got == right:
        return None
    for kwargs, code, message in FOUND_SLIPS:
        found = [_found(*scene, **kwargs) for scene in scenes]
        if got == [(k, r, p) for k, (_, r, p) in zip(found, right)]:
            raise Wrong(message, code)
    for counts, code, message in _reported_slips(right, classes):
        if got == [(k, r, p) for r, (k, _, p) in zip(counts, right)]:
            raise Wrong(message, code)
    k = next(k for k in range(len(got)) if got[k] != right[k])
    raise Wrong(f"in a scene of {right[k][2]} digits and {right[k][1]} "
                f"reports you count {got[k]} (found, reported, present) "
                f"where the rule gives {right[k]}", "not-the-counts")

JUDGES = {
    "ex-photographs-loss": Judge(cases=_loss_cases, judge=_loss_judge),
    "ex-photographs-box": Judge(cases=_box_cases, judge=_box_judge),
    "ex-photographs-uniform": Judge(cases=_uniform_cases,
                                    judge=_uniform_judge),
    "ex-photographs-counts": Judge(cases=_counts_cases, judge=_counts_judge),
}
