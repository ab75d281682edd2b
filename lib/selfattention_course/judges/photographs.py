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
    from selfattention import scenes
    from selfattention.photo_vit import DIGIT_PATCH, SCENE, clutter_split

    _, test_photos, _, test_digits = clutter_split()
    drawn = scenes.digit_scenes(rng, BOX_SCENES, list(test_photos),
                                test_digits, size=SCENE, n_digits=(1, 1),
                                digit_size=BOX_DIGIT_SIZES)
    assert SCENE % DIGIT_PATCH == 0
    return [{"images": drawn.images, "segments": drawn.segments,
             "boxes": drawn.boxes[:, 0]}]


@functools.lru_cache(maxsize=1)
def _box_model():
    from selfattention.photo_vit import load_clutter_model

    return load_clutter_model(BOX_MODEL)


def _class_rows(images):
    """The class token's rows over the patches (N, L, h, n), float64."""
    import torch
    from selfattention.photo_vit import clutter_inputs

    with torch.no_grad():
        A = _box_model()(clutter_inputs("vit", images,
                                        dtype=torch.float64))[1]
    return A[:, :, :, 0, 1:].numpy()                    # (N, L, h, n)


def _shares(masks):
    from selfattention.patches import patchify
    from selfattention.photo_vit import DIGIT_PATCH

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


JUDGES = {
    "ex-photographs-loss": Judge(cases=_loss_cases, judge=_loss_judge),
    "ex-photographs-box": Judge(cases=_box_cases, judge=_box_judge),
    "ex-photographs-uniform": Judge(cases=_uniform_cases,
                                    judge=_uniform_judge),
}
