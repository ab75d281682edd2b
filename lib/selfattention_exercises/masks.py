"""Exercises of :ref:`ch-masks`, Masks."""

from __future__ import annotations

import numpy as np

from .core import Exercise, call

__all__ = ["check_shrinkage", "check_batch_masks", "check_empty_rows",
           "check_local"]


# ------------------------------------------------------------------ 4.1
def _shrinkage_run(my_shrinkage, S, mask):
    return call(my_shrinkage, S, mask, what="my_shrinkage")


check_shrinkage = Exercise(
    "ex-masks-shrink", kind="Derive", points=2,
    answers=("my_shrinkage",), run=_shrinkage_run,
    seed=41,
    written="prove that zeroing after the softmax multiplies output i by "
            "ρ_i, and say when dividing by ρ_i repairs it and when it "
            "cannot",
    success="ρ_i is the softmax weight that query i puts on its allowed "
            "keys, and the zeroed output is ρ_i times the masked one.",
    doc="Exercise 4.1: the factor by which zeroing weights after the "
        "softmax shrinks each output, from the scores and the mask.")


# ------------------------------------------------------------------ 4.2
def _tensor_data(t):
    """What a mask tensor holds, as plain data: (kind, dtype, shape, bools)."""
    import torch

    if isinstance(t, np.ndarray):
        return ("ndarray", str(t.dtype), tuple(t.shape), None)
    if not isinstance(t, torch.Tensor):
        return (type(t).__name__, "", (), None)
    values = t.detach().cpu().numpy() if t.dtype == torch.bool else None
    return ("Tensor", str(t.dtype), tuple(t.shape), values)


def _batch_run(batch_masks, lengths, n, h):
    out = call(batch_masks, lengths, n, h, what="batch_masks")
    if not (isinstance(out, tuple) and len(out) == 2):
        return ("not a pair", type(out).__name__)
    return tuple(_tensor_data(t) for t in out)


check_batch_masks = Exercise(
    "ex-masks-batch", kind="Implement", points=3,
    answers=("batch_masks",), run=_batch_run,
    references=("selfattention.masks.causal_mask",
                "selfattention.masks.padding_mask",
                "selfattention.torch_bridge.mask_for_mha",
                "selfattention.torch_bridge.mask_for_sdpa"), seed=42,
    success="nn.MultiheadAttention and scaled_dot_product_attention both "
            "match the NumPy reference with your masks.",
    doc="Exercise 4.2: causal and key-padding masks combined for a batch, "
        "in the conventions of nn.MultiheadAttention and "
        "scaled_dot_product_attention.")


# ------------------------------------------------------------------ 4.3
def _rows_run(predicted_rows, lengths, n, left_padded, need_weights,
             layers):
    return call(predicted_rows, lengths, n, left_padded, need_weights,
                layers, what="predicted_rows")


check_empty_rows = Exercise(
    # A prediction: running the layers measures the answer, and a run in a
    # cell of its own can inform the rule, so the points are the written
    # part's (the prediction, the rule and the second layer); running the
    # layer stays listed for the feedback.
    "ex-masks-nan", kind="Predict", points=0,
    answers=("predicted_rows",), run=_rows_run,
    written="Your committed prediction; your rule for end and start "
            "padding; and what the second module's key-padding mask does to "
            "the first module's NaN rows and to its rows of zeros.",
    written_points=3,
    references=("torch.nn.MultiheadAttention",
                "torch.nn.functional.multi_head_attention_forward",
                "torch.nn.functional.scaled_dot_product_attention",
                "selfattention.torch_bridge.multihead_from_weights"),
    seed=43, nan_is_a_word=True,   # STATES name "nan"
    success="you predicted which rows come out as NaN, zeros or numbers, "
            "after one layer and after two.",
    doc="Exercise 4.3: which output rows of one or two "
        "nn.MultiheadAttention layers are NaN, zero or numbers, for causal "
        "plus key-padding masks on a batch.")


# ------------------------------------------------------------------ 4.4
_RADII = (0, 1, 2, 7)


def _local_run(local_vs_global, seed):
    return [call(local_vs_global, r, seed, what="local_vs_global")
            for r in _RADII]


check_local = Exercise(
    # Numbers a student could make up within the accepted ranges: the
    # points go to the written part, which the instructor reads.
    "ex-masks-local", kind="Experiment", points=0,
    answers=("local_vs_global",), run=_local_run,
    seed=44,
    written="what did you measure, which patches does a neighbourhood mask "
            "change most, and is it a good stand-in for global attention "
            "on these images?", written_points=4,
    success="your measurements are consistent: the shares grow with the "
            "radius, the gaps respect (1 − inside)·spread, and radius 7 "
            "changes nothing.",
    doc="Exercise 4.4: global attention's weight inside a neighbourhood "
        "and how far a neighbourhood mask moves each output, per radius.")
