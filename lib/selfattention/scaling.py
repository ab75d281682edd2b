"""Why scores are divided by √d_k: growth, saturation, gradients
(:ref:`ch-scaling`
and :ref:`ch-misconceptions`)."""

import math
from dataclasses import dataclass

import numpy as np

from ._validate import (boundary, floats, generator, positive, positive_int,
                        require, sequence)
from .attention import softmax

__all__ = ["softmax_jacobian", "jacobian_norm", "LogitStats", "logit_stats",
           "scaling_experiment"]


def _weight_rows(p) -> None:
    """Every row of ``p`` holds non-negative weights summing to one."""
    sums = p.sum(axis=-1)
    require((p >= 0).all() and np.allclose(sums, 1.0, rtol=0, atol=1e-6),
            f"p must hold non-negative rows summing to one, got row sums "
            f"{sums.min():.3g} to {sums.max():.3g} and smallest entry "
            f"{p.min():.3g}")


@boundary(p=floats(min_ndim=1), checks=(_weight_rows,))
def softmax_jacobian(p):
    """Jacobian of the softmax at weights ``p``: ``diag(p) - p pᵀ``, one (n, n)
    matrix ``∂p_i / ∂s_j`` per row of ``p`` (..., n) (:ref:`ch-scaling`)."""
    eye = np.eye(p.shape[-1], dtype=p.dtype)
    return p[..., :, None] * (eye - p[..., None, :])       # (..., n, n)


@boundary(p=floats(min_ndim=1), checks=(_weight_rows,))
def jacobian_norm(p):
    """Frobenius norm of each row's softmax Jacobian: 0 for a one-hot row,
    ``√(n-1)/n`` for a uniform one (:ref:`ch-scaling`)."""
    J = softmax_jacobian(p)                                # (..., n, n)
    return np.sqrt((J ** 2).sum(axis=(-2, -1)))            # (...)


@dataclass(frozen=True)
class LogitStats:
    """Saturation of raw scores, unscaled (``_raw``) and divided by √d_k."""

    d_k: int
    logit_std: float            # standard deviation of the raw scores
    max_weight_raw: float       # mean over rows of the largest weight
    max_weight_scaled: float
    jacobian_raw: float         # mean over rows of jacobian_norm
    jacobian_scaled: float


@boundary(S=floats(min_ndim=2), d_k=positive_int())
def logit_stats(S, d_k):
    """How saturated raw scores ``S = Q Kᵀ`` are, with and without √d_k."""
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
    """Random query and key projections of tokens for several ``d_k``: for each
    in turn, query then key weights (N, p, d_k) for the token sets ``T``
    (N, n, p), and the :func:`logit_stats` of their scores
    (:ref:`ch-scaling`)."""
    N, _, p = T.shape
    stats = []
    for d_k in d_ks:
        Gq = rng.standard_normal((N, p, d_k)) * weight_scale    # (N, p, d_k)
        Gk = rng.standard_normal((N, p, d_k)) * weight_scale    # (N, p, d_k)
        Q, K = T @ Gq, T @ Gk                                   # (N, n, d_k)
        S = Q @ np.swapaxes(K, -1, -2)                          # (N, n, n)
        stats.append(logit_stats(S, d_k))
    return stats
