"""Tests of selfattention.flops: FLOP counts of real PyTorch modules."""

import pytest
import torch

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


@pytest.mark.parametrize("B, n, C, heads", [(1, 49, 96, 3), (4, 16, 12, 2)])
def test_multihead_attention_on_meta_is_twice_the_multiply_adds(B, n, C,
                                                                heads):
    layer = torch.nn.MultiheadAttention(C, heads, bias=False,
                                        batch_first=True, device="meta")
    x = torch.empty(B, n, C, device="meta")
    flops = count_flops(layer, x, x, x, need_weights=False)
    projections = 4 * B * n * C * C              # Q, K, V and output
    pairs = 2 * B * n * n * C                    # QK^T and AV, all heads
    assert flops == {"aten.mm": 2 * projections, "aten.bmm": 2 * pairs}


def test_rejects_a_non_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        count_flops(torch.empty(2))
