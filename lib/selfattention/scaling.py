"""Why scores are divided by √d_k: growth, saturation, gradients (chapter 2).

A dot product of two vectors with ``d_k`` independent components of mean 0
and variance 1 has variance ``d_k``, so raw scores spread out as ``√d_k``.
Wide scores push each softmax row toward a one-hot vector, where its
Jacobian ``diag(p) - p pᵀ`` vanishes and little gradient flows back. This
module measures both effects; chapter 2 runs it on digit patches and
chapter 11 uses it again against the "tuned temperature" misconception.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._validate import (boundary, floats, generator, positive, positive_int,
                        sequence)
from .attention import softmax

__all__ = ["softmax_jacobian", "jacobian_norm", "LogitStats", "logit_stats",
           "scaling_experiment"]


def _weights(args) -> None:
    p = args["p"]
    if (p < 0).any() or not np.allclose(p.sum(axis=-1), 1.0, rtol=0,
                                        atol=1e-6):
        raise ValueError(
            f"p must hold softmax weights along its last axis (non-negative, "
            f"each row summing to one), got row sums between "
            f"{p.sum(axis=-1).min():.3g} and {p.sum(axis=-1).max():.3g} and "
            f"smallest entry {p.min():.3g}")


@boundary(p=floats(min_ndim=1), checks=(_weights,))
def softmax_jacobian(p):
    """Jacobian of the softmax at weights ``p``: ``diag(p) - p pᵀ`` (chapter 2).

    Entry ``(i, j)`` is ``∂p_i / ∂s_j`` for ``p = softmax(s)``. Every entry
    is a multiple of some ``p_i``, and of ``1 - p_i`` on the diagonal, so all
    of them vanish as ``p`` approaches a one-hot vector.

    Parameters
    ----------
    p : array_like, shape (..., n)
        Softmax weights, one distribution per row.

    Returns
    -------
    J : ndarray, shape (..., n, n)
        One symmetric Jacobian per row; each of its rows sums to zero.

    Raises
    ------
    TypeError
        If ``p`` is not an array of real numbers.
    ValueError
        If ``p`` is not finite, or its rows are not non-negative and summing
        to one.
    """
    eye = np.eye(p.shape[-1], dtype=p.dtype)
    return p[..., :, None] * (eye - p[..., None, :])       # (..., n, n)


@boundary(p=floats(min_ndim=1), checks=(_weights,))
def jacobian_norm(p):
    """Frobenius norm of each row's softmax Jacobian (chapter 2).

    A single number for "how much gradient this row can pass back":
    ``‖diag(p) - p pᵀ‖_F``. It is 0 for a one-hot row, ``√(n-1)/n`` for a
    uniform row of ``n`` weights, and largest (1/2) for two equal weights.

    Parameters
    ----------
    p : array_like, shape (..., n)
        Softmax weights.

    Returns
    -------
    norms : ndarray, shape (...)
        One norm per row; average them for a whole score matrix.

    Raises
    ------
    TypeError, ValueError
        As :func:`softmax_jacobian`.
    """
    J = softmax_jacobian(p)                                # (..., n, n)
    return np.sqrt((J ** 2).sum(axis=(-2, -1)))            # (...)


@dataclass(frozen=True)
class LogitStats:
    """Saturation of one set of raw scores, unscaled and scaled by 1/√d_k.

    Attributes
    ----------
    d_k : int
        Key width.
    logit_std : float
        Standard deviation of the raw scores ``Q Kᵀ``.
    max_weight_raw, max_weight_scaled : float
        Mean over rows of the largest weight of ``softmax(S)`` and of
        ``softmax(S / √d_k)``.
    jacobian_raw, jacobian_scaled : float
        Mean over rows of :func:`jacobian_norm` for the same two softmaxes.
    """

    d_k: int
    logit_std: float
    max_weight_raw: float
    max_weight_scaled: float
    jacobian_raw: float
    jacobian_scaled: float


@boundary(S=floats(min_ndim=2), d_k=positive_int())
def logit_stats(S, d_k):
    """Summarise how saturated raw scores are, with and without √d_k.

    Parameters
    ----------
    S : array_like, shape (..., n_q, n_k)
        Raw scores ``Q Kᵀ`` (not yet divided by anything).
    d_k : int
        Key width used to form ``S``.

    Returns
    -------
    LogitStats

    Raises
    ------
    TypeError, ValueError
        If ``S`` is not a finite array with at least 2 dimensions, or
        ``d_k`` is not a positive integer.
    """
    p_raw = softmax(S)                                      # (..., n_q, n_k)
    p_scaled = softmax(S / math.sqrt(d_k))
    return LogitStats(
        d_k=d_k,
        logit_std=float(S.std()),
        max_weight_raw=float(p_raw.max(axis=-1).mean()),
        max_weight_scaled=float(p_scaled.max(axis=-1).mean()),
        jacobian_raw=float(jacobian_norm(p_raw).mean()),
        jacobian_scaled=float(jacobian_norm(p_scaled).mean()),
    )


@boundary(T=floats(ndim=3), d_ks=sequence(positive_int()), rng=generator(),
          weight_scale=positive())
def scaling_experiment(T, d_ks, rng, weight_scale=0.5):
    """Random query and key projections of tokens for several ``d_k``.

    For each ``d_k`` in order, draws query weights and then key weights,
    each ``rng.standard_normal((N, p, d_k)) * weight_scale`` (fresh weights
    for every one of the ``N`` token sets), forms ``Q = T Gq``, ``K = T Gk``
    and summarises ``S = Q Kᵀ`` with :func:`logit_stats`. With standardized
    tokens of ``p = 4`` components and ``weight_scale = 1/2``, the entries of
    ``Q`` and ``K`` have variance about 1, as the √d_k argument assumes.
    Chapter 2 runs it on :func:`selfattention.patches.digit_patch_tokens`.

    Parameters
    ----------
    T : array_like, shape (N, n, p)
        ``N`` sets of ``n`` tokens of width ``p``.
    d_ks : sequence of int
        Key widths, in the order their weights are drawn.
    rng : numpy.random.Generator
        Source of the weights; the draws depend on its state.
    weight_scale : float
        Standard deviation of the weight entries.

    Returns
    -------
    list of LogitStats
        One per ``d_k``, in order.

    Raises
    ------
    TypeError, ValueError
        If ``T`` is not a finite 3-D array, ``rng`` is not a Generator, a
        ``d_k`` is not a positive integer or ``weight_scale`` is not a
        positive finite number.
    """
    N, _, p = T.shape
    stats = []
    for d_k in d_ks:
        Gq = rng.standard_normal((N, p, d_k)) * weight_scale    # (N, p, d_k)
        Gk = rng.standard_normal((N, p, d_k)) * weight_scale    # (N, p, d_k)
        Q, K = T @ Gq, T @ Gk                                   # (N, n, d_k)
        S = Q @ np.swapaxes(K, -1, -2)                          # (N, n, n)
        stats.append(logit_stats(S, d_k))
    return stats
