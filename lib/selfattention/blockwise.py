"""Exact attention in blocks of keys with an online softmax, and
FlashAttention's tiles with a recomputing backward pass (:ref:`ch-cost`;
Milakov and Gimelshein 2018, Rabe and Staats 2021, Dao et al. 2022).
"""

import math

import numpy as np

from ._validate import (agree, boundary, bools, floats, optional, positive,
                        positive_int, require)
from .attention import masks_fit, qkv_fit

__all__ = ["online_softmax_update", "blockwise_attention", "tiled_attention",
           "tiled_attention_backward"]


def _running_sums_fit(m, l, acc, S, V) -> None:
    require(m.shape == l.shape == acc.shape[:-1] == S.shape[:-1],
            f"m, l, acc and S must share the queries' shape (..., n_q), got "
            f"m {m.shape}, l {l.shape}, acc {acc.shape} and S {S.shape}")
    agree("V", V, -2, "S", S, -1, "agree on the keys of the block")
    agree("V", V, -1, "acc", acc, -1, "agree on the value width d_v")


@boundary(m=floats(min_ndim=1, neg_inf=True), l=floats(min_ndim=1),
          acc=floats(min_ndim=2), S=floats(min_ndim=2, neg_inf=True),
          V=floats(min_ndim=2), checks=(_running_sums_fit,))
def online_softmax_update(m, l, acc, S, V):
    """Fold one block of scores into the running max, sum and output."""
    m_new = np.maximum(m, S.max(axis=-1))                 # (..., n_q)
    # A query that has seen only masked keys keeps m = -inf; shift it by 0
    # instead, so that exp(-inf - (-inf)) never produces NaN.
    shift = np.where(np.isneginf(m_new), 0, m_new).astype(S.dtype)
    P = np.exp(S - shift[..., None])                      # (..., n_q, b)
    alpha = np.exp(m - shift)                             # rescales old sums
    return m_new, l * alpha + P.sum(axis=-1), acc * alpha[..., None] + P @ V


@boundary(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
          mask=optional(bools()), scale=optional(positive()),
          block=positive_int(), checks=(qkv_fit, masks_fit))
def blockwise_attention(Q, K, V, mask=None, scale=None, block=256):
    """Exact attention, one block of keys at a time: no n_q × n_k matrix."""
    if scale is None:
        scale = 1 / math.sqrt(Q.shape[-1])   # a float keeps float32 float32
    n_q, n_k = Q.shape[-2], K.shape[-2]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    if mask is not None:
        mask = np.broadcast_to(mask, batch + (n_q, n_k))  # a view, no copy
    dtype = np.result_type(Q, K, V)
    m = np.full(batch + (n_q,), -np.inf, dtype)           # running max
    l = np.zeros(batch + (n_q,), dtype)                   # running sum
    acc = np.zeros(batch + (n_q, V.shape[-1]), dtype)     # running Σ p·v
    for k0 in range(0, n_k, block):
        keys = slice(k0, k0 + block)                      # this block's keys
        S = Q @ np.swapaxes(K[..., keys, :], -1, -2) * scale  # (..., n_q, b)
        if mask is not None:
            S = np.where(mask[..., keys], S, -np.inf)     # forbidden -> -inf
        m, l, acc = online_softmax_update(m, l, acc, S, V[..., keys, :])
    return acc / l[..., None]                             # (..., n_q, d_v)


@boundary(Q=floats(ndim=2), K=floats(ndim=2), V=floats(ndim=2),
          block_q=positive_int(), block_k=positive_int(), checks=(qkv_fit,))
def tiled_attention(Q, K, V, block_q=64, block_k=64):
    """Attention in tiles of queries and of keys; also each query's log-sum-exp.
    """
    scale = 1 / math.sqrt(Q.shape[-1])
    dtype = np.result_type(Q, K, V)
    Y = np.empty((len(Q), V.shape[-1]), dtype)
    lse = np.empty(len(Q), dtype)
    for q0 in range(0, len(Q), block_q):                 # one tile of queries
        rows = slice(q0, q0 + block_q)                    # its state stays
        m = np.full(len(Q[rows]), -np.inf, dtype)         # in fast memory
        l = np.zeros(len(Q[rows]), dtype)
        acc = np.zeros((len(Q[rows]), V.shape[-1]), dtype)
        for k0 in range(0, len(K), block_k):              # one tile of keys
            keys = slice(k0, k0 + block_k)
            S = Q[rows] @ K[keys].T * scale               # (b_q, b_k)
            m, l, acc = online_softmax_update(m, l, acc, S, V[keys])
        Y[rows] = acc / l[:, None]                        # written once
        lse[rows] = m + np.log(l)
    return Y, lse


def _gradients_fit(Q, V, Y, dY, lse) -> None:
    """One output row per query in ``Y`` and ``dY``, one number in ``lse``."""
    want = Q.shape[:-1] + V.shape[-1:]
    for name, x in (("Y", Y), ("dY", dY)):
        require(x.shape == want, f"{name} must have shape (n_q, d_v) = "
                                 f"{want}, got {x.shape}")
    require(lse.shape == Q.shape[:-1], f"lse must have shape (n_q,) = "
                                       f"{Q.shape[:-1]}, got {lse.shape}")


@boundary(Q=floats(ndim=2), K=floats(ndim=2), V=floats(ndim=2),
          Y=floats(ndim=2), dY=floats(ndim=2), lse=floats(ndim=1),
          block_q=positive_int(), block_k=positive_int(),
          checks=(qkv_fit, _gradients_fit))
def tiled_attention_backward(Q, K, V, Y, dY, lse, block_q=64, block_k=64):
    """Gradients of attention from ``dY``, recomputing each tile of weights."""
    scale = 1 / math.sqrt(Q.shape[-1])
    dtype = np.result_type(Q, K, V, dY)
    dQ, dK, dV = (np.zeros(x.shape, dtype) for x in (Q, K, V))
    D = np.sum(dY * Y, axis=-1)                           # (n_q,): Σ dY·Y
    for k0 in range(0, len(K), block_k):                  # one tile of keys
        keys = slice(k0, k0 + block_k)
        for q0 in range(0, len(Q), block_q):              # one of queries
            rows = slice(q0, q0 + block_q)
            S = Q[rows] @ K[keys].T * scale               # recomputed
            P = np.exp(S - lse[rows, None])               # the weights again
            dV[keys] += P.T @ dY[rows]
            dP = dY[rows] @ V[keys].T                     # (b_q, b_k)
            dS = P * (dP - D[rows, None]) * scale         # softmax's Jacobian
            dQ[rows] += dS @ K[keys]
            dK[keys] += dS.T @ Q[rows]
    return dQ, dK, dV
