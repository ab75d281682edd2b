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

from ._legacy import as_bool_mask, as_float_array, positive_int

__all__ = ["mask_for_mha", "mask_for_sdpa", "multihead_from_weights"]


def mask_for_mha(mask):
    """Our mask (True = may attend) as ``nn.MultiheadAttention`` wants it.

    Returns a ``torch.bool`` tensor of the same shape with True = blocked.
    """
    import torch

    return torch.from_numpy(~as_bool_mask(mask))


def mask_for_sdpa(mask):
    """Our mask as ``scaled_dot_product_attention`` wants it: True = allowed."""
    import torch

    return torch.from_numpy(as_bool_mask(mask).copy())


def multihead_from_weights(W_q, W_k, W_v, W_o, h: int, bias: bool = False):
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

    h = positive_int(h, "h")
    Ws = [as_float_array(W, name, min_ndim=2) for W, name in
          ((W_q, "W_q"), (W_k, "W_k"), (W_v, "W_v"), (W_o, "W_o"))]
    d = Ws[0].shape[0]
    for W, name in zip(Ws, ("W_q", "W_k", "W_v", "W_o")):
        if W.shape != (d, d):
            raise ValueError(
                f"{name} must be square ({d}, {d}) for nn.MultiheadAttention, "
                f"got shape {W.shape}"
            )
    if d % h:
        raise ValueError(f"h={h} heads must divide the width d={d}")
    mha = torch.nn.MultiheadAttention(d, h, bias=bias, batch_first=True)
    mha = mha.double()
    with torch.no_grad():
        # PyTorch computes x @ weight.T, so each of our matrices goes in as W.T
        stacked = np.concatenate([W.T for W in Ws[:3]])        # (3d, d)
        mha.in_proj_weight.copy_(torch.from_numpy(stacked))
        mha.out_proj.weight.copy_(torch.from_numpy(Ws[3].T.copy()))
        if bias:
            mha.in_proj_bias.zero_()
            mha.out_proj.bias.zero_()
    return mha
