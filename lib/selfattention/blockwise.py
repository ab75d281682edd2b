"""Exact attention in blocks, with an online softmax (chapter 7).

:func:`blockwise_attention` returns the same outputs as
:func:`selfattention.attention.attention` but never holds the ``n_q × n_k``
score matrix. It walks over the keys one block at a time and keeps, for every
query, three running quantities (Milakov and Gimelshein, 2018; Rabe and
Staats, 2021; Dao et al., 2022):

* ``m``, the largest score seen so far,
* ``l``, the sum of ``exp(s - m)`` over the keys seen so far,
* ``acc``, the sum of ``exp(s - m) · v`` over the same keys.

When a new block raises the maximum from ``m`` to ``m'``, the old sums are
rescaled by ``exp(m - m')`` (:func:`online_softmax_update`), so at the end
``acc / l`` is exactly the softmax average of the values. Memory is
``O(n_q · block)`` instead of ``O(n_q · n_k)``; the number of operations is
unchanged, still quadratic.

:func:`fast_blockwise_attention` computes the same result tuned for speed:
query blocks spread over threads, and a shift that changes only when it must
(tested equal to :func:`blockwise_attention`).
"""

from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._validate import (boundary, bools, floats, optional, positive,
                        positive_int)
from .attention import _qkv_fit, every_query_has_a_key, fits_scores

__all__ = ["online_softmax_update", "blockwise_attention",
           "fast_blockwise_attention"]


def _running_fit(args) -> None:
    m, l, acc, S, V = (args[k] for k in ("m", "l", "acc", "S", "V"))
    if l.shape != m.shape or acc.shape[:-1] != m.shape \
            or S.shape[:-1] != m.shape:
        raise ValueError(f"m, l, acc and S must share the queries' shape "
                         f"(..., n_q), got m {m.shape}, l {l.shape}, acc "
                         f"{acc.shape} and S {S.shape}")
    if V.shape[-2:] != (S.shape[-1], acc.shape[-1]):
        raise ValueError(f"V must hold one value of width d_v = "
                         f"{acc.shape[-1]} per key of the block, "
                         f"({S.shape[-1]}, {acc.shape[-1]}), got shape "
                         f"{V.shape}")


@boundary(m=floats(min_ndim=1, neg_inf=True), l=floats(min_ndim=1),
          acc=floats(min_ndim=2), S=floats(min_ndim=2, neg_inf=True),
          V=floats(min_ndim=2), checks=(_running_fit,))
def online_softmax_update(m, l, acc, S, V):
    """Fold one block of scores into the running max, sum and output.

    Parameters
    ----------
    m : ndarray, shape (..., n_q)
        Running maximum score of each query (``-inf`` before any key).
    l : ndarray, shape (..., n_q)
        Running sum of ``exp(s - m)``.
    acc : ndarray, shape (..., n_q, d_v)
        Running sum of ``exp(s - m) · v``.
    S : ndarray, shape (..., n_q, b)
        Scaled scores of the queries against a block of ``b`` keys
        (``-inf`` where a key is masked).
    V : ndarray, shape (..., b, d_v)
        The values of that block.

    Returns
    -------
    m, l, acc : ndarray
        The updated running quantities (new arrays; the inputs are not
        changed). After the last block, ``acc / l[..., None]`` is the output.
    """
    m_new = np.maximum(m, S.max(axis=-1))                 # (..., n_q)
    # A query that has seen only masked keys keeps m = -inf; shift it by 0
    # instead, so that exp(-inf - (-inf)) never produces NaN.
    shift = np.where(np.isneginf(m_new), 0, m_new).astype(S.dtype)
    P = np.exp(S - shift[..., None])                      # (..., n_q, b)
    alpha = np.exp(m - shift)                             # rescales old sums
    return m_new, l * alpha + P.sum(axis=-1), acc * alpha[..., None] + P @ V


_QKV = dict(Q=floats(min_ndim=2), K=floats(min_ndim=2), V=floats(min_ndim=2),
            mask=optional(bools()), scale=optional(positive()))
_CHECKS = (_qkv_fit, fits_scores("mask"), every_query_has_a_key())


