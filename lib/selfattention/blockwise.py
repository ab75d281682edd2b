"""Exact attention in blocks, with an online softmax (chapter 6).

:func:`blockwise_attention` returns the same outputs as
:func:`selfattention.attention.attention` but never holds the ``n_q × n_k``
score matrix. It walks over the keys one block at a time and keeps, for every
query, three running quantities (Milakov and Gimelshein, 2018; Rabe and
Staats, 2021; Dao et al., 2022):

* ``m``, the largest score seen so far,
* ``l``, the sum of ``exp(s - m)`` over the keys seen so far,
* ``acc``, the sum of ``exp(s - m) · v`` over the same keys.

When a new block raises the maximum from ``m`` to ``m'``, the old sums are
rescaled by ``exp(m - m')``, so at the end ``acc / l`` is exactly the softmax
average of the values. Memory is ``O(block_q · block_k)`` per worker instead
of ``O(n_q · n_k)``; the number of operations is unchanged, still quadratic.
"""

from __future__ import annotations

import contextlib
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._legacy import (as_bool_mask, broadcast_shape, broadcasts_to,
                        check_qkv, every_query_has_a_key, positive_int,
                        positive_scale)

__all__ = ["blockwise_attention", "online_softmax_update"]


def online_softmax_update(m, l, acc, S, V):
    """Fold one block of scores into the running max, sum and output.

    Parameters
    ----------
    m : ndarray, shape (n_q,)
        Running maximum score of each query (``-inf`` before any key).
    l : ndarray, shape (n_q,)
        Running sum of ``exp(s - m)``.
    acc : ndarray, shape (n_q, d_v)
        Running sum of ``exp(s - m) · v``.
    S : ndarray, shape (n_q, b)
        Scaled scores of the queries against a block of ``b`` keys
        (``-inf`` where a key is masked).
    V : ndarray, shape (b, d_v)
        The values of that block.

    Returns
    -------
    m, l, acc : ndarray
        The updated running quantities (new arrays; the inputs are not
        changed). After the last block, ``acc / l[:, None]`` is the output.
    """
    m_new = np.maximum(m, S.max(axis=-1))                 # (n_q,)
    # A query that has seen only masked keys keeps m = -inf; shift by 0
    # instead so that exp(-inf - (-inf)) never produces NaN.
    shift = np.where(np.isneginf(m_new), 0.0, m_new).astype(S.dtype)
    P = np.exp(S - shift[:, None])                        # (n_q, b)
    alpha = np.exp(m - shift)                             # rescales old sums
    return (m_new, l * alpha + P.sum(axis=-1),
            acc * alpha[:, None] + P @ V)


