"""The checks of chapter 2's exercises accept right answers and explain
wrong ones."""

import functools
import math

import numpy as np
import pytest
import torch

from exercise_answers import own, verdict
from selfattention import patches, scaling
from selfattention.attention import softmax as library_softmax
from selfattention_exercises import scaling as checks
from selfattention_course.judges import scaling as judges

softmax = own(library_softmax)


# ------------------------------------------------------------ two factors
def right(d_k, s, m):
    return (1 / math.sqrt(d_k * s * s * (s * s + 2 * m * m)),
            1 / math.sqrt(d_k * s * s * (s * s + m * m)))


@pytest.mark.parametrize("answer, status, code", [
    (right, "correct", None),
    (lambda d_k, s, m: np.array(right(d_k, s, m)), "correct", None),
    (None, "not done", "not-done"),
    (lambda d_k, s, m: None, "not done", "not-done"),
    (lambda d_k, s, m: right(d_k, s, m)[::-1], "wrong", "swapped"),
    (lambda d_k, s, m: (1 / (s * s * d_k ** 0.5),) * 2, "wrong",
     "mean-ignored"),
    (lambda d_k, s, m: (right(d_k, s, m)[1],) * 2, "wrong", "row-for-all"),
    (lambda d_k, s, m: (right(d_k, s, m)[0],) * 2, "wrong", "all-for-row"),
    (lambda d_k, s, m: (1 / (d_k ** 0.5 * (s * s + m * m)),
                        right(d_k, s, m)[1]), "wrong", "second-moment"),
    (lambda d_k, s, m: (right(d_k, s, m)[0] ** 2, right(d_k, s, m)[1]),
     "wrong", "divides-by-variance"),
    (lambda d_k, s, m: (right(d_k, s, m)[0], 1 / right(d_k, s, m)[1]),
     "wrong", "not-inverted"),
    (lambda d_k, s, m: (0.1, 0.1), "wrong", "not-unit-variance"),
    (lambda d_k, s, m: 0.1, "wrong", "not-a-pair"),
    (lambda d_k, s, m: ("x", 1.0), "wrong", "not-a-number"),
])
def test_scale_factors_check(answer, status, code):
    verdict(checks.check_scales, [answer], status, code)


def test_the_factors_give_unit_variance_on_samples():
    # what the formulas claim, measured: all pairs, and one query's row
    rng = np.random.default_rng(0)
    d_k, s, m = 16, 1.5, 0.7
    q, k = rng.normal(m, s, (2, 3000, d_k))
    c_all, c_row = right(d_k, s, m)
    S = q @ k.T                                   # (queries, keys)
    assert abs(np.var(c_all * S) - 1) < 0.03
    assert abs(np.mean(np.var(c_row * S, axis=1)) - 1) < 0.03


def test_a_measured_factor_is_told_apart_from_the_right_one():
    # factors measured on samples are off by their noise: the message must
    # not read "standard deviation 1, not 1"
    def measured(d_k, s, m):
        rng = np.random.default_rng(0)
        q, k = rng.normal(m, s, (2, 400, d_k))
        S = q @ k.T
        return 1 / np.std(S), 1 / np.sqrt(np.mean(np.var(S, axis=1)))

    with pytest.raises(judges.Wrong) as err:
        judges._scale_judge(measured(16, 1.0, 0.5), 16, 1.0, 0.5)
    assert err.value.code == "not-unit-variance"
    assert ", not 1" not in str(err.value) and "derive it" in str(err.value)


# ------------------------------------------------------------ norm
def jacobian_norm(P):                      # the norm, from the matrices
    J = P[..., :, None] * np.eye(P.shape[-1]) - P[..., :, None] * \
        P[..., None, :]
    return np.sqrt((J ** 2).sum(axis=(-2, -1)))


def closed_form_squared(P):
    sq = (P ** 2).sum(-1)
    return sq - 2 * (P ** 3).sum(-1) + sq ** 2


class OutOfTime(Exception):
    """An answer past the work that fits in the grader's time limit."""


