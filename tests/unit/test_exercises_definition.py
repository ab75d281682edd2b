"""The checks of chapter 1's exercises accept right answers and explain
wrong ones."""

import math

import numpy as np
import pytest

from exercise_answers import hidden, own, verdict
from selfattention import data, example, patches
from selfattention.attention import attention as library_attention
from selfattention.attention import softmax as library_softmax
from selfattention_exercises import definition as checks
from selfattention_course.judges import definition as judges

softmax = own(library_softmax)


# ------------------------------------------------------------ temperatures
def tempered(scale_of=lambda tau: tau[..., :, None], stable=True,
             axis=-1, power=-1.0, root=True):
    """A batched tempered attention, right or wrong in one chosen way."""
    def answer(Q, K, V, tau):
        S = Q @ np.swapaxes(K, -1, -2)
        if root:
            S = S / math.sqrt(Q.shape[-1])
        S = S * scale_of(tau) ** power
        E = np.exp(S - S.max(axis=axis, keepdims=True)) if stable else \
            np.exp(S)
        A = E / E.sum(axis=axis, keepdims=True)
        return A @ V, A
    return answer


def library_per_query(Q, K, V, tau):
    """Right, but built from the library's attention, one query at a time."""
    Y, A = np.zeros(Q.shape[:2] + V.shape[2:]), np.zeros(Q.shape[:2] +
                                                          K.shape[1:2])
    for b in range(Q.shape[0]):
        for i in range(Q.shape[1]):
            scale = 1 / (math.sqrt(Q.shape[-1]) * tau[b, i])
            y, a = library_attention(Q[b, i:i + 1], K[b], V[b], scale=scale)
            Y[b, i], A[b, i] = y[0], a[0]
    return Y, A


def temperatures(root=True, steps=100, per_query=True, direction=1.0):
    """Temperatures for target largest weights, right or wrong in one way:
    bisection on log τ, the largest weight falling as τ grows."""
    def answer(Q, K, p):
        S = Q @ np.swapaxes(K, -1, -2)
        if root:
            S = S / math.sqrt(Q.shape[-1])
        gap = S.max(axis=-1, keepdims=True) - S
        lo, hi = np.full(p.shape, -30.0), np.full(p.shape, 30.0)
        for _ in range(steps):
            mid = (lo + hi) / 2
            top = 1 / np.exp(-gap / np.exp(mid)[..., None]).sum(axis=-1)
            sharp = direction * (top - p) > 0
            lo, hi = np.where(sharp, mid, lo), np.where(sharp, hi, mid)
        tau = np.exp((lo + hi) / 2)
        # per_query=False: the first query's temperature for the whole row
        return tau if per_query else np.repeat(tau[..., :1], p.shape[-1], -1)
    return answer


def _miss(log_tau, row, target):
    """How far a row's largest weight at τ = exp(log_tau) is above target."""
    return 1 / np.exp(row / math.exp(log_tau)).sum() - target


def brentq_temperatures(Q, K, p):
    """Right, one query at a time, with SciPy's root finder on log τ."""
    from scipy.optimize import brentq

    S = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    tau = np.empty(p.shape)
    for b, i in np.ndindex(p.shape):
        tau[b, i] = math.exp(brentq(_miss, -30, 30, xtol=1e-14,
                                    args=(S[b, i] - S[b, i].max(), p[b, i])))
    return tau


RIGHT_TEMPERATURES = temperatures()


@pytest.mark.parametrize("answer, status, code", [
    (RIGHT_TEMPERATURES, "correct", None),
    (brentq_temperatures, "correct", None),
    (None, "not done", "not-done"),
    (lambda Q, K, p: None, "not done", "not-done"),
    (temperatures(root=False), "wrong", "target-sqrt-missing"),
    (temperatures(steps=18), "wrong", "target-not-converged"),
    (temperatures(per_query=False), "wrong", "target-one-tau"),
    (temperatures(direction=-1.0), "wrong", "target-missed"),
    (lambda Q, K, p: -RIGHT_TEMPERATURES(Q, K, p), "wrong",
     "tau-not-positive"),
    (lambda Q, K, p: RIGHT_TEMPERATURES(Q, K, p)[..., 0], "wrong", "shape"),
])
def test_temperatures_for_a_target_check(answer, status, code):
    verdict(checks.check_tempered_attention, [tempered(), answer], status,
            code)


def test_tempered_attention_passes_hidden_draws_and_starters_do_not():
    ex = checks.check_tempered_attention
    hidden(ex, [tempered(), RIGHT_TEMPERATURES])
    cases = ex.draw(np.random.default_rng(7))
    fb = ex.assess(ex.attempt([lambda *a: None, lambda *a: None], cases),
                   cases)
    assert fb.status == "not done" and fb.points == 0


