"""Exact attention in blocks of keys with an online softmax (:ref:`ch-cost`;
Milakov and Gimelshein, 2018; Rabe and Staats, 2021; Dao et al., 2022):
memory ``O(n_q · block)`` instead of ``O(n_q · n_k)``, the same work.
"""

import math

import numpy as np

from ._relations import mask_and_bias_fit_scores, qkv_fit, running_sums_fit
from ._validate import (boundary, bools, floats, optional, positive,
                        positive_int)

__all__ = ["online_softmax_update", "blockwise_attention"]


@boundary(m=floats(min_ndim=1, neg_inf=True), l=floats(min_ndim=1),
          acc=floats(min_ndim=2), S=floats(min_ndim=2, neg_inf=True),
          V=floats(min_ndim=2), checks=(running_sums_fit,))
def online_softmax_update(m, l, acc, S, V):
    """Fold one block of scores into the running max, sum and output.

    Parameters
    ----------
    m, l : ndarray, shape (..., n_q)
        Largest score so far (``-inf`` at first) and ``Σ exp(s - m)``.
    acc : ndarray, shape (..., n_q, d_v)
        ``Σ exp(s - m) · v``.
    S, V : ndarray, shapes (..., n_q, b) and (..., b, d_v)
        Scaled scores (``-inf`` where masked) and values of ``b`` keys.

    Returns
    -------
    m, l, acc : ndarray
        Updated; after the last block ``acc / l[..., None]`` is the output.
    """
    m_new = np.maximum(m, S.max(axis=-1))                 # (..., n_q)
    # A query that has seen only masked keys keeps m = -inf; shift it by 0
    # instead, so that exp(-inf - (-inf)) never produces NaN.
    shift = np.where(np.isneginf(m_new), 0, m_new).astype(S.dtype)
    P = np.exp(S - shift[..., None])                      # (..., n_q, b)
    alpha = np.exp(m - shift)                             # rescales old sums
    return m_new, l * alpha + P.sum(axis=-1), acc * alpha[..., None] + P @ V


@boundary(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
          mask=optional(bools()), scale=optional(positive()),
          block=positive_int(), checks=(qkv_fit, mask_and_bias_fit_scores))
def blockwise_attention(Q, K, V, mask=None, scale=None, block=256):
    """Exact attention, one block of keys at a time: no n_q × n_k matrix.

    :func:`selfattention.attention.attention`'s ``Y`` up to rounding, holding
    ``n_q × block`` scores at a time.
    """
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
