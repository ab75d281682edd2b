"""Exercises of :ref:`ch-definition`, Definition."""

from __future__ import annotations

import numpy as np
from selfattention.example import running_example

from .core import Exercise, call

__all__ = ["check_tempered_attention", "check_limits", "check_moved",
           "check_edge_weights", "moved_image"]

GRID, PATCH = 8, 4              # the running example: 8 × 8 patches of 4 × 4


# ------------------------------------------------------------------ 1.1
#: Every attention the library and PyTorch compute: each answers 1.1 (and,
#: with an extreme scale, measures 1.2's limits instead of deriving them).
ATTENTIONS = (
    "selfattention.attention.attention",
    "selfattention.attention.multi_head_attention",
    "selfattention.blockwise.blockwise_attention",
    "selfattention.nonlocal_block.nonlocal_op",
    "selfattention.nonlocal_block.NonLocalBlock",
    "selfattention.windows.window_attention",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.MultiheadAttention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch._scaled_dot_product_attention_math",
    "torch._native_multi_head_attention",
    "torch.nn.attention",
)


def _tempered_run(my_tempered_attention, temperatures_for, Q, K, V, tau,
                  p):
    return (call(my_tempered_attention, Q, K, V, tau,
                 what="my_tempered_attention"),
            call(temperatures_for, Q, K, p, what="temperatures_for"))


check_tempered_attention = Exercise(
    "ex-definition-tempered", kind="Implement", points=2,
    answers=("my_tempered_attention", "temperatures_for"),
    run=_tempered_run,
    references=ATTENTIONS,
    seed=11,
    written="Why does each query have exactly one temperature that gives "
            "its largest weight the target p, and for which targets has it "
            "none (tied best scores included)?",
    written_points=1,
    success="every query's scores are divided by √d_k and by its own τ, in "
            "every batch element, without overflow; and the temperatures "
            "you found give every query its target largest weight.",
    doc="Exercise 1.1: attention over a batch with one temperature per "
        "query, and the temperature that gives each query a chosen largest "
        "weight.")


# ------------------------------------------------------------------ 1.2
def _limits_run(my_limits, Q, K, V):
    return call(my_limits, Q, K, V, what="my_limits")


check_limits = Exercise(
    # The limits are to be derived, but a limit can be measured: a softmax
    # written by hand and run at inverse temperature 1e300 and at 0 gives
    # both (the scores are integers, so exact ties survive the scaling),
    # and a correct measurement is a correct function of the cases. So the
    # points are the written part's (the derivation), which the instructor
    # reads; the check still tries integer cases in the notebook. The
    # library's attention run at an extreme scale stays listed, for the
    # feedback.
    "ex-definition-limits", kind="Derive", points=0,
    answers=("my_limits",), run=_limits_run,
    references=ATTENTIONS + ("selfattention.attention.softmax",),
    seed=12,
    written="Derive both limits: factor each row's best score out of its "
            "softmax and say what every weight tends to as τ → 0⁺ and as "
            "τ → ∞, tied best keys included.",
    written_points=2,
    success="τ → 0 averages the values of the keys tied for the best "
            "score; τ → ∞ averages all values, whatever the query.",
    doc="Exercise 1.2: the outputs of attention at zero and at infinite "
        "temperature, ties included.")


# ------------------------------------------------------------------ 1.3
def moved_image(shift):
    """The running example's image rolled by ``shift = (down, right)`` patches.

    Returns ``(img1, img2)``: the image of the chapter and its copy moved
    cyclically by whole 4 × 4 patches (``np.roll``), as in
    :ref:`ex-definition-moved`.
    """
    img = running_example().img
    down, right = (int(v) for v in shift)
    return img, np.roll(img, (PATCH * down, PATCH * right), axis=(0, 1))


def _moved_run(predict_moved, query, shift):
    return call(predict_moved, query, shift, what="predict_moved")


check_moved = Exercise(
    # A prediction cannot be told from a measurement: the map over a moved
    # copy (made by slicing as well as by np.roll) answers every case, and
    # a correct measurement is a correct function of the cases. So the
    # points are the written part's (the rule, its reason, the 2-pixel
    # case), which the instructor reads; the check still tries queries and
    # shifts in the notebook. Making the copy stays listed, for the
    # feedback.
    "ex-definition-moved", kind="Predict", points=0,
    answers=("predict_moved",), run=_moved_run,
    references=("selfattention_exercises.definition.moved_image",
                "numpy.roll"),
    seed=13,
    written="State your rule and why it holds; then move img2 by 2 pixels "
            "down instead of a whole patch: where does patch (0, 1) attend "
            "now, and why does your rule fail?",
    written_points=3,
    success="a whole-patch shift permutes the keys, so the map moves with "
            "the content.",
    doc="Exercise 1.3: where a patch attends in a copy of the image moved "
        "by whole patches.")


# ------------------------------------------------------------------ 1.4
def _weights_run(edge_weights, low, high, seed):
    return tuple(call(edge_weights, noise, s, what="edge_weights")
                 for noise, s in [(low, seed), (high, seed), (low, seed),
                                  (high, seed + 1)])


check_edge_weights = Exercise(
    # Numbers a student could make up within the accepted ranges: the
    # points go to the written part, which the instructor reads.
    "ex-definition-noise", kind="Experiment", points=0,
    answers=("edge_weights",), run=_weights_run,
    seed=14,
    written="At what noise level does patch (0, 1) start to prefer itself "
            "over the far edge, and why does noise favour its own patch?",
    written_points=4,
    success="your measurements agree with the expected weights at low and "
            "high noise, and follow the seed.",
    doc="Exercise 1.4: the weight on the far edge and on itself as the "
        "image gets noisier.")
