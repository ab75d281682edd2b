"""Softmax, scaled dot-product attention and multi-head attention in NumPy.

This is the book's reference implementation (chapters 1 and 3). Arrays are
float64 unless you pass float32, and every function accepts any number of
leading batch dimensions ``...``. Masks are boolean with **True = this query
may use this key** (chapter 4 explains PyTorch's two conventions).

Shapes use the book's notation: ``n_q`` queries, ``n_k`` keys, key width
``d_k``, value width ``d_v``, ``h`` heads.
"""

from __future__ import annotations

import math

import numpy as np

from ._validate import (as_bool_mask, as_float_array, broadcast_shape,
                        broadcasts_to, check_qkv, every_query_has_a_key,
                        positive_int, positive_scale)

__all__ = ["softmax", "attention", "multi_head_attention", "split_heads",
           "merge_heads"]


def softmax(S, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis`` (chapter 1, Eq. 2).

    Subtracting each row's maximum before exponentiating leaves the result
    unchanged and keeps ``exp`` from overflowing. Entries equal to ``-inf``
    (masked scores) get a weight of exactly zero.

    Parameters
    ----------
    S : array_like, shape (..., n)
        Scores. ``-inf`` is allowed; NaN and ``+inf`` are not.
    axis : int
        The axis that sums to one.

    Returns
    -------
    P : ndarray, same shape as ``S``
        Non-negative weights that sum to one along ``axis``.

    Raises
    ------
    TypeError
        If ``S`` is not an array of real numbers.
    ValueError
        If ``S`` holds NaN or ``+inf``, or a whole row is ``-inf``.
    """
    S = np.asarray(S)
    if S.dtype == object or not (np.issubdtype(S.dtype, np.number)
                                 or S.dtype == bool):
        raise TypeError(f"S must be an array of real numbers, got dtype {S.dtype}")
    if not np.issubdtype(S.dtype, np.floating):
        S = S.astype(np.float64)
    if S.ndim == 0:
        raise ValueError("S must have at least 1 dimension, got a scalar")
    if np.isnan(S).any() or np.isposinf(S).any():
        raise ValueError("S must not contain NaN or +inf")
    top = S.max(axis=axis, keepdims=True)
    if np.isneginf(top).any():
        raise ValueError(
            "S has a row whose entries are all -inf: no entry can receive "
            "weight (is every key of some query masked?)"
        )
    E = np.exp(S - top)
    return E / E.sum(axis=axis, keepdims=True)


def attention(Q, K, V, mask=None, bias=None, scale=None):
    """Scaled dot-product attention, ``softmax(Q Kᵀ / √d_k + B) V`` (chapter 1).

    Parameters
    ----------
    Q : array_like, shape (..., n_q, d_k)
        Queries, one per row.
    K : array_like, shape (..., n_k, d_k)
        Keys, one per row.
    V : array_like, shape (..., n_k, d_v)
        Values, one per key.
    mask : array_like of bool, broadcastable to (..., n_q, n_k), optional
        True where query ``i`` may use key ``j``. Forbidden scores become
        ``-inf`` before the softmax, so their weights are exactly zero.
    bias : array_like, broadcastable to (..., n_q, n_k), optional
        Added to the scaled scores before the mask, as Swin's relative
        position bias ``B`` (chapter 7).
    scale : float, optional
        Multiplies ``Q Kᵀ``. The default divides by ``√d_k``.

    Returns
    -------
    Y : ndarray, shape (..., n_q, d_v)
        Outputs, ``A @ V``.
    A : ndarray, shape (..., n_q, n_k)
        Attention weights; each row is non-negative and sums to one.

    Raises
    ------
    TypeError
        If an input is not numeric, or ``mask`` is not boolean.
    ValueError
        If shapes do not fit together, an input is not finite, ``scale`` is
        not a positive finite number, or ``mask`` leaves a query with no key.
    """
    Q, K, V = check_qkv(Q, K, V)
    broadcast_shape(Q.shape[:-2], K.shape[:-2], ("Q", "K"))
    broadcast_shape(K.shape[:-2], V.shape[:-2], ("K", "V"))
    n_q, n_k, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]

    S = Q @ np.swapaxes(K, -1, -2)                        # (..., n_q, n_k)
    if scale is None:
        S = S / math.sqrt(d_k)          # a Python float keeps float32 as is
    else:
        S = S * float(positive_scale(scale))
    if bias is not None:
        bias = as_float_array(bias, "bias", min_ndim=0)
        _check_broadcast(bias.shape, S.shape, "bias", (n_q, n_k))
        S = S + bias
    if mask is not None:
        mask = as_bool_mask(mask, "mask")
        _check_broadcast(mask.shape, S.shape, "mask", (n_q, n_k))
        mask = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, S.shape))
        every_query_has_a_key(
            mask, "NaN or zeros there, depending on the function")
        S = np.where(mask, S, -np.inf)
    A = softmax(S)                                        # (..., n_q, n_k)
    return A @ V, A                                       # (..., n_q, d_v)


def split_heads(Z, h: int) -> np.ndarray:
    """Cut the last axis into ``h`` heads: (..., n, h·w) -> (..., h, n, w)."""
    Z = np.asarray(Z)
    *batch, n, width = Z.shape
    return np.swapaxes(Z.reshape(*batch, n, h, width // h), -2, -3)


def merge_heads(Z) -> np.ndarray:
    """Inverse of :func:`split_heads`: (..., h, n, w) -> (..., n, h·w)."""
    Z = np.asarray(Z)
    *batch, h, n, width = Z.shape
    return np.swapaxes(Z, -2, -3).reshape(*batch, n, h * width)


def multi_head_attention(X, W_q, W_k, W_v, W_o, h: int, mask=None, bias=None,
                         context=None):
    """Multi-head attention, ``Concat(head_1, …, head_h) W_O`` (chapter 3).

    Head ``i`` uses columns ``i·d_k … (i+1)·d_k - 1`` of the projections, so
    ``W_q`` of shape (d, h·d_k) holds all ``h`` query projections side by side.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
        Tokens that ask the queries.
    W_q, W_k : array_like, shape (d, h·d_k) and (d_c, h·d_k)
        Query and key projections.
    W_v : array_like, shape (d_c, h·d_v)
        Value projection.
    W_o : array_like, shape (h·d_v, d_out)
        Output projection.
    h : int
        Number of heads; must divide the widths of ``W_q`` and ``W_v``.
    mask : array_like of bool, broadcastable to (..., h, n, m), optional
        True = may attend. A (n, m) mask is shared by every head; give a
        batch mask of shape (B, n, m) a head axis: ``mask[:, None]``.
    bias : array_like, broadcastable to (..., h, n, m), optional
        Added to every head's scaled scores (per head if it has an h axis).
    context : array_like, shape (..., m, d_c), optional
        Tokens that provide keys and values (cross-attention, chapter 9).
        Defaults to ``X`` (self-attention, ``m = n``).

    Returns
    -------
    Y : ndarray, shape (..., n, d_out)
        Outputs.
    A : ndarray, shape (..., h, n, m)
        Each head's attention weights.

    Raises
    ------
    TypeError, ValueError
        As :func:`attention`, and if ``h`` is not a positive integer that
        divides the projection widths, or a weight does not fit ``X``.
    """
    h = positive_int(h, "h")
    X = as_float_array(X, "X", min_ndim=2)
    C = X if context is None else as_float_array(context, "context", min_ndim=2)
    W_q, W_k, W_v, W_o = (
        as_float_array(W, name, min_ndim=2)
        for W, name in ((W_q, "W_q"), (W_k, "W_k"), (W_v, "W_v"), (W_o, "W_o"))
    )
    for W, name in ((W_q, "W_q"), (W_k, "W_k"), (W_v, "W_v"), (W_o, "W_o")):
        if W.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got shape {W.shape}")
    _check_rows(W_q, X, "W_q", "X")
    ctx_name = "X" if context is None else "context"
    _check_rows(W_k, C, "W_k", ctx_name)
    _check_rows(W_v, C, "W_v", ctx_name)
    if W_q.shape[1] != W_k.shape[1]:
        raise ValueError(
            f"W_q and W_k must have the same number of columns h·d_k, got "
            f"{W_q.shape[1]} and {W_k.shape[1]}"
        )
    for W, name in ((W_q, "W_q"), (W_v, "W_v")):
        if W.shape[1] % h:
            raise ValueError(
                f"h={h} heads must divide the width of {name}, which has "
                f"{W.shape[1]} columns"
            )
    if W_o.shape[0] != W_v.shape[1]:
        raise ValueError(
            f"W_o must have h·d_v = {W_v.shape[1]} rows (the width of W_v), "
            f"got shape {W_o.shape}"
        )
    Q = split_heads(X @ W_q, h)                           # (..., h, n, d_k)
    K = split_heads(C @ W_k, h)                           # (..., h, m, d_k)
    V = split_heads(C @ W_v, h)                           # (..., h, m, d_v)
    heads, A = attention(Q, K, V, mask=mask, bias=bias)   # (..., h, n, d_v)
    return merge_heads(heads) @ W_o, A                    # (..., n, d_out)


def _check_rows(W, X, w_name: str, x_name: str) -> None:
    if W.shape[0] != X.shape[-1]:
        raise ValueError(
            f"{w_name} must have one row per feature of {x_name} "
            f"({X.shape[-1]}), got shape {W.shape}"
        )


def _check_broadcast(shape, target, name: str, last: tuple) -> None:
    if not broadcasts_to(shape, target):
        raise ValueError(
            f"{name} must broadcast to the score matrix of shape {target} "
            f"(last two axes (n_q, n_k) = {last}), got shape {shape}"
        )
