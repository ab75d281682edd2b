"""Chapter 9's checks accept right answers and name typical mistakes."""

import numpy as np
import pytest
import torch

from exercise_answers import own, verdict
from selfattention import data, patches
from selfattention.attention import softmax
from selfattention_exercises import nonlocal_block as checks
from selfattention_course.judges import nonlocal_block as judges
from selfattention.nonlocal_block import NonLocalBlock, nonlocal_op, scope_mask


# ------------------------------------------------------------ 9.1 gradients
def gradients(x, F, W_g, W_z, gamma, target):
    y = F @ x @ W_g
    u = y @ W_z
    G = 2 * (x + gamma * u - target) / x.size
    return np.sum(G * u), gamma * x.T @ F.T @ G @ W_z.T, gamma * y.T @ G


def slip(change):
    """The right gradients, with one of them changed by ``change``."""
    def answer(x, F, W_g, W_z, gamma, target):
        return change(gradients(x, F, W_g, W_z, gamma, target),
                      x, F, W_g, W_z, gamma, target)
    return answer


def expanded(case):
    """A case with its arrays (the wide clip travels as a seed)."""
    if "seed" not in case:
        return case
    arrays = checks.wide_gate_case(case["seed"], *case["sizes"])
    return dict(zip(("x", "F", "W_g", "W_z", "target"), arrays),
                gamma=case["gamma"])


def test_the_reference_gradients_are_pytorch_s():
    for case in checks.check_gate_gradients.draw(np.random.default_rng(3)):
        case = expanded(case)
        t = {k: torch.tensor(v, dtype=torch.float64) for k, v in case.items()}
        for k in ("W_g", "W_z", "gamma"):
            t[k].requires_grad_(True)
        z = t["x"] + t["gamma"] * (t["F"] @ t["x"] @ t["W_g"] @ t["W_z"])
        ((z - t["target"]) ** 2).mean().backward()
        want = (t["gamma"].grad, t["W_g"].grad, t["W_z"].grad)
        for mine, ref in zip(judges.gate_gradients(**case), want):
            assert np.abs(mine - ref.numpy()).max() < 1e-12


def test_the_gradients_reach_a_real_block_as_derived():
    """The library's block at γ = 0.7: autograd agrees with the formulas."""
    torch.manual_seed(0)
    block = NonLocalBlock(6, inner=4).double()
    with torch.no_grad():
        block.gamma.fill_(0.7)
    x = torch.randn(1, 6, 2, 3, 3, dtype=torch.float64)
    target = torch.randn_like(x)
    ((block(x) - target) ** 2).mean().backward()
    X = x[0].flatten(1).T.numpy()                         # (N, C)
    th, ph = (m.weight.detach().numpy().T for m in (block.theta, block.phi))
    F = softmax((X @ th) @ (X @ ph).T)
    W_g, W_z = (m.weight.detach().numpy().T for m in (block.g, block.out))
    d_gamma, d_Wg, d_Wz = judges.gate_gradients(
        X, F, W_g, W_z, 0.7, target[0].flatten(1).T.numpy())
    assert np.isclose(d_gamma, block.gamma.grad.item(), rtol=1e-10)
    assert np.allclose(d_Wg, block.g.weight.grad.numpy().T, rtol=1e-10)
    assert np.allclose(d_Wz, block.out.weight.grad.numpy().T, rtol=1e-10)


