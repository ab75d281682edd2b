"""Chapter 11's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest

from selfattention.exercises import misconceptions as checks
from selfattention.exercises.core import CORRECT, NOT_DONE, WRONG


def graded(exercise, *answers, seed=12345):
    """The grader's verdict on hidden cases drawn from ``seed``."""
    cases = exercise.draw(np.random.default_rng(seed))
    return exercise.assess(exercise.attempt(answers, cases), cases)


# ------------------------------------------------------------ same output
def null_direction(a, V, ones=True):
    rows = np.vstack([V.T, np.ones(len(a))]) if ones else V.T
    return np.linalg.svd(rows)[2][-1]              # u with rows @ u = 0


def same_output_row(a, V):
    u = null_direction(a, V)
    t = np.min(a[u < 0] / -u[u < 0])               # largest step, b >= 0
    return a + t * u


def half_step(a, V):
    return 0.5 * (a + same_output_row(a, V))


def too_far(a, V):
    return 2 * same_output_row(a, V) - a


@pytest.mark.parametrize("answer, status, words", [
    (same_output_row, CORRECT, []),
    (None, NOT_DONE, ["empty"]),
    (lambda a, V: None, NOT_DONE, ["returned None"]),
    (lambda a, V: a, WRONG, ["same row"]),
    (half_step, WRONG, ["reaches zero"]),
    (too_far, WRONG, ["negative", "too far"]),
    (lambda a, V: a + 0.01 * null_direction(a, V, ones=False), WRONG,
     ["sum(u) = 0", "row of ones"]),
    (lambda a, V: np.eye(len(a))[0], WRONG, ["differs", "u @ V = 0"]),
    (lambda a, V: 2 * a, WRONG, ["sum to"]),
    (lambda a, V: a[:-1], WRONG, ["shape"]),
    (lambda a, V: "b", WRONG, ["attention row"]),
])
def test_same_output_row(answer, status, words):
    fb = checks.check_same_output_row.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


@pytest.mark.parametrize("seed", range(5))
def test_same_output_row_on_hidden_cases(seed):
    assert graded(checks.check_same_output_row, same_output_row,
                  seed=seed).status == CORRECT


def test_same_output_cases_leave_room():
    for case in checks.check_same_output_row.public_cases():
        n, d_v = case["V"].shape
        assert n > d_v + 1 and np.all(case["a"] > 0)


# ------------------------------------------------------------ faithfulness
def blank(X, chosen):
    X = X.copy()
    X[np.arange(len(X))[:, None], chosen] = 0.0
    return X


def ranked_accuracy(predict, X, y, scores, k):
    order = np.argsort(-scores, axis=1)
    return float(np.mean(predict(blank(X, order[:, :k])) == y))


def ink_control(X, k, rng):
    chosen = np.zeros((len(X), k), dtype=int)
    for i, x in enumerate(X):
        ink = np.flatnonzero(np.abs(x).sum(-1) > 0)
        pick = rng.choice(ink, size=min(k, len(ink)), replace=False)
        chosen[i] = np.resize(pick, k) if len(pick) else 0
    return chosen


def faithfulness(predict, X, y, scores, k, seed):
    control = ink_control(X, k, np.random.default_rng(seed))
    return (ranked_accuracy(predict, X, y, scores, k),
            float(np.mean(predict(blank(X, control)) == y)))


def any_patch_control(predict, X, y, scores, k, seed):
    rng = np.random.default_rng(seed)
    chosen = np.array([rng.choice(X.shape[1], size=k, replace=False)
                       for _ in range(len(X))])
    return (ranked_accuracy(predict, X, y, scores, k),
            float(np.mean(predict(blank(X, chosen)) == y)))


def lowest_first(predict, X, y, scores, k, seed):
    return faithfulness(predict, X, y, -scores, k, seed)


def one_fewer(predict, X, y, scores, k, seed):
    return (ranked_accuracy(predict, X, y, scores, k - 1),
            faithfulness(predict, X, y, scores, k, seed)[1])


def unseeded(predict, X, y, scores, k, seed):
    return faithfulness(predict, X, y, scores, k,
                        int(np.random.default_rng().integers(2 ** 31)))