def test_the_targets_lie_strictly_between_uniform_and_one_key():
    for seed in range(5):
        for case in checks.check_tempered_attention.draw(
                np.random.default_rng(seed)):
            n_k = case["K"].shape[1]
            assert (case["p"] > 1 / n_k).all() and (case["p"] < 1).all()


@pytest.mark.parametrize("answer, status, code", [
    (tempered(), "correct", None),
    (lambda Q, K, V, tau: (softmax(
        Q @ np.swapaxes(K, 1, 2) / (math.sqrt(Q.shape[-1]) * tau[..., None]))
        @ V, softmax(Q @ np.swapaxes(K, 1, 2)
                     / (math.sqrt(Q.shape[-1]) * tau[..., None]))),
     "correct", None),
    (None, "not done", "not-done"),
    (lambda Q, K, V, tau: None, "not done", "not-done"),
    (tempered(stable=False), "wrong", "overflow"),
    (tempered(scale_of=lambda tau: tau[..., None, :]), "wrong", "tau-on-keys"),
    (tempered(power=1.0), "wrong", "tau-multiplies"),
    (tempered(scale_of=lambda tau: np.ones_like(tau)[..., None]), "wrong",
     "tau-ignored"),
    (tempered(root=False), "wrong", "sqrt-missing"),
    (tempered(axis=-2), "wrong", "columns-sum-to-one"),
    (lambda Q, K, V, tau: (tempered()(Q, K, V, tau)[1] @ V * 2,
                           tempered()(Q, K, V, tau)[1]), "wrong",
     "output-not-AV"),
    (lambda Q, K, V, tau: tempered()(Q, K, V, tau)[1], "wrong", "type"),
    (lambda Q, K, V, tau: (Q, np.swapaxes(Q, 1, 2)), "wrong", "shape"),
    (lambda Q, K, V, tau: Q @ K.T, "wrong", "raised"),
    (library_per_query, "for review", "for-review"),
])
def test_tempered_attention_check(answer, status, code):
    verdict(checks.check_tempered_attention, [answer, RIGHT_TEMPERATURES],
            status, code)


def test_tempered_cases_include_a_square_batch_and_tiny_temperatures():
    for seed in range(5):
        cases = checks.check_tempered_attention.draw(
            np.random.default_rng(seed))
        assert any(c["Q"].shape[1] == c["K"].shape[1] for c in cases)
        assert any(c["Q"].shape[1] != c["K"].shape[1] for c in cases)
        assert min(c["tau"].min() for c in cases) < 0.1


# ------------------------------------------------------------ limits
def limits_by_ties(Q, K, V):
    S = Q @ K.T
    top = S == S.max(axis=1, keepdims=True)
    return (top / top.sum(1, keepdims=True)) @ V, \
        np.tile(V.mean(0), (len(Q), 1))


def limits_by_numbers(Q, K, V):
    S = Q @ K.T / np.sqrt(K.shape[1])
    return softmax(S / 1e-9) @ V, softmax(S / 1e12) @ V


@pytest.mark.parametrize("answer, status, code", [
    (limits_by_ties, "correct", None),
    (limits_by_numbers, "correct", None),
    (None, "not done", "not-done"),
    (lambda Q, K, V: (V[np.argmax(Q @ K.T, axis=1)],
                      np.tile(V.mean(0), (len(Q), 1))), "wrong",
     "ties-not-averaged"),
    (lambda Q, K, V: (limits_by_ties(Q, K, V)[0], V.mean(0)), "wrong",
     "hot-one-row"),
    (lambda Q, K, V: limits_by_ties(Q, K, V)[::-1], "wrong", "pair-swapped"),
    (lambda Q, K, V: (softmax(Q @ K.T) @ V, limits_by_ties(Q, K, V)[1]),
     "wrong", "cold-not-the-limit"),
    (lambda Q, K, V: (limits_by_ties(Q, K, V)[0],
                      softmax(Q @ K.T) @ V), "wrong", "hot-not-the-limit"),
])
def test_limits_check(answer, status, code):
    verdict(checks.check_limits, [answer], status, code)


def test_a_limit_measured_by_construction_gets_no_auto_points():
    """A softmax written by hand at inverse temperature 1e300 and at 0
    answers every case (integer scores keep their ties exactly), so the
    check gives feedback and the points are the derivation's, read by the
    instructor."""
    def measured(Q, K, V):
        def soft(S):
            E = np.exp(S - S.max(axis=1, keepdims=True))
            return E / E.sum(axis=1, keepdims=True)
        S = Q @ K.T
        return soft(S * 1e300) @ V, soft(S * 0.0) @ V

    verdict(checks.check_limits, [measured], "correct")
    assert checks.check_limits.points == 0
    assert checks.check_limits.written and \
        checks.check_limits.written_points == 2


