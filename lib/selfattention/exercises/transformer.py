"""Exercises of :ref:`ch-transformer`, the vision transformer."""

from __future__ import annotations



from .core import Exercise, call

__all__ = ["check_block_counts", "check_rollout", "check_no_position"]


# ------------------------------------------------------------------ 6.1
def _counts_run(block_counts, n, d, h, d_mlp, h_other):
    return (call(block_counts, n, d, h, d_mlp, what="block_counts"),
            call(block_counts, n, d, h_other, d_mlp, what="block_counts"))


check_block_counts = Exercise(
    "ex-transformer-counts", kind="Derive", points=3,
    answers=("block_counts",), run=_counts_run,
    seed=61,
    references=("selfattention.flops.count_flops",
                "torch.utils.flop_counter.FlopCounterMode",
                "torch.nn.MultiheadAttention",
                # the attention sublayer's multiply-adds, 4nd² + 2n²d
                "selfattention.cost.msa_macs",
                "selfattention.cost.window_msa_macs"),
    written="which term dominates each count for ViT-B (n = 197, d = 768, "
            "d_mlp = 3072), and why does h appear in neither?",
    written_points=1,
    success="the parameters and the multiply-adds of a block, for any "
            "width, MLP width and number of tokens, and neither depends "
            "on h.",
    doc="Exercise 6.1: parameters and multiply-adds of a pre-LN block.")


# ------------------------------------------------------------------ 6.2
def _rollout_run(my_rollout, maps, residual):
    return call(my_rollout, maps, residual, what="my_rollout")


check_rollout = Exercise(
    "ex-transformer-rollout", kind="Implement", points=2,
    answers=("my_rollout",), run=_rollout_run,
    references=("selfattention.interpret.rollout",),
    seed=62,
    success="each layer's head average mixed with the identity, rows "
            "renormalised, layers multiplied with the last on the left.",
    doc="Exercise 6.2: attention rollout on random maps of any depth.")


# ------------------------------------------------------------------ 6.3
def _no_position_run(distance_without_position, seed):
    return call(distance_without_position, seed,
                what="distance_without_position")


check_no_position = Exercise(
    # Numbers a student could make up: the points go to the written
    # part, which the instructor reads.
    "ex-transformer-no-position", kind="Experiment", points=0,
    answers=("distance_without_position",),
    run=_no_position_run, seed=108,
    written="do your distances support the explanation that layer 2 sat "
            "below uniform attention because its heads probe fixed places?",
    written_points=5,
    success="a model without position embeddings, trained and measured; "
            "compare its distances with the chapter's model.",
    doc="Exercise 6.3: attention distance without position embeddings.")
