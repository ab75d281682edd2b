"""Softmax, scaled dot-product attention and multi-head attention in NumPy.

The book's reference implementation (chapters 1 and 3, which show this code).
Arrays are float64 unless you pass float32, and every function accepts any
number of leading batch dimensions ``...``. Masks are boolean with **True =
this query may use this key** (chapter 4 explains PyTorch's two conventions).

Shapes use the book's notation: ``n_q`` queries, ``n_k`` keys, key width
``d_k``, value width ``d_v``, ``h`` heads.
"""

from __future__ import annotations

import math

import numpy as np

from ._validate import (boundary, bools, broadcasts_to, floats, optional,
                        positive, positive_int)

__all__ = ["softmax", "attention", "split_heads", "merge_heads",
           "multi_head_attention"]


# ------------------------------------------------------------------ checks
def _batch(names: str, *shapes) -> tuple:
    try:
        return np.broadcast_shapes(*(s[:-2] for s in shapes))
    except ValueError:
        raise ValueError(f"{names} must have leading (batch) dimensions that "
                         f"broadcast, got {[s[:-2] for s in shapes]}") from None


def _qkv_fit(args) -> None:
    """Q and K share d_k, K and V share n_k, their batch axes broadcast."""
    Q, K, V = args["Q"], args["K"], args["V"]
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same last dimension d_k, "
                         f"got Q of shape {Q.shape} and K of shape {K.shape}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K and V must hold the same number of rows n_k "
                         f"(one value per key), got K of shape {K.shape} "
                         f"and V of shape {V.shape}")
    _batch("Q and K", Q.shape, K.shape)
    _batch("Q, K and V", Q.shape, K.shape, V.shape)


def _scores(args) -> tuple:
    """Shape (..., n_q, n_k) of the score matrices of Q and K."""
    Q, K = args["Q"], args["K"]
    return _batch("Q and K", Q.shape, K.shape) + (Q.shape[-2], K.shape[-2])


def fits_scores(name: str, scores=_scores):
    """A check: argument ``name``, if given, broadcasts to the scores."""

    def check(args) -> None:
        x, want = args[name], scores(args)
        if x is not None and not broadcasts_to(x.shape, want):
            raise ValueError(f"{name} must broadcast to the score matrices "
                             f"of shape {want} (last two axes: queries, "
                             f"keys), got shape {x.shape}")

    return check


def every_query_has_a_key(scores=_scores):
    """A check: the mask, if given, leaves no query without a key."""

    def check(args) -> None:
        if args["mask"] is None:
            return
        empty = ~np.broadcast_to(args["mask"], scores(args)).any(axis=-1)
        if empty.any():
            where = tuple(int(i) for i in np.argwhere(empty)[0])
            raise ValueError(
                f"mask leaves query {where[-1]} (index {where}) with no key "
                f"to attend to: every entry of its row is False, so its "
                f"softmax is undefined (PyTorch returns NaN or zeros there, "
                f"depending on the function; chapter 4)")

    return check


def _no_empty_row(args) -> None:
    if args["S"].ndim == 0:
        raise ValueError("S must have at least 1 dimension, got a scalar")
    if np.isneginf(args["S"]).all(axis=-1).any():
        raise ValueError("S has a row whose entries are all -inf: no entry "
                         "can receive weight (is every key of some query "
                         "masked?)")


def _heads_fit(args) -> None:
    X, h = args["X"], args["h"]
    C, of_c = (X, "X") if args["context"] is None else (args["context"],
                                                          "context")
    W_q, W_k, W_v, W_o = (args[w] for w in ("W_q", "W_k", "W_v", "W_o"))
    for W, name, rows, of in ((W_q, "W_q", X.shape[-1], "X"),
                              (W_k, "W_k", C.shape[-1], of_c),
                              (W_v, "W_v", C.shape[-1], of_c)):
        if W.shape[0] != rows:
            raise ValueError(f"{name} must have one row per feature of {of} "
                             f"({rows}), got shape {W.shape}")
    if W_q.shape[1] != W_k.shape[1]:
        raise ValueError(f"W_q and W_k must have the same number of columns "
                         f"h·d_k, got {W_q.shape[1]} and {W_k.shape[1]}")
    for W, name in ((W_q, "W_q"), (W_v, "W_v")):
        if W.shape[1] % h:
            raise ValueError(f"h={h} heads must divide the width of {name}, "
                             f"which has {W.shape[1]} columns")
    if W_o.shape[0] != W_v.shape[1]:
        raise ValueError(f"W_o must have h·d_v = {W_v.shape[1]} rows (the "
                         f"width of W_v), got shape {W_o.shape}")