@pytest.mark.parametrize("answer, status, code", [
    (gradients, "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: None, "not done", "not-done"),
    (slip(lambda g, *a: (g[0] / 2, g[1], g[2])), "wrong", "factor-2-missing"),
    (slip(lambda g, x, *a: (g[0] * x.size, g[1], g[2])), "wrong",
     "sum-not-mean"),
    (slip(lambda g, *a: (-g[0], g[1], g[2])), "wrong", "sign-flipped"),
    (lambda *a: own(judges.gate_gradients)(*a, at_x=True), "wrong",
     "residual-at-x"),
    (slip(lambda g, x, F, Wg, Wz, gamma, t: (
        g[0], g[1], g[2] / gamma if gamma else np.ones_like(g[2]))),
     "wrong", "gamma-factor-missing"),
    (lambda *a: own(judges.gate_gradients)(*a, FT=False), "wrong",
     "affinity-not-transposed"),
    (slip(lambda g, *a: (g[0], g[1].T, g[2].T)), "wrong",
     "gradients-transposed"),
    (slip(lambda g, *a: (g[0], g[1], g[2][:, :1])), "wrong", "shape"),
    (slip(lambda g, *a: (np.array([g[0], g[0]]), g[1], g[2])), "wrong",
     "shape"),
    (slip(lambda g, *a: (g[0], g[1], g[2] + 1)), "wrong", "not-the-gradient"),
    (slip(lambda g, *a: g[:2]), "wrong", "type"),
])
def test_gate_gradient_check(answer, status, code):
    verdict(checks.check_gate_gradients, [answer], status, code)


class OutOfTime(Exception):
    """An answer past the work that fits in the grader's time limit."""


def central_differences(x, F, W_g, W_z, gamma, target, budget=2000):
    """The three gradients by central differences of the loss (exact: it
    is quadratic in each parameter), one pass per entry, given up past
    ``budget`` passes (each costs about what the whole chain rule does)."""
    Fx = F @ x

    def loss(g, Wg, Wz):
        return np.mean((x + g * (Fx @ Wg) @ Wz - target) ** 2)

    if 2 * (W_g.size + W_z.size + 1) > budget:
        raise OutOfTime(f"{2 * (W_g.size + W_z.size + 1)} passes")
    h = 1e-4
    d_gamma = (loss(gamma + h, W_g, W_z) - loss(gamma - h, W_g, W_z)) / 2 / h
    grads = []
    for W, at in ((W_g, 0), (W_z, 1)):
        D = np.zeros_like(W)
        for i in np.ndindex(*W.shape):
            E = np.zeros_like(W)
            E[i] = h
            plus = [W_g, W_z]
            minus = [W_g, W_z]
            plus[at], minus[at] = W + E, W - E
            D[i] = (loss(gamma, *plus) - loss(gamma, *minus)) / 2 / h
        grads.append(D)
    return d_gamma, *grads


def test_finite_differences_do_not_answer_the_wide_clip():
    """Differences of the loss answer the small clips; the wide one needs a
    pass per entry of W_g and W_z (2 · 163840 of them)."""
    ex = checks.check_gate_gradients
    small = [c for c in ex.public_cases() if "seed" not in c]
    fb = ex.assess(ex.attempt([central_differences], small), small)
    assert fb.status == "correct", fb.message
    verdict(ex, [central_differences], "wrong", "raised")


def test_a_gate_left_open_at_zero_is_named():
    """Weight gradients that ignore γ are caught at γ = 0 as well."""
    case = checks.check_gate_gradients.public_cases()[1]
    assert case["gamma"] == 0.0
    ref = gradients(**case)
    with pytest.raises(judges.Wrong) as raised:
        judges._gate_judge((ref[0], ref[1] + 1, ref[2]), **case)
    assert raised.value.code == "gate-open-at-zero"


# ------------------------------------------------------------ 9.2 subsampled
def pooled(X, Wt, Wp, Wg, pool="max", before=False, queries=False,
           scale=1.0):
    T, H, W, C = X.shape
    t = torch.from_numpy

    def down(Z):                                   # (T, H, W, d) -> (n/4, d)
        z = t(Z).permute(0, 3, 1, 2)
        z = (torch.nn.functional.max_pool2d if pool == "max"
             else torch.nn.functional.avg_pool2d)(z, 2)
        return z.permute(0, 2, 3, 1).reshape(-1, Z.shape[-1]).numpy()

    keys = down(X) if before else None
    phi = keys @ Wp if before else down(X @ Wp)
    g = keys @ Wg if before else down(X @ Wg)
    theta = down(X @ Wt) if queries else X.reshape(-1, C) @ Wt
    Y = softmax(theta @ phi.T * scale) @ g
    return Y.reshape(T, H // 2, W // 2, -1) if queries else \
        Y.reshape(T, H, W, -1)


def test_the_reference_agrees_with_pytorch_pooling_and_nonlocal_op():
    for case in checks.check_subsampled.draw(np.random.default_rng(4)):
        ref = judges.subsampled(**case)
        assert np.abs(ref - pooled(*case.values())).max() < 1e-12
        full = judges.subsampled(**case, pool=False)
        Y, _ = nonlocal_op(case["X"], case["W_theta"], case["W_phi"],
                           case["W_g"])
        assert np.abs(full - Y).max() < 1e-12


@pytest.mark.parametrize("answer, status, code", [
    (pooled, "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: pooled(*a, before=True), "wrong", "pooled-before-embedding"),
    (lambda *a: pooled(*a, pool="mean"), "wrong", "mean-pooled"),
    (lambda *a: pooled(*a, queries=True), "wrong", "queries-pooled"),
    (lambda X, Wt, Wp, Wg: nonlocal_op(X, Wt, Wp, Wg)[0], "wrong",
     "not-pooled"),
    (lambda X, Wt, Wp, Wg: pooled(X, Wt, Wp, Wg,
                                  scale=1 / np.sqrt(Wt.shape[1])),
     "wrong", "scores-scaled"),
    (lambda *a: pooled(*a) + 1, "wrong", "not-the-pooling"),
    (lambda *a: pooled(*a)[..., :1], "wrong", "shape"),
])
def test_subsampled_check(answer, status, code):
    verdict(checks.check_subsampled, [answer], status, code)


# ------------------------------------------------------------ 9.3 denoising
def denoise(seed, noise, similarity="distance", scopes=("space", "time",
                                                          "spacetime")):
    noisy = data.moving_square_video(np.random.default_rng(seed), noise=noise)
    clean = data.moving_square_video(np.random.default_rng(seed), noise=0.0)
    xn = patches.patchify(noisy, 4).reshape(-1, 16)
    xc = patches.patchify(clean, 4).reshape(-1, 16)
    if similarity == "distance":
        S = -((xn[:, None] - xn[None]) ** 2).sum(-1) / (32 * noise ** 2)
    else:
        S = xn @ xn.T                                    # the chapter's θ·φ
    out = [np.mean((xn - xc) ** 2)]
    for scope in scopes:
        A = softmax(np.where(scope_mask(4, 6, 6, scope), S, -np.inf))
        out.append(np.mean((A @ xn - xc) ** 2))
    return tuple(float(e) for e in out)


def test_distance_weights_denoise_best_over_space_and_time():
    for seed in range(3):
        for noise in (0.1, 0.2, 0.3):
            inp, space, time, spacetime = denoise(seed, noise)
            assert spacetime < space < time < inp


calls = {"n": 0}


def flaky(seed, noise):
    calls["n"] += 1
    errors = denoise(seed, noise)
    return (errors[0], errors[1], errors[2], errors[3] + 1e-9 * calls["n"])


@pytest.mark.parametrize("answer, status, code", [
    (denoise, "correct", None),
    (None, "not done", "not-done"),
    # open: the order of the scopes is the student's to find and explain
    (lambda s, n: denoise(s, n, "dot"), "correct", None),
    (lambda s, n: denoise(s, n)[:3], "wrong", "shape"),
    (lambda s, n: (0.01,) + denoise(s, n)[1:], "wrong", "input-error-off"),
    (lambda s, n: denoise(s, 2 * n), "wrong", "input-error-off"),
    (flaky, "wrong", "not-seeded"),
    (lambda s, n: denoise(s, n)[:1] * 4, "wrong", "no-averaging"),
    (lambda s, n: (-1.0, 0.0, 0.0, 0.0), "wrong", "not-an-error"),
])
def test_denoising_check(answer, status, code):
    verdict(checks.check_denoising, [answer], status, code)