def test_limits_cases_hold_a_tie_for_the_best_key():
    for seed in range(10):
        for case in checks.check_limits.draw(np.random.default_rng(seed)):
            S = case["Q"] @ case["K"].T
            assert (S[0] == S[0].max()).sum() >= 2


# ------------------------------------------------------------ moved copy
SELF_MAP = library_attention(*(example.running_example().X @ W for W in (
    example.running_example().W_q, example.running_example().W_k,
    example.running_example().W_v)))[1]


def best_at_home(query):
    return divmod(int(np.argmax(SELF_MAP[query[0] * 8 + query[1]])), 8)


def predict(query, shift):
    r, c = best_at_home(query)
    return (r + shift[0]) % 8, (c + shift[1]) % 8


@pytest.mark.parametrize("answer, status, code", [
    (predict, "correct", None),
    (None, "not done", "not-done"),
    (lambda q, s: best_at_home(q), "wrong", "home-patch"),
    (lambda q, s: ((best_at_home(q)[0] - s[0]) % 8,
                   (best_at_home(q)[1] - s[1]) % 8), "wrong",
     "roll-backwards"),
    (lambda q, s: (best_at_home(q)[0] + s[0], best_at_home(q)[1] + s[1]),
     "wrong", "roll-not-cyclic"),
    (lambda q, s: 9, "wrong", "not-a-pair"),
    (lambda q, s: "a b", "wrong", "not-a-pair"),
])
def test_moved_check(answer, status, code):
    verdict(checks.check_moved, [answer], status, code)


def test_a_whole_patch_roll_permutes_the_tokens_and_their_maps():
    """The rule the exercise asks for holds for every shift and query."""
    ex = example.running_example()
    X1 = ex.X
    for shift in [(1, 0), (0, 3), (5, 7)]:
        img1, img2 = checks.moved_image(shift)
        assert np.array_equal(img1, ex.img)
        X2 = patches.center(patches.patchify(img2, 4))
        rows, cols = np.divmod(np.arange(64), 8)
        moved = ((rows + shift[0]) % 8) * 8 + (cols + shift[1]) % 8
        assert np.array_equal(X2[moved], X1)
        _, A12 = library_attention(X1 @ ex.W_q, X2 @ ex.W_k, X2 @ ex.W_v)
        assert np.allclose(A12[:, moved], SELF_MAP, rtol=0, atol=1e-12)


def test_moved_cases_are_queries_with_a_clear_winner():
    for seed in range(5):
        for case in checks.check_moved.draw(np.random.default_rng(seed)):
            row = np.sort(SELF_MAP[case["query"][0] * 8 + case["query"][1]])
            assert row[-1] - row[-2] >= 0.005
            assert all(1 <= s < 8 for s in case["shift"])


# ------------------------------------------------------------ noise
def edge_weights(noise, seed, images=200, scale=1.0, far=(37, 38),
                 order=(0, 1)):
    """The experiment, vectorised; wrong in a chosen way if asked."""
    rng = np.random.default_rng(seed)
    imgs = np.stack([data.two_squares(rng, noise=noise)
                     for _ in range(images)])
    X = patches.center(patches.patchify(imgs, 4))          # (images, 64, 16)
    w = library_softmax(scale * np.einsum("nd,nkd->nk", X[:, 1], X))
    pair = (w[:, list(far)].sum(axis=1).mean(), w[:, 1].mean())
    return tuple(pair[i] for i in order)


@pytest.mark.parametrize("answer, status, code", [
    (edge_weights, "correct", None),
    (None, "not done", "not-done"),
    (lambda n, s: edge_weights(n, s, order=(1, 0)), "wrong", "pair-swapped"),
    (lambda n, s: edge_weights(n, 0), "wrong", "seed-ignored"),
    (lambda n, s: edge_weights(n, np.random.randint(1 << 30)), "wrong",
     "not-seeded"),
    (lambda n, s: edge_weights(n, s, scale=0.25), "wrong", "off-the-expected"),
    (lambda n, s: edge_weights(n, s, far=(38,)), "wrong", "off-the-expected"),
    (lambda n, s: 0.3, "wrong", "not-two-numbers"),
    (lambda n, s: (0.9, 0.3 + s % 7 / 100), "wrong", "not-weights"),
])
def test_edge_weights_check(answer, status, code):
    verdict(checks.check_edge_weights, [answer], status, code)


def test_the_expected_weights_cross_between_the_noise_levels_drawn():
    """Low noise favours the far edge, high noise the query itself."""
    (far, own_), _ = judges._expected_weights(0.1)
    assert far > own_ + 0.1 and abs(far - 0.357) < 0.02
    (far, own_), _ = judges._expected_weights(0.4)
    assert own_ > far + 0.3