def fixed_seed(predict, X, y, scores, k, seed):
    return faithfulness(predict, X, y, scores, k, 0)


def every_ink_patch(predict, X, y, scores, k, seed):
    return (ranked_accuracy(predict, X, y, scores, k),
            float(np.mean(predict(blank(X, ink_control(X, 4 * k,
                  np.random.default_rng(seed)))) == y)))


@pytest.mark.parametrize("answer, status, words", [
    (faithfulness, CORRECT, []),
    (None, NOT_DONE, ["empty"]),
    (lambda *args: None, NOT_DONE, ["returned None"]),
    (any_patch_control, WRONG, ["any kind", "ink patches"]),
    (lowest_first, WRONG, ["lowest-scoring"]),
    (unseeded, WRONG, ["same seed"]),
    (fixed_seed, WRONG, ["every seed"]),
    (every_ink_patch, WRONG, ["too far"]),
    (lambda *args: (1.0, 2.0), WRONG, ["between 0 and 1"]),
    (lambda *args: 0.5, WRONG, ["pair"]),
])
def test_faithfulness(answer, status, words):
    fb = checks.check_faithfulness.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


def test_faithfulness_off_by_one_is_named():
    # k = 1 has no "k - 1" to compare with, so find a public case with k > 1
    ks = [c["k"] for c in checks.check_faithfulness.public_cases()]
    assert max(ks) > 1
    fb = checks.check_faithfulness.feedback(one_fewer)
    assert fb.status == WRONG and "k - 1" in fb.message


@pytest.mark.parametrize("seed", range(8))
def test_faithfulness_right_answer_passes_hidden_seeds(seed):
    """The tolerance is honest: the right control passes hidden draws."""
    assert graded(checks.check_faithfulness, faithfulness,
                  seed=seed).status == CORRECT


@pytest.mark.parametrize("seed", range(4))
def test_faithfulness_unfair_control_fails_hidden_seeds(seed):
    assert graded(checks.check_faithfulness, any_patch_control,
                  seed=seed).status == WRONG


def test_faithfulness_cases_have_blank_patches():
    for case in checks.check_faithfulness.public_cases():
        blank_share = np.mean(np.abs(case["X"]).sum(-1) == 0)
        assert 0.4 < blank_share < 0.6
        assert len(set(case["seeds"])) == len(case["seeds"])


# ------------------------------------------------------------ reading heads
def test_reading_heads_gradient_matches_finite_differences():
    X = checks.digit_patches()[:20]
    heads = checks.reading_heads(X)
    u = np.full(4, 0.25)

    def logit(X, sign):
        s = sign * 2.0 * X.sum(-1)
        a = np.exp(s - s.max(-1, keepdims=True))
        return (a / a.sum(-1, keepdims=True) * (X @ u)).sum(-1)

    h = 1e-6
    for name, sign in (("ink", 1.0), ("empty", -1.0)):
        a, ixg = heads[name]
        assert np.allclose(a.sum(-1), 1)
        for j in range(16):                 # d/dt logit(x with x_j·(1+t))
            up, down = X.copy(), X.copy()
            up[:, j] *= 1 + h
            down[:, j] *= 1 - h
            fd = (logit(up, sign) - logit(down, sign)) / (2 * h)
            assert np.allclose(fd, ixg[:, j], atol=1e-7)


def test_blank_patches_have_no_input_x_gradient():
    X = checks.digit_patches()[:50]
    blank_patch = np.abs(X).sum(-1) == 0
    for _a, ixg in checks.reading_heads(X).values():
        assert np.all(ixg[blank_patch] == 0)


@pytest.mark.parametrize("answer, status, words", [
    ((1, -1), CORRECT, []),
    (np.array([1, -1]), CORRECT, []),
    ((1, 1), WRONG, ["at least one"]),
    ((-1, 1), WRONG, ["at least one"]),
    (None, NOT_DONE, ["predicted_signs"]),
    ((1, 0), WRONG, ["+1 or -1"]),
    ((0.5, -1), WRONG, ["two signs"]),
    ("+-", WRONG, ["two signs"]),
    ((1, -1, 1), WRONG, ["two signs"]),
])
def test_reading_heads_signs(answer, status, words):
    fb = checks.check_reading_heads.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message
