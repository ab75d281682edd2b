"""Exercises of :ref:`ch-photographs`, what attention learns from
photographs."""

from __future__ import annotations

import numpy as np

from .core import Exercise, call

__all__ = ["check_masked_patch_loss", "check_weight_in_box",
           "check_uniform_distance", "check_detection_counts", "BOX_MODEL"]


# ------------------------------------------------------------------ 7.1
def _loss_run(masked_patch_loss, pred, target, hidden):
    return call(masked_patch_loss, np.array(pred), np.array(target),
                np.array(hidden), what="masked_patch_loss")


check_masked_patch_loss = Exercise(
    # The loss is checked (2: which patches count, and how they are
    # averaged over a batch whose rows hide different numbers); why only
    # the hidden patches count is read (1).
    "ex-photographs-loss", kind="Implement", points=2,
    answers=("masked_patch_loss",), run=_loss_run,
    references=("selfattention_models.photo_vit.masked_patch_loss",
                "selfattention_training.photographs.train_photos"),
    seed=71,
    written="What would the model learn if the shown patches counted in "
            "the loss as well, and why would its error look better?",
    written_points=1,
    success="the mean squared error over the hidden patches only, each "
            "hidden patch of the batch counted once, whatever its row.",
    doc="Exercise 7.1: the masked-patch loss, mean squared error over the "
        "hidden patches of a batch.")


# ------------------------------------------------------------------ 7.2
#: The trained model of :ref:`ch-photographs` that 7.2 measures.
BOX_MODEL = "clutter-vit"


def _box_run(weight_in_box, images, segments, boxes):
    return call(weight_in_box, np.array(images, dtype=float),
                np.array(segments), np.array(boxes),
                what="weight_in_box")


check_weight_in_box = Exercise(
    # The measurement is replayed on scenes the grader draws (2: the
    # class token's renormalised row, the box's share of each patch); what
    # the sizes show is read (2).
    "ex-photographs-box", kind="Experiment", points=2,
    answers=("weight_in_box",), run=_box_run,
    seed=72,
    written="As the digit shrinks, does the weight inside its box follow "
            "the box's share of the image, and how many times that share "
            "does each layer put there?",
    written_points=2,
    success="each layer's class-token weight inside the digit's box, "
            "renormalised over the patches and counted by the box's share "
            "of each patch.",
    doc="Exercise 7.2: the clutter ViT's class-token weight inside the "
        "digit's box, per scene and layer, on scenes the check draws.")


# ------------------------------------------------------------------ 7.3
def _uniform_run(uniform_distance, grids):
    return tuple(call(uniform_distance, H, W, p, what="uniform_distance")
                 for H, W, p in grids)


check_uniform_distance = Exercise(
    # The root-mean-square distance is checked (2: one axis's mean square,
    # then the two axes together); how it bounds the mean and how it grows
    # with the grid are read (1).
    "ex-photographs-uniform", kind="Derive", points=2,
    answers=("uniform_distance",), run=_uniform_run,
    # the library's, PyTorch's and SciPy's lists of distances or offsets
    # between points: the root mean square measured, not derived
    references=("selfattention.interpret.patch_distances",
                "selfattention.interpret.mean_attention_distance",
                "selfattention.position.relative_offsets",
                "scipy.spatial.distance.cdist",
                "scipy.spatial.distance.pdist",
                "scipy.spatial.distance_matrix",
                "scipy.spatial.minkowski_distance",
                "torch.cdist", "torch.pdist", "torch.pairwise_distance"),
    seed=73,
    written="Why is the mean distance of uniform attention below the root "
            "mean square you derived, and how does either grow when the "
            "same crop is cut into patches half as wide?",
    written_points=1,
    success="the root-mean-square distance between a query's patch centre "
            "and a key's under uniform attention, on any grid and patch "
            "size.",
    doc="Exercise 7.3: the root-mean-square attention distance of uniform "
        "attention on an H × W grid of p-pixel patches, derived.")


# ------------------------------------------------------------------ 7.4
def _counts_run(detection_counts, classes, boxes, labels, true_boxes):
    return tuple(call(detection_counts, np.array(c), np.array(b, dtype=float),
                      np.array(lab), np.array(t, dtype=float),
                      what="detection_counts")
                 for c, b, lab, t in zip(classes, boxes, labels, true_boxes))


check_detection_counts = Exercise(
    # The counts are checked on scenes built to part the usual slips (2:
    # one-to-one pairing that adds up the IoU, at least 0.5, every
    # reported digit counted); why each digit is found once is read (1).
    "ex-photographs-counts", kind="Implement", points=2,
    answers=("detection_counts",), run=_counts_run,
    references=("selfattention.detection.precision_recall",
                "selfattention.detection.box_iou",
                "selfattention.detection._iou_terms",
                "selfattention.detection.generalized_box_iou"),
    seed=74,
    written="Why may each digit be found only once, and what would a "
            "detector that reports every digit with all four queries score "
            "if it were not?",
    written_points=1,
    success="found, reported and present digits of each scene: queries "
            "that report a digit paired one to one with the digits of their "
            "class so that the IoU adds up most, a pair found at IoU 0.5 or "
            "more.",
    doc="Exercise 7.4: a detector's counts in one scene (found, reported, "
        "present) at IoU 0.5, on scenes built to part the usual slips.")
