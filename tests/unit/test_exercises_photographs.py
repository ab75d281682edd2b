"""The photographs chapter's exercise checks accept right answers and
explain wrong ones."""

import math

import numpy as np
import pytest
import torch

from exercise_answers import hidden, run, verdict
from selfattention import detection as photo_detection
from selfattention import interpret, position
from selfattention_models import photo_vit
from selfattention_exercises import photographs as checks


# ------------------------------------------------------------ 7.1 loss
def loss(pred, target, hidden):
    per_patch = ((pred - target) ** 2).mean(axis=-1)
    return float(per_patch[hidden].mean())


def through_torch(pred, target, hidden):   # the same loss, in PyTorch
    p, t = torch.from_numpy(pred), torch.from_numpy(target)
    h = torch.from_numpy(hidden)
    return torch.nn.functional.mse_loss(p[h], t[h]).item()


def library(pred, target, hidden):
    return photo_vit.masked_patch_loss(torch.from_numpy(pred),
                                       torch.from_numpy(target),
                                       torch.from_numpy(hidden)).item()


def test_the_loss_agrees_with_pytorch_s_mean_squared_error():
    for case in checks.check_masked_patch_loss.draw(
            np.random.default_rng(5)):
        assert math.isclose(loss(**case), through_torch(**case),
                            rel_tol=1e-12)
        assert math.isclose(loss(**case), library(**case), rel_tol=1e-12)


def test_loss_cases_hide_unequal_numbers_of_patches_per_row():
    for seed in range(10):
        for case in checks.check_masked_patch_loss.draw(
                np.random.default_rng(seed)):
            counts = case["hidden"].sum(axis=1)
            assert counts.min() >= 1 and len(set(counts.tolist())) > 1


def per_row(pred, target, hidden):
    sq = ((pred - target) ** 2).mean(-1)
    return float(np.mean([row[h].mean() for row, h in zip(sq, hidden)]))


@pytest.mark.parametrize("answer, status, code", [
    (loss, "correct", None),
    (through_torch, "correct", None),
    (library, "for review", "for-review"),
    (None, "not done", "not-done"),
    (lambda pred, target, hidden: "0.5", "wrong", "type"),
    (lambda pred, target, hidden: ((pred - target) ** 2).mean(-1)[hidden],
     "wrong", "not-one-number"),
    (lambda pred, target, hidden: float(((pred - target) ** 2).mean()),
     "wrong", "every-patch"),
    (lambda pred, target, hidden: loss(pred, target, ~hidden), "wrong",
     "shown-patches"),
    (lambda pred, target, hidden: float(
        (((pred - target) ** 2) * hidden[..., None]).mean()), "wrong",
     "masked-over-all"),
    (per_row, "wrong", "mean-of-rows"),
    (lambda pred, target, hidden: float(
        ((pred - target) ** 2).sum(-1)[hidden].mean()), "wrong",
     "pixels-summed"),
    (lambda pred, target, hidden: float(
        ((pred - target) ** 2).sum(-1)[hidden].sum()), "wrong", "summed"),
    (lambda pred, target, hidden: float(
        np.abs(pred - target).mean(-1)[hidden].mean()), "wrong",
     "absolute-error"),
    (lambda pred, target, hidden: math.sqrt(loss(pred, target, hidden)),
     "wrong", "root-taken"),
    (lambda pred, target, hidden: 1.1 * loss(pred, target, hidden), "wrong",
     "not-the-loss"),
])
def test_masked_patch_loss_check(answer, status, code):
    verdict(checks.check_masked_patch_loss, [answer], status, code)


def test_the_loss_gets_full_marks_on_hidden_cases():
    hidden(checks.check_masked_patch_loss, through_torch)


# ------------------------------------------------------------ 7.2 box
def _rows(images, dtype=torch.float64):
    model = photo_vit.load_clutter_model(checks.BOX_MODEL).to(dtype)
    with torch.no_grad():
        A = model(photo_vit.clutter_inputs("vit", images, dtype=dtype))[1]
    return A[:, :, :, 0, 1:].double().numpy()           # (N, L, h, 64)


