"""The judges of :ref:`ch-nonlocal`, Non-local blocks: hidden cases, judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import numpy as np
from selfattention.attention import softmax
from selfattention_exercises.core import (
    Wrong,
    expect_shape,
    returned_array,
    returned_arrays,
)

from selfattention_exercises.nonlocal_block import WIDE_GATE, wide_gate_case

from . import Judge


def _close(a, b, rtol=1e-6, atol=1e-9) -> bool:
    return np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=rtol,
                                                      atol=atol)


def _gate_cases(rng):
    """Two clips: a gate already open (first) and a gate at zero; then a
    wide clip with the gate open, which the chain rule answers in
    milliseconds and differences of the loss (a pass per entry of W_g) not
    within the time limit."""
    cases = []
    for gamma in (float(rng.choice([-1, 1]) * rng.uniform(0.3, 1.5)), 0.0):
        N, C, d = int(rng.integers(4, 8)), 5, 2     # C ≠ d: no transpose hides
        cases.append({"x": rng.standard_normal((N, C)),
                      "F": softmax(rng.standard_normal((N, N))),
                      "W_g": rng.standard_normal((C, d)),
                      "W_z": rng.standard_normal((d, C)),
                      "gamma": gamma,
                      "target": rng.standard_normal((N, C))})
    cases.append({"gamma": float(rng.choice([-1, 1]) * rng.uniform(0.3, 1.5)),
                  "seed": int(rng.integers(0, 2 ** 31)), "sizes": WIDE_GATE})
    return cases


def gate_gradients(x, F, W_g, W_z, gamma, target, at_x=False, FT=True):
    """The three gradients of ``mean((x + γ F x W_g W_z − target)²)``.

    ``at_x`` evaluates the residual at ``x`` instead of ``z`` and ``FT=False``
    forgets the transpose of ``F``: the two slips the check diagnoses.
    """
    y = F @ x @ W_g                                   # (N, d) the operation
    u = y @ W_z                                       # (N, C) the branch
    z = x if at_x else x + gamma * u
    G = 2 * (z - target) / z.size                     # dL/dz
    d_Wg = gamma * x.T @ (F.T if FT else F) @ G @ W_z.T
    return np.sum(G * u), d_Wg, gamma * y.T @ G


def _gate_judge(out, x=None, F=None, W_g=None, W_z=None, gamma=None,
                target=None, seed=None, sizes=None):
    if x is None:
        x, F, W_g, W_z, target = wide_gate_case(seed, *sizes)
    d_gamma, d_Wg, d_Wz = returned_arrays(
        out, 3, "my_gate_gradients should return a triple (d_gamma, d_W_g, "
                "d_W_z)")
    if d_gamma.size != 1:
        raise Wrong(f"d_gamma should be one number, got shape "
                    f"{d_gamma.shape}", "shape")
    d_gamma = float(d_gamma.ravel()[0])
    C, d = W_g.shape
    if d_Wg.shape == (d, C) and d_Wz.shape == (C, d):
        raise Wrong("d_W_g and d_W_z are transposed: a gradient has the "
                    "shape of its parameter", "gradients-transposed")
    expect_shape(d_Wg, "d_W_g", (C, d), "(C, d_v)", "the shape of W_g")
    expect_shape(d_Wz, "d_W_z", (d, C), "(d_v, C)", "the shape of W_z")
    ref = gate_gradients(x, F, W_g, W_z, gamma, target)
    at_x = gate_gradients(x, F, W_g, W_z, gamma, target, at_x=True)
    no_T = gate_gradients(x, F, W_g, W_z, gamma, target, FT=False)[1]
    scale = x.size
    if not _close(d_gamma, ref[0]):
        if _close(d_gamma, ref[0] / 2):
            raise Wrong("d_gamma is half the right value: the derivative of "
                        "a square brings a factor 2", "factor-2-missing")
        if _close(d_gamma, ref[0] * scale):
            raise Wrong(f"d_gamma is {scale} times too large: the loss is a "
                        f"mean over the N·C = {scale} entries, not a sum",
                        "sum-not-mean")
        if _close(d_gamma, -ref[0]):
            raise Wrong("d_gamma has the wrong sign: the residual is z − "
                        "target", "sign-flipped")
        if gamma != 0 and _close(d_gamma, at_x[0]):
            raise Wrong("right at γ = 0 but not here (γ = "
                        f"{gamma:.2f}): the residual is z − target with z = "
                        "x + γ·u, not x − target", "residual-at-x")
        raise Wrong(f"d_gamma should be {ref[0]:.4f} here, got "
                    f"{d_gamma:.4f}: it is the sum over all entries of "
                    f"dL/dz times the branch u = F x W_g W_z",
                    "not-the-gradient")
    if gamma == 0 and (np.any(d_Wg != 0) or np.any(d_Wz != 0)):
        raise Wrong("at γ = 0 the weights W_g and W_z should receive exactly "
                    "zero: every path from them to the loss is multiplied "
                    "by γ", "gate-open-at-zero")
    for got, want, slip, name in ((d_Wz, ref[2], at_x[2], "d_W_z"),
                                  (d_Wg, ref[1], at_x[1], "d_W_g")):
        if _close(got, want):
            continue
        if gamma != 0 and _close(got, want / gamma):
            raise Wrong(f"{name} lacks the factor γ: the branch reaches the "
                        f"output only through γ", "gamma-factor-missing")
        if gamma != 0 and _close(got, slip):
            raise Wrong(f"{name} uses the residual at x; at γ ≠ 0 it is "
                        f"z − target with z = x + γ·u", "residual-at-x")
        if name == "d_W_g" and _close(got, no_T):
            raise Wrong("d_W_g uses F where Fᵀ belongs: key j's value reaches "
                        "query i through F[i, j], so the gradient flows back "
                        "through Fᵀ", "affinity-not-transposed")
        raise Wrong(f"{name} is not the gradient of the loss; write z, then "
                    f"dL/dz, then follow the chain rule back",
                    "not-the-gradient")
    return None


def _sub_cases(rng):
    cases = []
    for T in (1, int(rng.integers(2, 4))):
        H, W = 2 * rng.integers(1, 4, size=2)
        C, d_k, d_v = 4, 3, 2
        cases.append({"X": rng.standard_normal((T, int(H), int(W), C)),
                      "W_theta": rng.standard_normal((C, d_k)),
                      "W_phi": rng.standard_normal((C, d_k)),
                      "W_g": rng.standard_normal((C, d_v))})
    return cases


def _pool(Z, how=np.max):
    """2 × 2 pooling over the rows and columns of each frame, flattened."""
    T, H, W, d = Z.shape
    P = how(Z.reshape(T, H // 2, 2, W // 2, 2, d), axis=(2, 4))
    return P.reshape(-1, d)                           # (T·H·W/4, d)


def subsampled(X, W_theta, W_phi, W_g, how=np.max, before=False,
               pool=True, scale=1.0):
    """Wang et al.'s subsampled non-local operation, and its variants."""
    T, H, W, C = X.shape
    theta = X.reshape(-1, C) @ W_theta                # (N, d_k) every query
    if before:
        keys = _pool(X, how)                          # pool x, then embed
        phi, g = keys @ W_phi, keys @ W_g
    else:
        phi, g = X @ W_phi, X @ W_g                   # (T, H, W, d)
        phi, g = ((_pool(Z, how) if pool else Z.reshape(-1, Z.shape[-1]))
                  for Z in (phi, g))
    Y = softmax(theta @ phi.T * scale) @ g            # (N, d_v)
    return Y.reshape(T, H, W, -1)


