"""The photographs chapter's exercise checks accept right answers and
explain wrong ones."""

import math

import numpy as np
import pytest
import torch

from exercise_answers import hidden, verdict
from selfattention import interpret, photo_vit
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


@pytest.mark.parametrize("answer, status, code", [
    (uniform_distance, "correct", None),
    (measured, "for review", "for-review"),
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