def _pixel_shares(masks):
    """Each patch's share of mask pixels, by slicing the image into its
    8 × 8 patches of 7 px (not through the library's patchify)."""
    p = photo_vit.DIGIT_PATCH
    N, S, _ = masks.shape
    g = S // p
    return (masks != 0).reshape(N, g, p, g, p).mean(axis=(2, 4)).reshape(
        N, g * g)


def _box(boxes, S=56):
    masks = np.zeros((len(boxes), S, S))
    for i, (t, l, b, r) in enumerate(boxes):
        masks[i, t:b, l:r] = 1
    return masks


def box_weight(images, segments, boxes, dtype=torch.float64, head=None,
               mask="box", renormalise=True):
    rows = _rows(images, dtype)
    rows = rows.mean(axis=2) if head is None else rows[:, :, head]
    if renormalise:
        rows = rows / rows.sum(-1, keepdims=True)
    masks = _box(boxes) if mask == "box" else segments
    shares = _pixel_shares(masks)
    if mask == "patches":
        shares = (_pixel_shares(_box(boxes)) > 0).astype(float)
    return (rows * shares[:, None]).sum(-1)              # (N, L)


def test_a_uniform_map_puts_the_box_s_area_share_inside_it():
    case = checks.check_weight_in_box.draw(np.random.default_rng(3))[0]
    shares = _pixel_shares(_box(case["boxes"]))
    area = _box(case["boxes"]).mean(axis=(1, 2))
    np.testing.assert_allclose(shares.mean(1), area)


def test_box_cases_are_fresh_held_out_scenes_of_one_digit():
    a = checks.check_weight_in_box.draw(np.random.default_rng(1))[0]
    b = checks.check_weight_in_box.draw(np.random.default_rng(2))[0]
    assert not np.array_equal(a["images"], b["images"])
    for case in (a, b):
        t, l, bottom, r = case["boxes"].T
        assert ((bottom - t) >= 1).all() and ((r - l) >= 1).all()
        assert case["segments"].max() == 1           # one digit per scene


@pytest.mark.parametrize("answer, status, code", [
    (box_weight, "correct", None),
    (lambda i, s, b: box_weight(i, s, b, dtype=torch.float32), "correct",
     None),
    (None, "not done", "not-done"),
    (lambda i, s, b: box_weight(i, s, b).T, "wrong", "transposed"),
    (lambda i, s, b: box_weight(i, s, b)[:, :2], "wrong", "shape"),
    (lambda i, s, b: box_weight(i, s, b, mask="ink"), "wrong", "ink-mask"),
    (lambda i, s, b: box_weight(i, s, b, renormalise=False), "wrong",
     "not-renormalised"),
    (lambda i, s, b: box_weight(i, s, b, mask="patches"), "wrong",
     "whole-patches"),
    (lambda i, s, b: box_weight(i, s, b, head=2), "wrong", "one-head"),
    (lambda i, s, b: np.repeat(_box(b).mean((1, 2))[:, None], 4, 1),
     "wrong", "area-share"),
    (lambda i, s, b: box_weight(i, s, b) + 0.01, "wrong",
     "not-the-measurement"),
])
def test_weight_in_box_check(answer, status, code):
    verdict(checks.check_weight_in_box, [answer], status, code)


def test_weight_in_box_gets_full_marks_on_hidden_cases():
    hidden(checks.check_weight_in_box, box_weight)


# ------------------------------------------------------------ 7.3 uniform
def uniform_distance(H, W, p):
    return p * math.sqrt((H * H - 1) / 6 + (W * W - 1) / 6)


@pytest.mark.parametrize("H, W, p", [(8, 8, 4), (3, 7, 2), (1, 5, 3),
                                     (16, 4, 1)])