@boundary(**_QKV, block=positive_int(), checks=_CHECKS)
def blockwise_attention(Q, K, V, mask=None, scale=None, block=256):
    """Exact attention, one block of keys at a time: no n_q × n_k matrix.

    Same result as ``attention(Q, K, V, mask, scale=scale)[0]`` (chapter 1)
    up to rounding; the weights ``A`` are never formed, so only ``Y`` is
    returned (chapter 7, Eq. ``eq-cost-online``).

    Parameters
    ----------
    Q : array_like, shape (..., n_q, d_k)
        Queries.
    K : array_like, shape (..., n_k, d_k)
        Keys.
    V : array_like, shape (..., n_k, d_v)
        Values. Leading dimensions of ``Q``, ``K`` and ``V`` broadcast.
    mask : array_like of bool, broadcastable to (..., n_q, n_k), optional
        True where query ``i`` may use key ``j``; read one block at a time
        through a broadcast view, so a shared mask costs no copy.
    scale : float, optional
        Multiplies ``Q Kᵀ``; the default divides by ``√d_k``.
    block : int
        Keys per block: the loop holds ``n_q × block`` scores at a time.

    Returns
    -------
    Y : ndarray, shape (..., n_q, d_v)
        Outputs, in float32 if every input is float32, else float64.

    Raises
    ------
    TypeError
        If an input is not numeric, ``mask`` is not boolean, or ``block`` is
        not an integer.
    ValueError
        If shapes do not fit together, an input is not finite, ``scale`` is
        not a positive finite number, ``block`` is not positive, or ``mask``
        leaves a query with no key.
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
def _exact_rows(q, K, V1, mask, block_k):
    """Eq. ``eq-cost-online`` for one block of queries, in place.

    ``q`` (bq, d_k) holds scaled queries, ``V1 = [V, 1]`` (n_k, d_v + 1), so
    that ``p @ V1`` yields ``[Σ p·v, Σ p]`` in one product.
    """
    m = np.full(len(q), -np.inf, q.dtype)                 # running max
    acc = np.zeros((len(q), V1.shape[1]), q.dtype)        # [Σ p·v, Σ p]
    buffer = np.empty((len(q), min(block_k, len(K))), q.dtype)
    for k0 in range(0, len(K), block_k):
        keys = slice(k0, k0 + block_k)
        s = buffer[:, :len(K[keys])]
        np.matmul(q, K[keys].T, out=s)                    # (bq, bk)
        if mask is not None:
            np.copyto(s, -np.inf, where=~mask[:, keys])
        m_new = np.maximum(m, s.max(axis=-1))
        shift = np.where(np.isneginf(m_new), 0, m_new).astype(q.dtype)
        np.subtract(s, shift[:, None], out=s)
        np.exp(s, out=s)                                  # p = exp(s - m')
        acc *= np.exp(m - shift)[:, None]                 # rescale old sums
        acc += s @ V1[keys]
        m = m_new
    return acc


def _lazy_rows(q, K1, V1, block_k):
    """The sums of :func:`_exact_rows` with a shift ``c`` that changes only
    when it must, or None if an exponential overflowed.

    Any per-query shift gives the same ratio acc / l as long as no
    exponential overflows. Taking ``c`` from the first block and folding it
    into the product, ``[q, -c] @ [K, 1]ᵀ = q·k - c``, saves two passes
    over every later block (the max and the subtraction); a block whose sum
    passes 2**32 (or overflows) is redone with the exact rescaling, which
    raises ``c`` to that block's maximum.
    """
    d_k = q.shape[1]
    qa = np.zeros((len(q), d_k + 1), q.dtype)             # [q, -c]
    qa[:, :d_k] = q
    buffer = np.empty((len(q), min(block_k, len(K1))), q.dtype)
    acc = None
    for k0 in range(0, len(K1), block_k):
        keys = slice(k0, k0 + block_k)
        s = buffer[:, :len(K1[keys])]
        np.matmul(qa, K1[keys].T, out=s)                  # q·k - c, (bq, bk)
        if acc is not None:
            np.exp(s, out=s)
            part = s @ V1[keys]
            if np.isfinite(part).all() and part[:, -1].max() <= 2.0**32:
                acc += part
                continue
            np.matmul(qa, K1[keys].T, out=s)              # redo this block
        up = s.max(axis=-1)                               # raise c by up
        if acc is not None:
            up = np.maximum(up, 0)
        np.subtract(s, up[:, None], out=s)
        np.exp(s, out=s)
        if acc is None:                                   # the first block
            acc = s @ V1[keys]
        else:
            acc *= np.exp(-up)[:, None]
            acc += s @ V1[keys]
        qa[:, d_k] -= up                                  # c <- c + up
    return acc if np.isfinite(acc).all() else None


def _tuned_block(Qs, K, V1, K1, mask, Y, block_q, block_k, task):
    """Fill the output rows of one (batch index, query block) task."""
    b, start = task
    rows = b + (slice(start, start + block_q),)
    acc = None
    if mask is None:
        with np.errstate(over="ignore", invalid="ignore"):
            acc = _lazy_rows(Qs[rows], K1[b], V1[b], block_k)
    if acc is None:
        acc = _exact_rows(Qs[rows], K[b], V1[b],
                          None if mask is None else mask[rows], block_k)
    Y[rows] = acc[:, :-1] / acc[:, -1:]


@boundary(**_QKV, block_q=positive_int(), block_k=positive_int(),
          workers=positive_int(), checks=_CHECKS)
def fast_blockwise_attention(Q, K, V, mask=None, scale=None, block_q=1024,
                             block_k=256, workers=1):
    """:func:`blockwise_attention`'s result, tuned: threads, a lazy shift.

    Query blocks are independent tasks, spread over ``workers`` threads
    (NumPy releases the interpreter lock inside its products and
    exponentials; BLAS is held to one thread per call meanwhile, through
    ``threadpoolctl``). Without a mask, each query keeps the maximum of its
    first key block as its shift and raises it only when a later block's
    sums would grow too large, saving two passes over every block. Used by
    chapter 7's pixel-level run and ``scripts/bench_attention.py``.

    Parameters
    ----------
    Q, K, V, mask, scale
        As :func:`blockwise_attention`.
    block_q : int
        Queries per task.
    block_k : int
        Keys per block; each task holds one ``block_q × block_k`` score block
        (the defaults, 1 MB in float32, fit a core's cache).
    workers : int
        Threads; 2 use both cores of a 2-core machine.

    Returns
    -------
    Y : ndarray, shape (..., n_q, d_v)
        As :func:`blockwise_attention`.
    """
    n_q, n_k = Q.shape[-2], K.shape[-2]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    dtype = np.result_type(Q, K, V)
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    Qs = np.broadcast_to((Q * scale).astype(dtype, copy=False),
                         batch + Q.shape[-2:])            # scaled once
    K = K.astype(dtype, copy=False)
    K1, V1 = (np.concatenate([x.astype(dtype, copy=False),
                              np.ones(x.shape[:-1] + (1,), dtype)], axis=-1)
              for x in (K, V))                            # [K, 1], [V, 1]
    K, K1, V1 = (np.broadcast_to(x, batch + x.shape[-2:]) for x in (K, K1,
                                                                    V1))
    if mask is not None:
        mask = np.broadcast_to(mask, batch + (n_q, n_k))
    Y = np.empty(batch + (n_q, V.shape[-1]), dtype)
    run = functools.partial(_tuned_block, Qs, K, V1, K1, mask, Y, block_q,
                            block_k)
    tasks = [(b, start) for b in np.ndindex(*batch)
             for start in range(0, n_q, block_q)]
    if workers == 1 or len(tasks) == 1:
        for task in tasks:
            run(task)
    else:
        with _one_blas_thread(), ThreadPoolExecutor(
                min(workers, len(tasks))) as pool:
            list(pool.map(run, tasks))      # re-raises a worker's error
    return Y


@functools.cache
def _blas_controller():
    """Inspecting the loaded libraries is slow: do it once."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread():
    """Limit BLAS to one thread per call while our own threads run."""
    return _blas_controller().limit(limits=1, user_api="blas")
