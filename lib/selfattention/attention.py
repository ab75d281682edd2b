"""Softmax, scaled dot-product and multi-head attention in NumPy (chapters 1
and 3 show this code). Float64 unless given float32; leading batch axes
``...`` broadcast; masks are boolean, True = this query may use this key.
"""

import math

import numpy as np

from ._validate import (boundary, bools, divides, floats, optional, positive,
                        positive_int)

__all__ = ["softmax", "attention", "split_heads", "merge_heads",
           "multi_head_attention"]


# ------------------------------------------------------------------ checks
def _agree(args, a: str, i: int, b: str, j: int, what: str) -> None:
    """Axis ``i`` of argument ``a`` equals axis ``j`` of argument ``b``."""
    x, y = args[a], args[b]
    if x.shape[i] != y.shape[j]:
        raise ValueError(f"{a} and {b} must {what}, got {a} of shape "
                         f"{x.shape} and {b} of shape {y.shape}")


def _batch(names: str, *shapes) -> tuple:
    try:
        return np.broadcast_shapes(*(s[:-2] for s in shapes))
    except ValueError:
        raise ValueError(f"{names} must have leading (batch) dimensions that "
                         f"broadcast, got {[s[:-2] for s in shapes]}") from None


def _scores(args) -> tuple:
    """Shape (..., n_q, n_k) of the score matrices of Q and K."""
    Q, K = args["Q"], args["K"]
    return _batch("Q and K", Q.shape, K.shape) + (Q.shape[-2], K.shape[-2])


def _head_scores(args) -> tuple:
    """Shape (..., h, n, m) of the heads' score matrices."""
    X = args["X"]
    C = X if args["context"] is None else args["context"]
    return _batch("X and context", X.shape, C.shape) + (
        args["h"], X.shape[-2], C.shape[-2])


def _qkv_fit(args) -> None:
    """Q and K share d_k, K and V share n_k, their batch axes broadcast."""
    _agree(args, "Q", -1, "K", -1, "have the same last dimension d_k")
    _agree(args, "K", -2, "V", -2, "hold one row per key (n_k)")
    _scores(args)
    _batch("Q, K and V", args["Q"].shape, args["K"].shape, args["V"].shape)


def _heads_fit(args) -> None:
    """The projections fit X (or the context) and split into h heads."""
    kv = "X" if args["context"] is None else "context"
    for W, tokens in (("W_q", "X"), ("W_k", kv), ("W_v", kv)):
        _agree(args, W, 0, tokens, -1, "agree on the token width")
    _agree(args, "W_q", 1, "W_k", 1, "have the same number of columns h·d_k")
    _agree(args, "W_o", 0, "W_v", 1, "agree on h·d_v (rows of W_o)")
    divides("h", lambda a: (a["W_q"].shape[1], a["W_v"].shape[1]),
            "the widths of W_q and W_v")(args)


def fits_scores(name: str, scores=_scores):
    """A check: argument ``name``, if given, broadcasts to the scores; a
    boolean one (a mask) must leave every query a key."""

    def check(args) -> None:
        x, want = args[name], scores(args)
        if x is None:
            return
        if x.ndim > len(want) or any(          # each axis 1 or the scores'
                a not in (1, b) for a, b in zip(x.shape[::-1], want[::-1])):
            raise ValueError(f"{name} must broadcast to the score matrices "
                             f"of shape {want} (last two axes: queries, "
                             f"keys), got shape {x.shape}")
        empty = x.dtype == bool and ~np.broadcast_to(x, want).any(axis=-1)
        if np.any(empty):
            where = tuple(int(i) for i in np.argwhere(empty)[0])
            raise ValueError(
                f"{name} leaves query {where[-1]} (index {where}) with no key "
                f"to attend to: every entry of its row is False, so its "
                f"softmax is undefined (PyTorch returns NaN or zeros there, "
                f"depending on the function; chapter 4)")
    return check


def _no_empty_row(args) -> None:
    if np.isneginf(args["S"]).all(axis=-1).any():
        raise ValueError("S has a row whose entries are all -inf: no entry "
                         "can receive weight (is every key of a query "
                         "masked?)")


# ------------------------------------------------------------------ maths
@boundary(S=floats(min_ndim=1, neg_inf=True), checks=(_no_empty_row,))
def softmax(S):
    """Softmax over the last axis: each row becomes weights summing to one.

    ``-inf`` (a masked score) gets weight zero (chapter 1).
    """
    E = np.exp(S - S.max(axis=-1, keepdims=True))  # the row's largest -> 1
    return E / E.sum(axis=-1, keepdims=True)


@boundary(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
          mask=optional(bools()), bias=optional(floats()),
          scale=optional(positive()),
          checks=(_qkv_fit, fits_scores("mask"), fits_scores("bias")))
def attention(Q, K, V, mask=None, bias=None, scale=None):
    """Scaled dot-product attention: ``softmax(Q Kᵀ / √d_k + B) V``.

    Parameters
    ----------
    Q, K, V : array_like
        Shapes (..., n_q, d_k), (..., n_k, d_k) and (..., n_k, d_v).
    mask : array_like of bool, broadcastable to (..., n_q, n_k), optional
        True where query ``i`` may use key ``j`` (chapter 4).
    bias : array_like, broadcastable to (..., n_q, n_k), optional
        Added to the scaled scores (Swin's relative position bias, chapter 8).
    scale : float, optional
        Multiplies ``Q Kᵀ`` instead of ``1 / √d_k`` (chapter 2).

    Returns
    -------
    Y, A : ndarray, shapes (..., n_q, d_v) and (..., n_q, n_k)
        Outputs and attention weights (rows summing to one; chapter 1).
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
          checks=(divides("h", lambda a: a["Z"].shape[-1:], "the width of Z"),))
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
          checks=(_heads_fit, fits_scores("mask", _head_scores),
                  fits_scores("bias", _head_scores)))
def multi_head_attention(X, W_q, W_k, W_v, W_o, h, mask=None, bias=None,
                         context=None):
    """Multi-head attention: ``Concat(head_1, …, head_h) W_O``.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
    W_q, W_k, W_v, W_o : array_like
        Shapes (d, h·d_k), (d_c, h·d_k), (d_c, h·d_v) and (h·d_v, d_out);
        head ``i`` uses columns ``i·d_k … (i+1)·d_k - 1`` (chapter 3).
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