def test_the_formula_is_the_root_mean_square_of_every_patch_pair(H, W, p):
    D = interpret.patch_distances((H, W), p)            # (HW, HW) px
    assert math.isclose(uniform_distance(H, W, p),
                        math.sqrt((D ** 2).mean()), rel_tol=1e-12)
    assert D.mean() < uniform_distance(H, W, p)         # Jensen


def measured(H, W, p):
    return math.sqrt((interpret.patch_distances((H, W), p) ** 2).mean())


def by_offsets(H, W, p):          # the library's list of query-key offsets
    return p * math.sqrt((position.relative_offsets((H, W)) ** 2).sum(-1)
                         .mean())


def by_torch(H, W, p):            # PyTorch's distances between points
    X = torch.cartesian_prod(torch.arange(H), torch.arange(W)).double()
    return p * math.sqrt((torch.cdist(X, X) ** 2).mean().item())


@pytest.mark.parametrize("answer, status, code", [
    (uniform_distance, "correct", None),
    (measured, "for review", "for-review"),
    (by_offsets, "for review", "for-review"),
    (by_torch, "for review", "for-review"),
    (None, "not done", "not-done"),
    (lambda H, W, p: [1.0, 2.0], "wrong", "not-one-number"),
    (lambda H, W, p: p * math.sqrt((H * H - 1) / 12 + (W * W - 1) / 12),
     "wrong", "one-variance"),
    (lambda H, W, p: p * math.sqrt(H * H / 6 + W * W / 6), "wrong",
     "continuous"),
    (lambda H, W, p: math.sqrt((H * H - 1) / 6 + (W * W - 1) / 6), "wrong",
     "no-patch-size"),
    (lambda H, W, p: uniform_distance(H, W, p) ** 2, "wrong", "mean-square"),
    (lambda H, W, p: 1.05 * uniform_distance(H, W, p), "wrong",
     "not-the-distance"),
])
def test_uniform_distance_check(answer, status, code):
    verdict(checks.check_uniform_distance, [answer], status, code)


def test_uniform_distance_gets_full_marks_on_hidden_cases():
    hidden(checks.check_uniform_distance, uniform_distance)


# ------------------------------------------------------------ 7.4 counts
def _iou(boxes, true_boxes, plus=0.0):
    """(N, k) IoU of boxes (t, l, b, r), bottom and right excluded."""
    out = np.zeros((len(boxes), len(true_boxes)))
    for i, (t, l, b, r) in enumerate(boxes):
        for j, (t2, l2, b2, r2) in enumerate(true_boxes):
            h = max(0.0, min(b, b2) - max(t, t2) + plus)
            w = max(0.0, min(r, r2) - max(l, l2) + plus)
            a = (b - t + plus) * (r - l + plus)
            a2 = (b2 - t2 + plus) * (r2 - l2 + plus)
            out[i, j] = h * w / (a + a2 - h * w)
    return out


def counts(classes, boxes, labels, true_boxes, plus=0.0, strict=False,
           gate=True, reported=None):
    from scipy.optimize import linear_sum_assignment
    shown = classes != 10
    found = 0
    if shown.any() and len(labels):
        iou = _iou(boxes[shown], true_boxes, plus)
        if gate:
            iou = np.where(classes[shown][:, None] == labels[None], iou, 0)
        rows, cols = linear_sum_assignment(-iou)
        hit = iou[rows, cols] > 0.5 if strict else iou[rows, cols] >= 0.5
        found = int(hit.sum())
    n = int(shown.sum()) if reported is None else reported(shown, found,
                                                           labels)
    return found, n, len(labels)


def by_permutations(classes, boxes, labels, true_boxes):
    """The same counts without scipy: every one-to-one pairing tried."""
    import itertools
    shown = np.flatnonzero(classes != 10)
    iou = _iou(boxes[shown], true_boxes)
    iou = np.where(classes[shown][:, None] == labels[None], iou, 0)
    k, m = len(labels), len(shown)
    best, found = -1.0, 0
    if k <= m:
        pairings = [list(zip(p, range(k)))
                    for p in itertools.permutations(range(m), k)]
    else:
        pairings = [list(zip(range(m), p))
                    for p in itertools.permutations(range(k), m)]
    for pairs in pairings:
        total = sum(iou[i, j] for i, j in pairs)
        if total > best + 1e-12:
            best = total
            found = sum(iou[i, j] >= 0.5 for i, j in pairs)
    return int(found), m, k