def _head_scores(args) -> tuple:
    """Shape (..., h, n, m) of the heads' score matrices."""
    X = args["X"]
    C = X if args["context"] is None else args["context"]
    return _batch("X and context", X.shape, C.shape) + (
        args["h"], X.shape[-2], C.shape[-2])


# ------------------------------------------------------------------ maths
@boundary(S=floats(min_ndim=1, neg_inf=True), checks=(_no_empty_row,))
def softmax(S):
    """Softmax over the last axis: each row becomes weights summing to one.

    Subtracting each row's maximum before exponentiating leaves the result
    unchanged and keeps ``exp`` from overflowing. Entries equal to ``-inf``
    (masked scores) get a weight of exactly zero (chapter 1, Eq.
    ``eq-def-softmax``).

    Parameters
    ----------
    S : array_like, shape (..., n)
        Scores. ``-inf`` is allowed; NaN and ``+inf`` are not.

    Returns
    -------
    P : ndarray, same shape as ``S``
        Non-negative weights that sum to one along the last axis.

    Raises
    ------
    TypeError
        If ``S`` is not an array of real numbers.
    ValueError
        If ``S`` holds NaN or ``+inf``, or a whole row is ``-inf``.
    """
    E = np.exp(S - S.max(axis=-1, keepdims=True))  # the row's largest -> 1
    return E / E.sum(axis=-1, keepdims=True)


@boundary(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
          mask=optional(bools()), bias=optional(floats()),
          scale=optional(positive()),
          checks=(_qkv_fit, fits_scores("mask"), fits_scores("bias"),
                  every_query_has_a_key()))
def attention(Q, K, V, mask=None, bias=None, scale=None):
    """Scaled dot-product attention: ``softmax(Q Kᵀ / √d_k + B) V``.

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
        ``-inf`` before the softmax, so their weights are exactly zero
        (chapter 4).
    bias : array_like, broadcastable to (..., n_q, n_k), optional
        Added to the scaled scores, as Swin's relative position bias ``B``
        (chapter 8).
    scale : float, optional
        Multiplies ``Q Kᵀ``. The default divides by ``√d_k`` (chapter 2).

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
    if scale is None:
        scale = 1 / math.sqrt(Q.shape[-1])  # a float keeps float32 float32
    S = Q @ np.swapaxes(K, -1, -2) * scale                # (..., n_q, n_k)
    if bias is not None:
        S = S + bias
    if mask is not None:
        S = np.where(mask, S, -np.inf)                    # forbidden -> -inf
    A = softmax(S)                                        # (..., n_q, n_k)
    return A @ V, A                                       # (..., n_q, d_v)


def _width_splits(args) -> None:
    if args["Z"].shape[-1] % args["h"]:
        raise ValueError(f"h={args['h']} heads must divide the width of Z, "
                         f"got shape {args['Z'].shape}")


@boundary(Z=floats(min_ndim=2), h=positive_int(), checks=(_width_splits,))
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
                  fits_scores("bias", _head_scores),
                  every_query_has_a_key(_head_scores)))
def multi_head_attention(X, W_q, W_k, W_v, W_o, h, mask=None, bias=None,
                         context=None):
    """Multi-head attention: ``Concat(head_1, …, head_h) W_O``.

    Head ``i`` uses columns ``i·d_k … (i+1)·d_k - 1`` of the projections, so
    ``W_q`` of shape (d, h·d_k) holds all ``h`` query projections side by
    side (chapter 3).

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
        Tokens that provide keys and values (cross-attention, chapter 10).
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
    C = X if context is None else context                 # keys' tokens
    Q = split_heads(X @ W_q, h)                           # (..., h, n, d_k)
    K = split_heads(C @ W_k, h)                           # (..., h, m, d_k)
    V = split_heads(C @ W_v, h)                           # (..., h, m, d_v)
    heads, A = attention(Q, K, V, mask=mask, bias=bias)   # (..., h, n, d_v)
    return merge_heads(heads) @ W_o, A                    # (..., n, d_out)