def blockwise_attention(Q, K, V, mask=None, scale=None, block_q: int = 1024,
                        block_k: int = 256, workers: int = 1):
    """Exact scaled dot-product attention without the full score matrix.

    Same result as ``attention(Q, K, V, mask, scale=scale)[0]`` (chapter 1)
    up to rounding, computed block by block with an online softmax
    (chapter 6). The weights ``A`` are never formed, so only ``Y`` is
    returned.

    Parameters
    ----------
    Q : array_like, shape (..., n_q, d_k)
        Queries.
    K : array_like, shape (..., n_k, d_k)
        Keys.
    V : array_like, shape (..., n_k, d_v)
        Values. Leading dimensions of ``Q``, ``K`` and ``V`` broadcast.
    mask : array_like of bool, broadcastable to (..., n_q, n_k), optional
        True where query ``i`` may use key ``j``. It is read one block at a
        time through a broadcast view, so a small mask (for example of shape
        ``(n_q, n_k)`` shared over the batch) costs no copy.
    scale : float, optional
        Multiplies ``Q Kᵀ``; the default divides by ``√d_k``.
    block_q : int
        Queries per block. A block of queries is one task for a worker.
    block_k : int
        Keys per block. Each worker holds one ``block_q × block_k`` score
        block at a time; the defaults (1 MB in float32) fit a core's cache.
    workers : int
        Threads that process query blocks concurrently. NumPy releases the
        interpreter lock inside matrix products and element-wise functions
        on large arrays, so 2 workers use both cores of a 2-core machine.
        While they run, the BLAS library is asked (through ``threadpoolctl``,
        if installed) to use one thread per call, so that the workers do not
        compete with BLAS's own threads.

    Returns
    -------
    Y : ndarray, shape (..., n_q, d_v)
        Outputs, in float32 if every input is float32, else float64.

    Raises
    ------
    TypeError
        If an input is not numeric, ``mask`` is not boolean, or a block size
        or ``workers`` is not an integer.
    ValueError
        If shapes do not fit together, an input is not finite, ``scale`` is
        not a positive finite number, a block size or ``workers`` is not
        positive, or ``mask`` leaves a query with no key.
    """
    block_q = positive_int(block_q, "block_q")
    block_k = positive_int(block_k, "block_k")
    workers = positive_int(workers, "workers")
    Q, K, V = check_qkv(Q, K, V)
    batch = broadcast_shape(Q.shape[:-2], K.shape[:-2], ("Q", "K"))
    batch = broadcast_shape(batch, V.shape[:-2], ("Q and K", "V"))
    n_q, d_k = Q.shape[-2:]
    n_k, d_v = V.shape[-2:]
    dtype = np.result_type(Q.dtype, K.dtype, V.dtype)
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    else:
        scale = positive_scale(scale)
    if mask is not None:
        mask = as_bool_mask(mask, "mask")
        full = batch + (n_q, n_k)
        if not broadcasts_to(mask.shape, full):
            raise ValueError(
                f"mask must broadcast to the score shape {full} (last two "
                f"axes (n_q, n_k) = {(n_q, n_k)}), got shape {mask.shape}")
        every_query_has_a_key(mask, "NaN there")
        mask = np.broadcast_to(mask, full)

    # Fold the scale into the queries once, and append a column of ones to
    # the values: P @ [V, 1] then yields the running sum l as its last
    # column, saving a separate pass over every score block.
    Qs = np.broadcast_to((Q * scale).astype(dtype, copy=False),
                         batch + (n_q, d_k))
    K = K.astype(dtype, copy=False)
    Kb = np.broadcast_to(K, batch + (n_k, d_k))
    ones = np.ones(V.shape[:-1] + (1,), dtype=dtype)
    V1 = np.broadcast_to(np.concatenate([V.astype(dtype, copy=False), ones],
                                        axis=-1), batch + (n_k, d_v + 1))
    # [K, 1] lets the product [q, -c] @ [K, 1]ᵀ subtract a shift c per query.
    K1 = np.broadcast_to(np.concatenate(
        [K, np.ones(K.shape[:-1] + (1,), dtype=dtype)], axis=-1),
        batch + (n_k, d_k + 1))
    Y = np.empty(batch + (n_q, d_v), dtype=dtype)

    def exact(b, start, stop):
        """Eq. (eq-cost-online) as written: the true running max m."""
        q = Qs[b + (slice(start, stop),)]                 # (bq, d_k)
        m = np.full(stop - start, -np.inf, dtype=dtype)   # running max
        acc = np.zeros((stop - start, d_v + 1), dtype=dtype)  # [Σ p·v, Σ p]
        S = np.empty((stop - start, min(block_k, n_k)), dtype=dtype)
        for k0 in range(0, n_k, block_k):
            k1 = min(k0 + block_k, n_k)
            s = S[:, :k1 - k0]
            np.matmul(q, Kb[b + (slice(k0, k1),)].T, out=s)  # (bq, bk)
            if mask is not None:
                allowed = mask[b + (slice(start, stop), slice(k0, k1))]
                np.copyto(s, -np.inf, where=~allowed)
            m_new = np.maximum(m, s.max(axis=-1))         # running max
            shift = m_new
            if mask is not None:     # rows with no allowed key so far
                shift = np.where(np.isneginf(m_new), 0.0, m_new).astype(dtype)
            np.subtract(s, shift[:, None], out=s)
            np.exp(s, out=s)                              # p = exp(s - m')
            acc *= np.exp(m - shift)[:, None]             # rescale old sums
            acc += s @ V1[b + (slice(k0, k1),)]           # (bq, d_v + 1)
            m = m_new
        return acc

    def lazy(b, start, stop):
        """The same sums with a shift c that changes only when it must.

        Any per-query shift gives the same ratio acc / l, as long as no
        exponential overflows. Taking c from the first block and folding it
        into the product saves two passes over every later block (the max
        and the subtraction); a block whose scores exceed c by so much that
        its sum passes 2**32 (or overflows) is redone with the exact
        rescaling, which raises c to that block's maximum.
        """
        qa = np.empty((stop - start, d_k + 1), dtype=dtype)   # [q, -c]
        qa[:, :d_k] = Qs[b + (slice(start, stop),)]
        qa[:, d_k] = 0.0
        S = np.empty((stop - start, min(block_k, n_k)), dtype=dtype)
        acc = c = None
        for k0 in range(0, n_k, block_k):
            k1 = min(k0 + block_k, n_k)
            s = S[:, :k1 - k0]
            kb, vb = K1[b + (slice(k0, k1),)], V1[b + (slice(k0, k1),)]
            np.matmul(qa, kb.T, out=s)                    # s - c, (bq, bk)
            if c is None:                                 # first block
                c = s.max(axis=-1)
                np.subtract(s, c[:, None], out=s)
                np.exp(s, out=s)
                acc = s @ vb                              # (bq, d_v + 1)
                qa[:, d_k] = -c
                continue
            np.exp(s, out=s)
            part = s @ vb
            if np.isfinite(part).all() and part[:, d_v].max() <= 2.0**32:
                acc += part
                continue
            np.matmul(qa, kb.T, out=s)                    # redo this block
            up = np.maximum(s.max(axis=-1), 0)
            np.subtract(s, up[:, None], out=s)
            np.exp(s, out=s)
            acc *= np.exp(-up)[:, None]
            acc += s @ vb
            c = c + up
            qa[:, d_k] = -c
        return acc

    def run(task):
        b, start = task
        stop = min(start + block_q, n_q)
        acc = None
        if mask is None:
            with np.errstate(over="ignore", invalid="ignore"):
                acc = lazy(b, start, stop)
        if acc is None or not np.isfinite(acc).all():
            acc = exact(b, start, stop)
        Y[b + (slice(start, stop),)] = acc[:, :d_v] / acc[:, d_v:]

    tasks = [(b, start) for b in np.ndindex(*batch)
             for start in range(0, n_q, block_q)]
    if workers == 1 or len(tasks) == 1:
        for task in tasks:
            run(task)
    else:
        with _one_blas_thread(), ThreadPoolExecutor(
                max_workers=min(workers, len(tasks))) as pool:
            for _ in pool.map(run, tasks):   # re-raises a worker's error
                pass
    return Y


_CONTROLLER = []


def _one_blas_thread():
    """Limit BLAS to one thread per call while our own threads run."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl comes with sklearn
        return contextlib.nullcontext()
    if not _CONTROLLER:             # inspecting the loaded libraries is slow
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")