def greedy(classes, boxes, labels, true_boxes):
    shown = classes != 10
    iou = _iou(boxes[shown], true_boxes)
    iou = np.where(classes[shown][:, None] == labels[None], iou, 0)
    found = 0
    while iou.size and iou.max() > 0:
        i, j = np.unravel_index(iou.argmax(), iou.shape)
        found += iou[i, j] >= 0.5
        iou[i, :], iou[:, j] = -1, -1
    return int(found), int(shown.sum()), len(labels)


def every_query(classes, boxes, labels, true_boxes):
    shown = classes != 10
    iou = _iou(boxes[shown], true_boxes)
    same = classes[shown][:, None] == labels[None]
    found = int(((iou >= 0.5) & same).any(1).sum()) if len(labels) else 0
    return found, int(shown.sum()), len(labels)


def every_digit(classes, boxes, labels, true_boxes):
    shown = classes != 10
    iou = _iou(boxes[shown], true_boxes)
    same = classes[shown][:, None] == labels[None]
    found = int(((iou >= 0.5) & same).any(0).sum()) if shown.any() else 0
    return found, int(shown.sum()), len(labels)


def class_after(classes, boxes, labels, true_boxes):
    from scipy.optimize import linear_sum_assignment
    shown = classes != 10
    if not shown.any() or not len(labels):
        return 0, int(shown.sum()), len(labels)
    iou = _iou(boxes[shown], true_boxes)
    rows, cols = linear_sum_assignment(-iou)
    ok = (iou[rows, cols] >= 0.5) & (classes[shown][rows] == labels[cols])
    return int(ok.sum()), int(shown.sum()), len(labels)


def test_the_counts_agree_with_every_pairing_tried_and_the_library():
    from selfattention.detection import precision_recall
    rng = np.random.default_rng(0)
    for _ in range(200):
        N, k = 4, int(rng.integers(0, 4))
        classes = rng.choice([1, 2, 10], N)
        labels = rng.choice([1, 2], k)
        corner = rng.integers(0, 40, (N + k, 2)).astype(float)
        size = rng.integers(4, 24, (N + k, 2))
        all_boxes = np.hstack([corner, corner + size])
        boxes, true = all_boxes[:N], all_boxes[N:]
        want = counts(classes, boxes, labels, true)
        assert by_permutations(classes, boxes, labels, true) == want
        assert precision_recall(classes, boxes, labels, true) == want


def test_count_cases_part_every_slip_from_the_rule():
    slips = [greedy, every_query, every_digit, class_after,
             lambda *a: counts(*a, plus=1.0), lambda *a: counts(*a,
                                                                strict=True),
             lambda *a: counts(*a, gate=False)]
    for seed in range(5):
        case = checks.check_detection_counts.draw(
            np.random.default_rng(seed))[0]
        scenes = list(zip(case["classes"], case["boxes"], case["labels"],
                          case["true_boxes"]))
        right = [counts(*s) for s in scenes]
        assert right == [by_permutations(*s) for s in scenes]
        for slip in slips:
            assert [slip(*s) for s in scenes] != right
        for _, b, _, t in scenes:                 # inside the 56-px scene
            for box in np.vstack([b, t]):
                assert 0 <= box[0] < box[2] <= 56
                assert 0 <= box[1] < box[3] <= 56


def pairs_only(shown, found, labels):
    return min(int(shown.sum()), len(labels))