def blocked_norm(P, budget=10 ** 9):
    """The norm summed over blocks of rows of each Jacobian, never holding
    it whole: O(n²) work, given up past ``budget`` entries (a few seconds
    of NumPy, where the grader allows 30)."""
    P = np.atleast_2d(P)
    out, done = np.zeros(P.shape[:-1]), 0
    for idx in np.ndindex(*P.shape[:-1]):
        p = P[idx]
        for start in range(0, len(p), 256):
            block = p[start:start + 256]
            J = np.diag(p)[start:start + 256] if len(p) <= 4096 else None
            if J is None:
                done += block.size * len(p)
                if done > budget:
                    raise OutOfTime(f"{done} entries of n × n")
                J = -block[:, None] * p[None, :]
                J[np.arange(len(block)), start + np.arange(len(block))] += \
                    block
            else:
                J = J - block[:, None] * p[None, :]
            out[idx] += (J ** 2).sum()
    return np.sqrt(out)


@pytest.mark.parametrize("answer, status, code", [
    # Building each row's Jacobian answers the small rows; the wide row's
    # would take 162 TB ("without building it", by cost).
    (jacobian_norm, "wrong", "builds-the-jacobian"),
    (blocked_norm, "wrong", "raised"),
    (lambda P: np.sqrt(np.clip(closed_form_squared(P), 0, None)),
     "correct", None),
    (None, "not done", "not-done"),
    (lambda P: jacobian_norm(P).mean(), "wrong", "one-number"),
    (lambda P: jacobian_norm(P) ** 2, "wrong", "squared"),
    (lambda P: np.sqrt((P ** 2 * (1 - P) ** 2).sum(-1)), "wrong",
     "diagonal-only"),
    (lambda P: np.sqrt(closed_form_squared(P) - 1e-15), "wrong",
     "nan"),
    (lambda P: jacobian_norm(P)[..., :2], "wrong", "shape"),
    (lambda P: 2 * jacobian_norm(P), "wrong", "not-the-norm"),
    (lambda P: 1 / 0, "wrong", "raised"),
    (scaling.jacobian_norm, "for review", "for-review"),
    (lambda P: np.sqrt((scaling.softmax_jacobian(P) ** 2).sum((-2, -1))),
     "for review", "for-review"),
])
def test_jacobian_norm_check(answer, status, code):
    verdict(checks.check_jacobian_norm, [answer], status, code)


def test_the_closed_form_reference_is_the_library_s_norm():
    rng = np.random.default_rng(0)
    P = library_softmax(3 * rng.standard_normal((5, 300)))
    assert np.allclose(judges.jacobian_norm(P), scaling.jacobian_norm(P),
                       rtol=1e-12)


def test_norm_cases_hold_one_hot_uniform_saturated_and_wide_rows():
    for seed in range(3):
        first, saturated, wide = checks.check_jacobian_norm.draw(
            np.random.default_rng(seed))
        P = checks.wide_row(wide["n"], wide["seed"])
        assert P.shape == (1, checks.WIDE_ROW) and np.isclose(P.sum(), 1)
        assert 8 * checks.WIDE_ROW ** 2 > 2 ** 47    # beyond any process
        rows = first["P"].reshape(-1, first["P"].shape[-1])
        assert any(np.allclose(r, 1 / len(r)) for r in rows)
        assert any(r.max() == 1.0 for r in rows)
        assert (saturated["P"].max(axis=-1) > 0.99).mean() > 0.5


# ------------------------------------------------------------ gradient
def query_gradient(Q, K, V, G, jacobian=True, root=True):
    d = math.sqrt(K.shape[1])
    A = softmax(Q @ K.T / d)
    dA = G @ V.T
    dS = A * (dA - (A * dA).sum(1, keepdims=True)) if jacobian else A * dA
    return dS @ K / (d if root else 1.0)


