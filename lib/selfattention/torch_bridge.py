"""Crossing into PyTorch: weights (PyTorch stores ``W.T``), masks (True =
blocked in ``nn.MultiheadAttention``; :ref:`ch-multihead`, :ref:`ch-masks`)
and the threads a reproducible run pins.
"""

import contextlib

import numpy as np

from ._validate import (boundary, bools, divides, floats, instance,
                        positive_int, require)

__all__ = ["mask_for_mha", "mask_for_sdpa", "multihead_from_weights",
           "torch_threads"]


@boundary(mask=bools())
def mask_for_mha(mask):
    """Our mask as ``nn.MultiheadAttention`` wants it: True = blocked."""
    import torch

    return torch.from_numpy(~mask)


@boundary(mask=bools())
def mask_for_sdpa(mask):
    """Our mask as ``scaled_dot_product_attention`` wants it: True = allowed."""
    import torch

    return torch.from_numpy(mask.copy())


def _square_weights(W_q, W_k, W_v, W_o, h) -> None:
    """Four square (d, d) matrices, ``h`` dividing ``d``."""
    d = W_q.shape[0]
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o)):
        require(W.shape == (d, d), f"{name} must be square ({d}, {d}) for "
                f"nn.MultiheadAttention, got shape {W.shape}")
    divides("h", h, (d,), "the width d")


@boundary(W_q=floats(ndim=2), W_k=floats(ndim=2), W_v=floats(ndim=2),
          W_o=floats(ndim=2), h=positive_int(), bias=instance(bool),
          checks=(_square_weights,))
def multihead_from_weights(W_q, W_k, W_v, W_o, h, bias=False):
    """An ``nn.MultiheadAttention`` (float64, batch first) holding our weights,
    its biases (if any) zero (:ref:`ch-multihead` and :ref:`ch-masks`; with
    biases it can take the fused route of :ref:`app-pytorch-empty`)."""
    import torch

    mha = torch.nn.MultiheadAttention(len(W_q), h, bias=bias,
                                      batch_first=True).double()
    with torch.no_grad():
        # PyTorch computes x @ weight.T, so each of our matrices goes in as W.T
        stacked = np.concatenate([W_q.T, W_k.T, W_v.T])         # (3d, d)
        mha.in_proj_weight.copy_(torch.from_numpy(stacked))
        mha.out_proj.weight.copy_(torch.from_numpy(W_o.T.copy()))
        if bias:
            mha.in_proj_bias.zero_()
            mha.out_proj.bias.zero_()
    return mha


@contextlib.contextmanager
def torch_threads(n: int):
    """PyTorch's intra-op threads set to ``n`` inside the block and put
    back after it: a training run pins its threads, so that running it
    again gives the same numbers."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
