"""Tests of selfattention.flops, and of cost's formulas against PyTorch's
FLOP counter on real computations (two FLOPs per multiply-add)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from selfattention import cost
from selfattention.flops import count_flops


def test_a_linear_layer_counts_two_flops_per_multiply_add():
    layer = torch.nn.Linear(16, 8, bias=False, device="meta")
    x = torch.empty(5, 16, device="meta")
    assert count_flops(layer, x) == {"aten.mm": 2 * 5 * 16 * 8}


def test_a_plain_function_and_keyword_arguments():
    a = torch.empty(3, 4, 6, device="meta")
    b = torch.empty(3, 6, 2, device="meta")
    assert count_flops(torch.matmul, a, b) == {"aten.bmm": 2 * 3 * 4 * 6 * 2}
    assert count_flops(lambda x, *, scale: x * scale, a, scale=2.0) == {}


def test_rejects_a_non_callable():
    with pytest.raises(TypeError, match="^fn"):
        count_flops(torch.empty(2))


# ------------------------------------------- cost's formulas, counted by torch
def total(counts):
    return sum(counts.values())


def global_msa(H, W, C, h):
    """Multi-head self-attention over all H·W tokens of width C."""
    layer = torch.nn.MultiheadAttention(C, h, bias=False, batch_first=True,
                                        device="meta")
    x = torch.empty(1, H * W, C, device="meta")
    return count_flops(layer, x, x, x, need_weights=False)


def window_msa(H, W, C, h, M):
    """The same layer inside each M × M window of the grid, as Swin does."""
    layer = torch.nn.MultiheadAttention(C, h, bias=False, batch_first=True,
                                        device="meta")
    x = torch.empty(H // M, M, W // M, M, C, device="meta")
    windows = x.permute(0, 2, 1, 3, 4).reshape(-1, M * M, C)  # (nW, M², C)
    return count_flops(layer, windows, windows, windows, need_weights=False)


def test_swin_setting_counted_on_real_layers():
    # 224 x 224 pixels, 4 x 4 patches: a 56 x 56 grid of C = 96, M = 7
    assert total(global_msa(56, 56, 96, 3)) == 2 * cost.msa_macs((56, 56), 96)
    assert total(window_msa(56, 56, 96, 3, 7)) == \
        2 * cost.window_msa_macs((56, 56), 96, 7)


@settings(max_examples=15)          # each example builds two layers
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4),
       st.sampled_from([(4, 1), (6, 2), (12, 3), (16, 4)]))
def test_msa_formulas_count_what_the_layers_compute(a, b, M, Ch):
    C, h = Ch
    H, W = a * M, b * M
    assert total(global_msa(H, W, C, h)) == 2 * cost.msa_macs((H, W), C)
    assert total(window_msa(H, W, C, h, M)) == \
        2 * cost.window_msa_macs((H, W), C, M)