def test_the_reference_gradient_agrees_with_autograd():
    rng = np.random.default_rng(0)
    for case in checks.check_query_gradient.draw(rng):
        if "seed" in case:
            case = dict(zip("QKVG", checks.wide_gradient_case(
                case["seed"], *case["sizes"])))
        Q = torch.tensor(case["Q"], requires_grad=True)
        K, V, G = (torch.tensor(case[k]) for k in "KVG")
        d_k = K.shape[1]
        Y = torch.softmax(Q @ K.T / math.sqrt(d_k), dim=-1) @ V
        (Y * G).sum().backward()
        assert np.allclose(judges._query_gradient(**case), Q.grad.numpy(),
                           rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("answer, status, code", [
    (query_gradient, "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: -query_gradient(*a), "wrong", "sign-flipped"),
    (lambda *a: query_gradient(*a, root=False), "wrong", "sqrt-missing"),
    (lambda *a: query_gradient(*a, jacobian=False), "wrong",
     "jacobian-diagonal-only"),
    (lambda Q, K, V, G: G @ V.T @ K / math.sqrt(K.shape[1]), "wrong",
     "softmax-skipped"),
    (lambda Q, K, V, G: np.zeros_like(K), "wrong", "shape-of-keys"),
    (lambda Q, K, V, G: np.zeros((2, 2)), "wrong", "shape"),
    (lambda *a: 1.01 * query_gradient(*a), "wrong", "not-the-gradient"),
])
def test_query_gradient_check(answer, status, code):
    verdict(checks.check_query_gradient, [answer], status, code)


def central_differences(Q, K, V, G, budget=1000):
    """∂L/∂Q by central differences of a hand-written loss, one component
    of every query at once (the rows of attention are independent): 2·d_k
    forward passes, given up past ``budget`` (each pass of the wide case
    costs about what the whole chain rule does)."""
    d = np.sqrt(K.shape[1])

    def rows(Qx):
        S = Qx @ K.T / d
        E = np.exp(S - S.max(axis=1, keepdims=True))
        return (G * ((E / E.sum(axis=1, keepdims=True)) @ V)).sum(axis=1)

    if 2 * Q.shape[1] > budget:
        raise OutOfTime(f"{2 * Q.shape[1]} forward passes")
    grad, h = np.zeros_like(Q), 1e-5
    for j in range(Q.shape[1]):
        E = np.zeros_like(Q)
        E[:, j] = h
        grad[:, j] = (rows(Q + E) - rows(Q - E)) / (2 * h)
    return grad


def test_finite_differences_do_not_answer_the_wide_case():
    """Differences of the loss answer the small cases; the wide one needs
    2·d_k = 8192 forward passes, far past the time limit."""
    ex = checks.check_query_gradient
    small = [c for c in ex.public_cases() if "seed" not in c]
    fb = ex.assess(ex.attempt([central_differences], small), small)
    assert fb.status == "correct", fb.message
    verdict(ex, [central_differences], "wrong", "raised")
    wide = [c for c in ex.public_cases() if "seed" in c]
    assert wide and 2 * wide[0]["sizes"][2] > 1000


def test_saturated_rows_pass_less_gradient_to_the_queries():
    """What the exercise's solution prints, on many draws: queries eight
    times larger saturate the rows and usually receive less gradient."""
    rng = np.random.default_rng(1)
    ratios = []
    for _ in range(50):
        case = checks.check_query_gradient.draw(rng)[0]
        big = dict(case, Q=8 * case["Q"])
        ratios.append(np.linalg.norm(judges._query_gradient(**big))
                      / np.linalg.norm(judges._query_gradient(**case)))
    assert np.median(ratios) < 0.5


# ------------------------------------------------------------ predict
@functools.cache
def digits():
    """The digits' patch tokens (read when a test needs them: the loader
    imports scikit-learn)."""
    return patches.digit_patch_tokens()


def max_weight_at(d_k, seed, scaled=False, std=0.5):
    rng = np.random.default_rng(seed)
    Gq = rng.standard_normal((300, 4, d_k)) * std
    Gk = rng.standard_normal((300, 4, d_k)) * std
    S = digits() @ (Gq @ np.swapaxes(Gk, 1, 2)) @ np.swapaxes(digits(), 1, 2)
    return softmax(S / (math.sqrt(d_k) if scaled else 1.0)).max(-1).mean()


def library_measure(d_k, seed):
    rows = scaling.scaling_experiment(digits(), [d_k],
                                      np.random.default_rng(seed))
    return rows[0].max_weight_raw


@pytest.mark.parametrize("answers, status, code", [
    ((0.86, max_weight_at), "correct", None),
    ((1, max_weight_at), "correct", None),
    ((None, max_weight_at), "not done", "not-done"),
    ((..., max_weight_at), "not done", "not-done"),
    ((0.86, None), "not done", "not-done"),
    ((0.6, max_weight_at), "wrong", "prediction-out-of-range"),
    ((1.2, max_weight_at), "wrong", "prediction-out-of-range"),
    (("high", max_weight_at), "wrong", "not-a-number"),
    ((0.86, lambda d, s: max_weight_at(d, s, scaled=True)), "wrong",
     "measured-scaled"),
    ((0.86, lambda d, s: max_weight_at(d, s, std=0.25)), "wrong",
     "off-the-expected"),
    ((0.86, lambda d, s: 0.99), "wrong", "off-the-expected"),
    ((0.86, library_measure), "for review", "for-review"),
])
@pytest.mark.slow
def test_predict_check(answers, status, code):
    verdict(checks.check_predict_max_weight, answers, status, code)


def test_the_exact_draw_of_the_4x4_product_matches_direct_sampling():
    """The judge's Wishart shortcut has the distribution of G_Q G_Kᵀ."""
    for d_k in (16, 256):
        direct = np.mean([max_weight_at(d_k, seed) for seed in range(12)])
        assert abs(direct - judges._expected_max_weight(d_k)) < 0.01


def test_the_expected_weight_climbs_slowly_toward_its_limit():
    w = [judges._expected_max_weight(d) for d in (1024, 2048, 4096)]
    assert w[0] < w[1] < w[2] < 0.92
    assert abs(w[0] - 0.81) < 0.01          # the table's d_k = 1024 row


# ------------------------------------------------------------ saturation
def saturation(d_ks, n, seed, std=1.0, swap=False, two_draws=False):
    """Gaussian queries and keys; right, or wrong in a chosen way."""
    rng = np.random.default_rng(seed)
    out = []
    for d_k in d_ks:
        q = std * rng.standard_normal((300, 1, d_k))
        k = std * rng.standard_normal((300, n, d_k))
        S = (q @ np.swapaxes(k, 1, 2))[:, 0]                 # (300, n)
        S2 = S
        if two_draws:                      # scaled column from other scores
            S2 = (q @ np.swapaxes(std * rng.standard_normal(k.shape), 1,
                                  2))[:, 0] * 3
        row = [softmax(S).max(-1).mean(),
               softmax(S2 / math.sqrt(d_k)).max(-1).mean()]
        out.append(row[::-1] if swap else row)
    return np.array(out)


@pytest.mark.parametrize("answer, status, code", [
    (saturation, "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: saturation(*a, swap=True), "wrong", "columns-swapped"),
    (lambda *a: saturation(*a, two_draws=True), "wrong", "not-same-scores"),
    (lambda d, n, s: saturation(d, n, np.random.randint(1 << 30)), "wrong",
     "not-seeded"),
    (lambda d, n, s: saturation(d, n, 0), "wrong", "seed-ignored"),
    (lambda d, n, s: np.column_stack([saturation(d, n, s)[:, 0]] * 2),
     "wrong", "scaled-column-moves"),
    (lambda *a: saturation(*a, std=3.0), "wrong", "variance-not-one"),
    (lambda d, n, s: np.array([[0.3, 0.2]] * len(d)) + 1e-6 * (s % 7),
     "wrong", "raw-not-climbing"),
    (lambda d, n, s: np.array([[1.5, 0.2]] * len(d)), "wrong",
     "not-weights"),
    (lambda d, n, s: saturation(d, n, s)[:, 0], "wrong", "shape"),
    (lambda d, n, s: scaling.scaling_experiment(
        digits(), d, np.random.default_rng(s)), "for review",
     "for-review"),
])
def test_saturation_check(answer, status, code):
    verdict(checks.check_saturation, [answer], status, code)
