"""Softmax, scaled dot-product and multi-head attention in NumPy
(:ref:`ch-definition`, :ref:`ch-multihead`): float64 unless given float32,
leading batch axes broadcast, masks boolean with True = may attend.
"""

import math

import numpy as np

from ._validate import (agree, boundary, bools, divides, floats, optional,
                        positive, positive_int, require)

__all__ = ["softmax", "attention", "split_heads", "merge_heads",
           "multi_head_attention"]


# ------------------------------------------------------------------ checks
# Checks between arguments (``@boundary(checks=...)``): each raises
# ValueError when the arguments it names do not fit one another.
def batch_shape(names: str, *shapes) -> tuple:
    """The broadcast of the shapes' leading (batch) axes."""
    try:
        return np.broadcast_shapes(*(s[:-2] for s in shapes))
    except ValueError:
        raise ValueError(f"{names} must have leading (batch) dimensions that "
                         f"broadcast, got {[s[:-2] for s in shapes]}") from None


def fits_scores(name: str, x, want: tuple) -> None:
    """``x`` (if given) broadcasts to scores of shape ``want``; a boolean
    mask must leave every query a key."""
    if x is None:
        return
    require(x.ndim <= len(want) and all(
        a in (1, b) for a, b in zip(x.shape[::-1], want[::-1])),
        f"{name} must broadcast to the score matrices of shape {want} (last "
        f"two axes: queries, keys), got shape {x.shape}")
    empty = x.dtype == bool and ~np.broadcast_to(x, want).any(axis=-1)
    if np.any(empty):
        where = tuple(int(i) for i in np.argwhere(empty)[0])
        raise ValueError(
            f"{name} leaves query {where[-1]} (index {where}) with no key to "
            f"attend to: every entry of its row is False, so its softmax is "
            f"undefined (PyTorch returns NaN or zeros there, depending on the "
            f"function)")


def qkv_fit(Q, K, V) -> None:
    """Q and K share d_k, K and V share n_k, their batch axes broadcast."""
    agree("Q", Q, -1, "K", K, -1, "have the same last dimension d_k")
    agree("K", K, -2, "V", V, -2, "hold one row per key (n_k)")
    batch_shape("Q and K", Q.shape, K.shape)
    batch_shape("Q, K and V", Q.shape, K.shape, V.shape)


def masks_fit(Q, K, mask=None, bias=None) -> None:
    """``mask`` and ``bias`` broadcast to the scores of ``Q`` and ``K``."""
    want = batch_shape("Q and K", Q.shape, K.shape) + (Q.shape[-2],
                                                       K.shape[-2])
    fits_scores("mask", mask, want)
    fits_scores("bias", bias, want)


def heads_fit(X, W_q, W_k, W_v, W_o, h, context=None, tokens="X") -> None:
    """The projections fit ``X`` (called ``tokens``) or the context, and
    split into ``h`` heads."""
    C, c = (X, tokens) if context is None else (context, "context")
    agree("W_q", W_q, 0, tokens, X, -1, "agree on the token width")
    agree("W_k", W_k, 0, c, C, -1, "agree on the token width")
    agree("W_v", W_v, 0, c, C, -1, "agree on the token width")
    agree("W_q", W_q, 1, "W_k", W_k, 1, "have the same number of columns "
          "h·d_k")
    agree("W_o", W_o, 0, "W_v", W_v, 1, "agree on h·d_v (rows of W_o)")
    divides("h", h, (W_q.shape[1], W_v.shape[1]), "the widths of W_q and "
            "W_v")


def _head_masks_fit(X, h, mask, bias, context) -> None:
    C = X if context is None else context
    want = batch_shape("X and context", X.shape, C.shape) + (
        h, X.shape[-2], C.shape[-2])
    fits_scores("mask", mask, want)
    fits_scores("bias", bias, want)


# ------------------------------------------------------------------ maths
@boundary(S=floats(min_ndim=1, neg_inf=True),
          checks=(lambda S: require(
              not np.isneginf(S).all(axis=-1).any(),
              "S has a row whose entries are all -inf: no entry can receive "
              "weight (is every key of a query masked?)"),))
def softmax(S):
    """Softmax over the last axis: each row becomes weights summing to one."""
    E = np.exp(S - S.max(axis=-1, keepdims=True))  # the row's largest -> 1
    return E / E.sum(axis=-1, keepdims=True)


@boundary(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
          mask=optional(bools()), bias=optional(floats()),
          scale=optional(positive()),
          checks=(qkv_fit, masks_fit))
def attention(Q, K, V, mask=None, bias=None, scale=None):
    """Scaled dot-product attention: ``softmax(Q Kᵀ / √d_k + B) V``.

    Q (..., n_q, d_k), K (..., n_k, d_k), V (..., n_k, d_v) -> outputs
    (..., n_q, d_v) and weights (..., n_q, n_k); ``scale`` replaces 1/√d_k.
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
          checks=(lambda Z, h: divides("h", h, Z.shape[-1:], "Z's width"),))
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
          checks=(heads_fit, _head_masks_fit))
def multi_head_attention(X, W_q, W_k, W_v, W_o, h, mask=None, bias=None,
                         context=None):
    """Multi-head attention: ``Concat(head_1, …, head_h) W_O``.

    X (..., n, d), ``context`` (..., m, d_c) -> outputs (..., n, d_out) and
    weights (..., h, n, m); head ``i`` uses columns ``i·d_k … (i+1)·d_k - 1``.
    """
    C = X if context is None else context                 # keys' tokens
    Q = split_heads(X @ W_q, h)                           # (..., h, n, d_k)
    K = split_heads(C @ W_k, h)                           # (..., h, m, d_k)
    V = split_heads(C @ W_v, h)                           # (..., h, m, d_v)
    heads, A = attention(Q, K, V, mask=mask, bias=bias)   # (..., h, n, d_v)
    return merge_heads(heads) @ W_o, A                    # (..., n, d_out)
