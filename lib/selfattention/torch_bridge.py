"""Crossing into PyTorch: weights and masks (chapters 3 and 4).

The library stores a projection as ``W`` of shape (d_in, d_out) and computes
``X @ W``; ``torch.nn.Linear`` and ``torch.nn.MultiheadAttention`` store
``W.T`` and compute ``x @ weight.T``, so weights cross transposed.

PyTorch has two opposite boolean mask conventions:

* ``torch.nn.MultiheadAttention(attn_mask=...)``: True **blocks** a key;
* ``torch.nn.functional.scaled_dot_product_attention(attn_mask=...)``:
  True **allows** a key, as in this library.

Convert at the boundary with :func:`mask_for_mha` and :func:`mask_for_sdpa`.
"""

from __future__ import annotations

import numpy as np

from ._validate import boundary, bools, floats, instance, positive_int

__all__ = ["mask_for_mha", "mask_for_sdpa", "multihead_from_weights"]


@boundary(mask=bools())
def mask_for_mha(mask):
    """Our mask (True = may attend) as ``nn.MultiheadAttention`` wants it.

    Returns a ``torch.bool`` tensor of the same shape with True = blocked.
    """
    import torch

    return torch.from_numpy(~mask)


@boundary(mask=bools())
def mask_for_sdpa(mask):
    """Our mask as ``scaled_dot_product_attention`` wants it: True = allowed."""
    import torch

    return torch.from_numpy(mask.copy())


_NAMES = ("W_q", "W_k", "W_v", "W_o")


def _square_and_split(args) -> None:
    d, h = args["W_q"].shape[0], args["h"]
    for name in _NAMES:
        if args[name].shape != (d, d):
            raise ValueError(f"{name} must be square ({d}, {d}) for "
                             f"nn.MultiheadAttention, got shape "
                             f"{args[name].shape}")
    if d % h:
        raise ValueError(f"h={h} heads must divide the width d={d}")


@boundary(W_q=floats(ndim=2), W_k=floats(ndim=2), W_v=floats(ndim=2),
          W_o=floats(ndim=2), h=positive_int(), bias=instance(bool),
          checks=(_square_and_split,))
def multihead_from_weights(W_q, W_k, W_v, W_o, h, bias=False):
    """An ``nn.MultiheadAttention`` (float64, batch first) holding our weights.

    Parameters
    ----------
    W_q, W_k, W_v : array_like, shape (d, d)
        Query, key and value projections, heads side by side as in
        :func:`selfattention.attention.multi_head_attention`.
    W_o : array_like, shape (d, d)
        Output projection.
    h : int
        Number of heads.
    bias : bool
        Whether the module has biases; they are set to zero so the module
        computes the same function as the bias-free NumPy code.

    Returns
    -------
    torch.nn.MultiheadAttention
        In ``float64`` with ``batch_first=True``.
    """
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