def _sub_judge(Y, X, W_theta, W_phi, W_g):
    Y = returned_array(Y, "my_subsampled")
    T, H, W, _ = X.shape
    d_v, d_k = W_g.shape[1], W_theta.shape[1]
    if Y.shape == (T, H // 2, W // 2, d_v):
        raise Wrong("the output has one row per pooled position: pool only "
                    "the keys and values (φ and g); every position still "
                    "asks its own query θ", "queries-pooled")
    expect_shape(Y, "Y", (T, H, W, d_v), "(T, H, W, d_v)")
    args = (X, W_theta, W_phi, W_g)
    if _close(Y, subsampled(*args)):
        return None
    variants = [
        ({"before": True}, "you pooled x before the embeddings; Wang et al. "
         "pool after φ and g, and max pooling does not commute with a "
         "linear map", "pooled-before-embedding"),
        ({"how": np.mean}, "you averaged each 2 × 2 block; the paper uses "
         "max pooling", "mean-pooled"),
        ({"pool": False}, "nothing is subsampled: pool "
         "φ(x) and g(x) over 2 × 2 blocks of each frame", "not-pooled"),
        ({"scale": 1 / np.sqrt(d_k)}, "you scaled the scores by 1/√d_k; the "
         "embedded Gaussian form uses exp(θ·φ), scale 1", "scores-scaled"),
    ]
    for kwargs, message, code in variants:
        if _close(Y, subsampled(*args, **kwargs)):
            raise Wrong(message, code)
    raise Wrong("Y differs from softmax(θ φ̂ᵀ) ĝ, where φ̂ and ĝ are φ(x) "
                "and g(x) max-pooled over 2 × 2 blocks of each frame",
                "not-the-pooling")


def _noise_cases(rng):
    return [{"seed": int(rng.integers(0, 2 ** 31)),
             "noise": float(np.round(rng.uniform(0.1, 0.3), 3))}
            for _ in range(2)]


def _noise_judge(out, seed, noise):
    from selfattention.data import moving_square_video

    first, again = returned_arrays(out, 2, "my_denoising_errors should "
                                           "return four numbers")
    if first.shape != (4,):
        raise Wrong(f"my_denoising_errors should return four numbers (input, "
                    f"space, time, spacetime), got shape {first.shape}",
                    "shape")
    if not np.array_equal(first, again):
        raise Wrong("two runs with the same seed gave different errors: draw "
                    "every random number from np.random.default_rng(seed)",
                    "not-seeded")
    if not np.all(np.isfinite(first)) or np.any(first < 0):
        raise Wrong(f"mean squared errors are finite and non-negative, got "
                    f"{np.round(first, 5).tolist()}", "not-an-error")
    clean = moving_square_video(np.random.default_rng(seed), noise=0.0)
    noisy = moving_square_video(np.random.default_rng(seed), noise=noise)
    truth = float(np.mean((noisy - clean) ** 2))
    inp, space, time, spacetime = first.tolist()
    if not np.isclose(inp, truth, rtol=1e-6):
        raise Wrong(f"for seed {seed} and noise {noise} the noisy clip's "
                    f"mean squared error per pixel is {truth:.5f}, you report "
                    f"{inp:.5f}: compare moving_square_video(default_rng(seed)"
                    f", noise=noise) with the same clip at noise=0.0",
                    "input-error-off")
    # The order of the scopes is the student's finding, not the check's:
    # weights that reward brightness (the chapter's θ·φ) make every scope
    # but time only worse than the noise. Only a clip left as it was is no
    # measurement of a denoiser.
    if space == time == spacetime == inp:
        raise Wrong("every scope's error equals the noisy clip's: the "
                    "outputs are the noisy patches themselves; replace each "
                    "patch by the weighted average of the patches in its "
                    "scope", "no-averaging")
    return None


JUDGES = {
    "ex-nonlocal-gate-gradients": Judge(
        cases=_gate_cases, judge=_gate_judge, wide=1,
        slow=f"the hidden cases hold a clip with C = {WIDE_GATE[1]} channels "
             f"and d_v = {WIDE_GATE[2]}; the chain rule answers it in "
             f"milliseconds, differences of the loss (a pass per entry of "
             f"W_g) not in time"),
    "ex-nonlocal-subsampled": Judge(cases=_sub_cases, judge=_sub_judge),
    "ex-nonlocal-denoising": Judge(cases=_noise_cases, judge=_noise_judge),
}
