"""Softmax, scaled dot-product and multi-head attention in NumPy
(:ref:`ch-definition` and :ref:`ch-multihead` show this code). Float64
unless given float32; leading batch axes ``...`` broadcast; masks are
boolean, True = this query may use this key.
"""

import math

import numpy as np

from ._relations import (head_masks_fit, heads_divide_width, heads_fit,
                         mask_and_bias_fit_scores, no_empty_row, qkv_fit)
from ._validate import boundary, bools, floats, optional, positive, positive_int

__all__ = ["softmax", "attention", "split_heads", "merge_heads",
           "multi_head_attention"]


# ------------------------------------------------------------------ maths
@boundary(S=floats(min_ndim=1, neg_inf=True), checks=(no_empty_row,))
def softmax(S):
    """Softmax over the last axis: each row becomes weights summing to one.

    ``-inf`` (a masked score) gets weight zero (:ref:`ch-definition`).
    """
    E = np.exp(S - S.max(axis=-1, keepdims=True))  # the row's largest -> 1
    return E / E.sum(axis=-1, keepdims=True)


@boundary(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
          mask=optional(bools()), bias=optional(floats()),
          scale=optional(positive()),
          checks=(qkv_fit, mask_and_bias_fit_scores))
def attention(Q, K, V, mask=None, bias=None, scale=None):
    """Scaled dot-product attention: ``softmax(Q Kᵀ / √d_k + B) V``.

    Parameters
    ----------
    Q, K, V : array_like
        Shapes (..., n_q, d_k), (..., n_k, d_k) and (..., n_k, d_v).
    mask : array_like of bool, broadcastable to (..., n_q, n_k), optional
        True where query ``i`` may use key ``j`` (:ref:`ch-masks`).
    bias : array_like, broadcastable to (..., n_q, n_k), optional
        Added to the scaled scores (Swin's relative position bias,
        :ref:`ch-windows`).
    scale : float, optional
        Multiplies ``Q Kᵀ`` instead of ``1 / √d_k`` (:ref:`ch-scaling`).

    Returns
    -------
    Y, A : ndarray, shapes (..., n_q, d_v) and (..., n_q, n_k)
        Outputs and attention weights (rows summing to one;
        :ref:`ch-definition`).
    """
    if scale is None:
        scale = 1 / math.sqrt(Q.shape[-1])  # a float keeps float32 float32
    S = Q @ np.swapaxes(K, -1, -2) * scale                # (..., n_q, n_k)
    if bias is not None:
        S = S + bias
    if mask is not None:
        S = np.where(mask, S, -np.inf)                    # forbidden -> -inf
    A = softmax(S)                                        # (..., n_q, n_k)
    return A @ V, A                                       # (..., n_q, d_v)


@boundary(Z=floats(min_ndim=2), h=positive_int(),
          checks=(heads_divide_width,))
def split_heads(Z, h):
    """Cut the last axis into ``h`` heads: (..., n, h·w) -> (..., h, n, w)."""
    *batch, n, width = Z.shape
    Z = Z.reshape(*batch, n, h, width // h)               # (..., n, h, w)
    return np.swapaxes(Z, -2, -3)                         # (..., h, n, w)


@boundary(Z=floats(min_ndim=3))
def merge_heads(Z):
    """Glue the heads back side by side: (..., h, n, w) -> (..., n, h·w)."""
    *batch, h, n, width = Z.shape
    Z = np.swapaxes(Z, -2, -3)                            # (..., n, h, w)
    return Z.reshape(*batch, n, h * width)                # (..., n, h·w)


@boundary(X=floats(min_ndim=2), W_q=floats(ndim=2), W_k=floats(ndim=2),
          W_v=floats(ndim=2), W_o=floats(ndim=2), h=positive_int(),
          mask=optional(bools()), bias=optional(floats()),
          context=optional(floats(min_ndim=2)),
          checks=(heads_fit, head_masks_fit))
def multi_head_attention(X, W_q, W_k, W_v, W_o, h, mask=None, bias=None,
                         context=None):
    """Multi-head attention: ``Concat(head_1, …, head_h) W_O``.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
    W_q, W_k, W_v, W_o : array_like
        Shapes (d, h·d_k), (d_c, h·d_k), (d_c, h·d_v) and (h·d_v, d_out);
        head ``i`` uses columns ``i·d_k … (i+1)·d_k - 1`` (:ref:`ch-multihead`).
    h : int
    mask, bias : array_like, broadcastable to (..., h, n, m), optional
        As in :func:`attention`; give a batch of masks a head axis.
    context : array_like, shape (..., m, d_c), optional
        Tokens giving keys and values (cross-attention); by default ``X``.

    Returns
    -------
    Y, A : ndarray, shapes (..., n, d_out) and (..., h, n, m)
    """
    C = X if context is None else context                 # keys' tokens
    Q = split_heads(X @ W_q, h)                           # (..., h, n, d_k)
    K = split_heads(C @ W_k, h)                           # (..., h, m, d_k)
    V = split_heads(C @ W_v, h)                           # (..., h, m, d_v)
    heads, A = attention(Q, K, V, mask=mask, bias=bias)   # (..., h, n, d_v)
    return merge_heads(heads) @ W_o, A                    # (..., n, d_out)
