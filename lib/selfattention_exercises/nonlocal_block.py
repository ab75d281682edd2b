"""Exercises of :ref:`ch-nonlocal`, Non-local blocks."""

from __future__ import annotations

import numpy as np

from .core import GRADIENTS, Exercise, call

__all__ = ["check_gate_gradients", "check_subsampled", "check_denoising"]


# ------------------------------------------------------------------ 9.1
#: The sizes (N, C, d_v) of 9.1's wide clip: the chain rule costs a few
#: matrix products, milliseconds; differences of the loss need a pass per
#: entry of W_g (C · d_v = 81920 of them, each a forward pass), which no
#: time limit holds.
WIDE_GATE = (256, 320, 256)


def wide_gate_case(seed, N, C, d):
    """``x, F, W_g, W_z, target`` of 9.1's wide clip, drawn from ``seed``
    (built where it is used, so that it never travels)."""
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((N, N))
    F = np.exp(S - S.max(axis=1, keepdims=True))
    return (rng.standard_normal((N, C)), F / F.sum(axis=1, keepdims=True),
            rng.standard_normal((C, d)) / np.sqrt(C),
            rng.standard_normal((d, C)) / np.sqrt(d),
            rng.standard_normal((N, C)))


def _gate_run(my_gate_gradients, x=None, F=None, W_g=None, W_z=None,
              gamma=None, target=None, seed=None, sizes=None):
    if x is None:
        x, F, W_g, W_z, target = wide_gate_case(seed, *sizes)
    return call(my_gate_gradients, x, F, W_g, W_z, gamma, target,
                what="my_gate_gradients")


check_gate_gradients = Exercise(
    "ex-nonlocal-gate-gradients", kind="Derive", points=3,
    answers=("my_gate_gradients",), run=_gate_run,
    # Autograd computes the gradients the exercise asks to derive.
    references=GRADIENTS,
    seed=91,
    written="why do W_θ and W_φ also receive exactly zero at γ = 0, and "
            "what is dL/dW_θ at the second step, to first order in γ?",
    written_points=2,
    success="dγ = Σ dL/dz ⊙ u, and both weight gradients carry the factor "
            "γ, so they vanish while the gate is shut.",
    doc="Exercise 10.1: the gradients of γ, W_g and W_z, for any γ.")


# ------------------------------------------------------------------ 9.2
def _sub_run(my_subsampled, X, W_theta, W_phi, W_g):
    return call(my_subsampled, X, W_theta, W_phi, W_g, what="my_subsampled")


check_subsampled = Exercise(
    "ex-nonlocal-subsampled", kind="Implement", points=1,
    written="count the multiply-adds with x pooled before the embeddings "
            "and with φ, g pooled after: what does pooling first save, and "
            "when is that a large share?",
    written_points=1,
    answers=("my_subsampled",), run=_sub_run,
    seed=92,
    success="every position queries a quarter as many keys: φ and g "
            "max-pooled over 2 × 2 blocks of each frame.",
    doc="Exercise 10.2: the non-local operation with pooled keys and values.")


# ------------------------------------------------------------------ 9.3
def _noise_run(my_denoising_errors, seed, noise):
    first = call(my_denoising_errors, seed, noise, what="my_denoising_errors")
    return first, call(my_denoising_errors, seed, noise,
                       what="my_denoising_errors")


check_denoising = Exercise(
    # Numbers a student could make up within the accepted ranges: the
    # points go to the written part, which the instructor reads.
    "ex-nonlocal-denoising", kind="Experiment", points=0,
    answers=("my_denoising_errors",), run=_noise_run,
    seed=93,
    written="which scope gave the lowest error and which the highest, "
            "why, would other weights change that order, and when would "
            "time only be the right choice?",
    written_points=4,
    success="the measured errors are reproducible and the noisy clip's "
            "error is right; the order of the scopes is yours to explain.",
    doc="Exercise 10.3: denoising the clip with each scope, measured.")