@pytest.mark.parametrize("answer, status, code", [
    (counts, "correct", None),
    (by_permutations, "correct", None),
    (lambda c, b, lab, t: tuple(np.array(counts(c, b, lab, t), float)),
     "correct", None),
    (lambda c, b, lab, t: photo_detection.precision_recall(c, b, lab, t),
     "for review", "for-review"),
    (None, "not done", "not-done"),
    (lambda c, b, lab, t: "1, 2, 3", "wrong", "type"),
    (lambda c, b, lab, t: counts(c, b, lab, t)[:2], "wrong",
     "not-three-counts"),
    (greedy, "wrong", "greedy"),
    (every_query, "wrong", "not-one-to-one"),
    (every_digit, "wrong", "one-query-two-digits"),
    (lambda c, b, lab, t: counts(c, b, lab, t, strict=True), "wrong",
     "strict-threshold"),
    (lambda c, b, lab, t: counts(c, b, lab, t, plus=1.0), "wrong",
     "inclusive-corners"),
    (lambda c, b, lab, t: counts(c, b, lab, t, gate=False), "wrong",
     "class-ignored"),
    (class_after, "wrong", "class-after-pairing"),
    (lambda c, b, lab, t: counts(c, b, lab, t, reported=pairs_only),
     "wrong", "unmatched-not-reported"),
    (lambda c, b, lab, t: counts(c, b, lab, t,
                                 reported=lambda s, f, lab_: f),
     "wrong", "found-as-reported"),
    (lambda c, b, lab, t: counts(c, b, lab, t,
                                 reported=lambda s, f, lab_: len(s)),
     "wrong", "no-object-reported"),
    (lambda c, b, lab, t: (counts(c, b, lab, t)[0] + 1,)
     + counts(c, b, lab, t)[1:], "wrong", "not-the-counts"),
])
def test_detection_counts_check(answer, status, code):
    verdict(checks.check_detection_counts, [answer], status, code)


def test_detection_counts_get_full_marks_on_hidden_cases():
    hidden(checks.check_detection_counts, counts)
    hidden(checks.check_detection_counts, by_permutations)


def _moved_alike(classes, boxes, labels, true_boxes):
    """What moving, flipping, transposing a scene and renaming its classes
    leave alone: how many report and are present, the areas of the
    reported boxes and of the digits' boxes, how many (report, digit)
    pairs name one class."""
    def areas(b):
        return tuple(sorted(((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))
                            .tolist()))
    shown = classes != 10
    same = int((classes[shown][:, None] == labels[None]).sum())
    return int(shown.sum()), len(labels), areas(boxes[shown]), \
        areas(true_boxes), same


def memorised_by_scene():
    """An answer that learnt the public case: the right counts of the
    public scene that a scene looks like once moved, none found else."""
    case = checks.check_detection_counts.public_cases()[0]
    scenes = zip(case["classes"], case["boxes"], case["labels"],
                 case["true_boxes"])
    table = {_moved_alike(*s): counts(*s) for s in scenes}

    def detection_counts(classes, boxes, labels, true_boxes):
        key = _moved_alike(classes, boxes, labels, true_boxes)
        return table.get(key, (0,) + key[:2])
    return detection_counts


def memorised_by_order():
    """An answer that replays the public case's counts call after call."""
    case = checks.check_detection_counts.public_cases()[0]
    said = [counts(*s) for s in zip(case["classes"], case["boxes"],
                                     case["labels"], case["true_boxes"])]
    calls = []

    def detection_counts(classes, boxes, labels, true_boxes):
        calls.append(1)
        return said[(len(calls) - 1) % len(said)]
    return detection_counts


@pytest.mark.parametrize("make", [memorised_by_scene, memorised_by_order])
def test_counts_learnt_from_the_public_case_fail_hidden_cases(make):
    """The hidden scenes are not the public ones moved: an answer that
    only replays what the public check showed scores nothing."""
    verdict(checks.check_detection_counts, [make()], "correct")
    for seed in range(1000, 1005):
        fb = run(checks.check_detection_counts, make(), seed)
        assert fb.status == "wrong", (seed, fb.code)
