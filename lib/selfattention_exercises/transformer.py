"""Exercises of :ref:`ch-transformer`, the vision transformer."""

from __future__ import annotations

import numpy as np

from .core import Exercise, call

__all__ = ["check_block_counts", "check_rollout_limit", "check_no_position",
           "check_shift", "SHIFT_MODELS", "SHIFTS"]


# ------------------------------------------------------------------ 6.1
def _counts_run(block_counts, n, d, h, d_mlp, h_other):
    return (call(block_counts, n, d, h, d_mlp, what="block_counts"),
            call(block_counts, n, d, h_other, d_mlp, what="block_counts"))


check_block_counts = Exercise(
    # Two counts, each checked (2); one written reading of them (1). Why h
    # appears in neither is printed (chapter 3's eq-mh-params, the success
    # message), so it is not asked.
    "ex-transformer-counts", kind="Derive", points=2,
    answers=("block_counts",), run=_counts_run,
    seed=61,
    references=("selfattention.flops.count_flops",
                "torch.utils.flop_counter.FlopCounterMode",
                # profile(with_flops=True) counts the FLOPs as well
                "torch.profiler", "torch.autograd.profiler",
                "torch.nn.MultiheadAttention",
                # the attention sublayer's multiply-adds, 4nd² + 2n²d
                "selfattention.cost.msa_macs",
                "selfattention.cost.window_msa_macs"),
    written="which term dominates each count for ViT-B (n = 197, d = 768, "
            "d_mlp = 3072), and from which n would the term in n² take "
            "over?",
    written_points=1,
    success="the parameters and the multiply-adds of a block, for any "
            "width, MLP width and number of tokens, and neither depends "
            "on h.",
    doc="Exercise 6.1: parameters and multiply-adds of a pre-LN block.")


# ------------------------------------------------------------------ 6.2
def _limit_run(rollout_limit, maps, residual):
    return call(rollout_limit, maps, residual, what="rollout_limit")


check_rollout_limit = Exercise(
    # The limit and the rate are checked (2; the code that finds both is
    # one eigendecomposition); the residual's role and the consequence
    # are read (2).
    "ex-transformer-rollout-limit", kind="Derive", points=2,
    answers=("rollout_limit",), run=_limit_run,
    # Rollout of many copies of the layer approaches the limit.
    references=("selfattention.interpret.rollout",),
    seed=62,
    written="why does the residual weight leave the limit where it is, "
            "what does it change, and what does the limit say about the "
            "rollout maps of a deep model?",
    written_points=2,
    success="the row every row of deep rollout approaches, and how fast "
            "it gets there.",
    doc="Exercise 6.2: the row that rollout through many identical layers "
        "approaches, and the rate at which it does.")


# ------------------------------------------------------------------ 6.3
def _no_position_run(distance_without_position, seed):
    return call(distance_without_position, seed,
                what="distance_without_position")


check_no_position = Exercise(
    # Numbers a student could make up: the points go to the written
    # part, which the instructor reads (the comparison, the baseline
    # without positions, the conclusion; the measurement is given).
    "ex-transformer-no-position", kind="Experiment", points=0,
    answers=("distance_without_position",),
    run=_no_position_run, seed=108,
    written="do your distances support the explanation that layer 2 sat "
            "below uniform attention because its heads probe fixed places?",
    written_points=3,
    success="a model without position embeddings, trained and measured; "
            "compare its distances with the chapter's model.",
    doc="Exercise 6.3: attention distance without position embeddings.")


# ------------------------------------------------------------------ 6.4
#: The two trained ViTs of :ref:`ch-transformer` that 6.4 moves digits
#: under: learned position embeddings, and a relative position bias.
SHIFT_MODELS = ("vit-mnist", "vit-mnist-local")
#: How far 6.4 moves the digits, in pixels right and down.
SHIFTS = (0, 1, 2, 3, 4)


def _shift_run(shift_test, images, labels):
    images = np.array(images, dtype=float)        # each model its own copy
    labels = np.array(labels, dtype=int)
    return tuple(call(shift_test, name, images.copy(), labels.copy(),
                      what="shift_test")
                 for name in SHIFT_MODELS)


check_shift = Exercise(
    "ex-transformer-shift", kind="Experiment", points=2,
    answers=("shift_test",), run=_shift_run, seed=64,
    written="which model keeps its accuracy when the digits move, why, "
            "and do the attention distances explain it?",
    written_points=2,
    success="the accuracy and each layer's attention distance of both "
            "models, on the digits moved 0 to 4 px right and down with "
            "zeros filling in.",
    doc="Exercise 6.4: test accuracy and each layer's mean attention "
        "distance of the two 28 × 28 ViTs on test digits moved 0 to 4 "
        "pixels right and down.")
