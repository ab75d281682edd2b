"""Exact attention in blocks of keys with an online softmax (chapter 7;
Milakov and Gimelshein, 2018; Rabe and Staats, 2021; Dao et al., 2022):
memory ``O(n_q · block)`` instead of ``O(n_q · n_k)``, the same work.
"""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from ._validate import (boundary, bools, floats, optional, positive,
                        positive_int)
from .attention import _agree, _qkv_fit, fits_scores

__all__ = ["online_softmax_update", "blockwise_attention",
           "fast_blockwise_attention"]


def _running_fit(args) -> None:
    m, l, acc, S, V = (args[k] for k in ("m", "l", "acc", "S", "V"))
    if not m.shape == l.shape == acc.shape[:-1] == S.shape[:-1]:
        raise ValueError(f"m, l, acc and S must share the queries' shape "
                         f"(..., n_q), got m {m.shape}, l {l.shape}, acc "
                         f"{acc.shape} and S {S.shape}")
    _agree(args, "V", -2, "S", -1, "agree on the keys of the block")
    _agree(args, "V", -1, "acc", -1, "agree on the value width d_v")


@boundary(m=floats(min_ndim=1, neg_inf=True), l=floats(min_ndim=1),
          acc=floats(min_ndim=2), S=floats(min_ndim=2, neg_inf=True),
          V=floats(min_ndim=2), checks=(_running_fit,))
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


_QKV = dict(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
            mask=optional(bools()), scale=optional(positive()),
            checks=(_qkv_fit, fits_scores("mask")))


@boundary(**_QKV, block=positive_int())
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


# ---------------------------------------------------------- the tuned variant
def _lazy_rows(q, K1, V1, block_k):
    """Outputs of scaled queries ``q`` with a lazy shift, or None on overflow:
    any shift ``c`` per query gives the same ratio while nothing overflows, so
    ``c`` is the first block's maximum, folded into ``[q, -c] · [k, 1]`` with
    ``K1 = [K, 1]``; a block whose sums ``p @ [V, 1]`` pass 2**32 is redone."""
    qa = np.concatenate([q, np.zeros((len(q), 1), q.dtype)], 1)   # [q, -c]
    buffer = np.empty((len(q), min(block_k, len(K1))), q.dtype)
    acc = None                                            # [Σ p·v, Σ p]
    for k0 in range(0, len(K1), block_k):
        keys = slice(k0, k0 + block_k)
        s = buffer[:, :len(K1[keys])]                     # (bq, bk)
        np.matmul(qa, K1[keys].T, out=s)                  # q·k - c
        if acc is not None:
            part = np.exp(s, out=s) @ V1[keys]
            if np.isfinite(part).all() and part[:, -1].max() <= 2.0**32:
                acc += part
                continue
            np.matmul(qa, K1[keys].T, out=s)              # redo this block
        # raise c by up: to the first block's maximum, then never lower it
        up = np.maximum(s.max(axis=-1), -np.inf if acc is None else 0)
        part = np.exp(np.subtract(s, up[:, None], out=s), out=s) @ V1[keys]
        acc = part if acc is None else acc * np.exp(-up)[:, None] + part
        qa[:, -1] -= up                                   # c <- c + up
    return acc[:, :-1] / acc[:, -1:] if np.isfinite(acc).all() else None


@boundary(**_QKV, block_q=positive_int(), block_k=positive_int(),
          workers=positive_int())
def fast_blockwise_attention(Q, K, V, mask=None, scale=None, block_q=1024,
                             block_k=256, workers=1):
    """:func:`blockwise_attention`'s result, tuned: query blocks run on
    ``workers`` threads and, unmasked, each query keeps its first block's
    maximum as its shift until a later block would overflow (chapter 7)."""
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    dtype = np.result_type(Q, K, V)
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    Qs, K, V = (x.astype(dtype, copy=False) for x in (Q * scale, K, V))
    K1, V1 = (np.concatenate([x, np.ones(x.shape[:-1] + (1,), dtype)], -1)
              for x in (K, V))                            # [K, 1], [V, 1]
    Qs, K, V, K1, V1 = (np.broadcast_to(x, batch + x.shape[-2:])
                        for x in (Qs, K, V, K1, V1))
    if mask is not None:
        mask = np.broadcast_to(mask, Qs.shape[:-1] + K.shape[-2:-1])
    Y = np.empty(Qs.shape[:-1] + V.shape[-1:], dtype)

    def task(b, start):                 # one batch index, one query block
        rows = b + (slice(start, start + block_q),)
        y = None
        if mask is None:
            with np.errstate(over="ignore", invalid="ignore"):
                y = _lazy_rows(Qs[rows], K1[b], V1[b], block_k)
        if y is None:                   # a mask, or an overflow: the loop
            y = blockwise_attention(Qs[rows], K[b], V[b], None if mask is
                                    None else mask[rows], 1.0, block_k)
        Y[rows] = y

    tasks = [(b, start) for b in np.ndindex(*batch)
             for start in range(0, Qs.shape[-2], block_q)]
    with threadpool_limits(1 if workers > 1 else None, "blas"), \
            ThreadPoolExecutor(min(workers, len(tasks))) as pool:
        list(pool.map(task, *zip(*tasks)))      # re-raises a worker's error
    return Y
