"""Exercises of :ref:`ch-windows`, Windows and shifted windows."""

from __future__ import annotations

from .core import Exercise, call

__all__ = ["check_merging_kernel", "check_swin_macs", "check_padding",
           "check_spread"]


# ------------------------------------------------------------------ 8.1
def _kernel_run(my_merging_kernel, W_merge):
    return call(my_merging_kernel, W_merge, what="my_merging_kernel")


check_merging_kernel = Exercise(
    "ex-windows-merging-conv", kind="Prove", points=1,
    answers=("my_merging_kernel",), run=_kernel_run,
    references=("selfattention.windows.patch_merging",),
    written="is Swin's merging, layer norm included, still a convolution? "
            "What does each output depend on?", written_points=2, seed=81,
    success="the merging's linear map is a 2 × 2 convolution of stride 2 "
            "whose kernel holds the four blocks of W_merge.",
    doc="Exercise 9.1: patch merging as a strided convolution.")


# ------------------------------------------------------------------ 8.2
def _macs_run(my_swin_macs, image_size, patch_size, C, M, depths):
    return call(my_swin_macs, image_size, patch_size, C, M, depths,
                what="my_swin_macs")


check_swin_macs = Exercise(
    "ex-windows-hierarchy-cost", kind="Derive", points=2,
    answers=("my_swin_macs",), run=_macs_run,
    references=("selfattention.cost.window_msa_macs",
                "selfattention.cost.msa_macs",
                "selfattention.flops.count_flops",
                "torch.utils.flop_counter.FlopCounterMode",
                # profile(with_flops=True) counts the FLOPs as well
                "torch.profiler", "torch.autograd.profiler"),
    written="why is 4HWC² the same in every stage, and what does the "
            "64-fold ratio of this chapter count besides score entries?",
    written_points=2, seed=82,
    success="embedding or merging, then per block 4HWC² + 2M²HWC for the "
            "attention and 8HWC² for the MLP, stage by stage.",
    doc="Exercise 9.2: the multiply-adds of a Swin backbone, per stage.")


# ------------------------------------------------------------------ 8.3
def _padding_run(my_padded_attention, x, W_q, W_k, W_v, W_o, h, M, shift,
                 table):
    return call(my_padded_attention, x, W_q, W_k, W_v, W_o, h, M, shift,
                table, what="my_padded_attention")


check_padding = Exercise(
    "ex-windows-padding", kind="Prove", points=2,
    answers=("my_padded_attention",),
    run=_padding_run,
    references=("selfattention.windows.window_attention",
                "selfattention.windows.cyclic_shift",
                "selfattention.windows.reverse_cyclic_shift",
                "selfattention.windows.region_labels",
                "selfattention.windows.padded_window_ids",
                "selfattention.windows.rolled_window_masks",
                "selfattention.windows.shifted_window_mask",
                "selfattention.windows.shifted_window_bias"),
    written="prove that the padded windows and the rolled, masked windows "
            "give every token the same output.", written_points=2,
    seed=83,
    success="padding the grid and masking the padded keys computes the "
            "same outputs as the cyclic shift with its mask, in more "
            "windows.",
    doc="Exercise 9.3: shifted windows by padding, equal to the cyclic "
        "shift.")


# ------------------------------------------------------------------ 8.4
def _spread_run(my_spread, grid, M, source, blocks, seed):
    return call(my_spread, grid, M, source, blocks, seed, what="my_spread")


check_spread = Exercise(
    # Exact counts over a few thousand settings (grid, M, source, blocks),
    # which a table made at home could hold: the points are the written
    # part's, which the instructor reads with the counts.
    "ex-windows-spread", kind="Experiment", points=0,
    answers=("my_spread",), run=_spread_run,
    references=("selfattention.windows.padded_window_ids",
                "selfattention.windows.shifted_window_mask"),
    written="how fast does the spread grow, in the middle and from a "
            "corner, and how many blocks does a 56 × 56 grid with M = 7 "
            "need? Compare with the cost chapter's convolutions.",
    written_points=3, seed=84,
    success="the perturbation reaches exactly the tokens that alternating "
            "regular and shifted windows connect.",
    doc="Exercise 9.4: how far a change travels through window blocks.")
