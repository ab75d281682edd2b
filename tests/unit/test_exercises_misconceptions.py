"""Chapter 11's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest
import torch

from exercise_answers import expect, verdict
from selfattention_exercises import misconceptions as checks
from selfattention_course.judges import misconceptions as judges
from selfattention_exercises.core import (CORRECT, NOT_DONE, WRONG,
                                         Wrong)


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


@pytest.mark.parametrize("answer, status, code", [
    (same_output_row, CORRECT, None),
    (None, NOT_DONE, "not-done"),
    (lambda a, V: None, NOT_DONE, "not-done"),
    (lambda a, V: a, WRONG, "same-row"),
    (half_step, WRONG, "no-zero-weight"),
    (too_far, WRONG, "negative-weight"),
    (lambda a, V: a + 0.01 * null_direction(a, V, ones=False), WRONG,
     "sum-not-constrained"),
    (lambda a, V: np.eye(len(a))[0], WRONG, "output-changes"),
    (lambda a, V: 2 * a, WRONG, "not-weights"),
    (lambda a, V: a[:-1], WRONG, "shape"),
    (lambda a, V: "b", WRONG, "type"),
])
def test_same_output_row(answer, status, code):
    verdict(checks.check_same_output_row, [answer], status, code)


@pytest.mark.parametrize("seed", range(5))
def test_same_output_row_on_hidden_cases(seed):
    assert graded(checks.check_same_output_row, same_output_row,
                  seed=seed).status == CORRECT


@pytest.mark.parametrize("tiny", [1e-6, 1e-7])
def test_same_output_row_may_drop_a_tiny_softmax_weight(tiny):
    # The walk stops at the first weight to reach zero, which can be one
    # the softmax made very small; that key is still dropped.
    rng = np.random.default_rng(0)
    for _ in range(100):
        V = rng.standard_normal((6, 2))
        a = rng.dirichlet(np.ones(6))
        a[0] = tiny
        a /= a.sum()
        b = same_output_row(a, V)
        if b[0] <= 1e-6 * a[0]:                   # the tiny key went first
            break
    else:
        pytest.fail("no case where the walk drops the tiny weight")
    assert judges._same_output_judge(b, a, V) is None
    with pytest.raises(Wrong):                    # not a move that small
        judges._same_output_judge(a + 1e-3 * (b - a), a, V)


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


def drawn(X, k, rng, weighted=True):
    """k ink patches of each image, drawn in proportion to their ink (or
    uniformly); all of them when an image has fewer."""
    chosen = np.zeros((len(X), k), dtype=int)
    for i, x in enumerate(X):
        ink = np.abs(x).sum(-1)
        pool = np.flatnonzero(ink)
        p = ink[pool] / ink[pool].sum() if weighted and len(pool) else None
        pick = rng.choice(pool, size=min(k, len(pool)), replace=False, p=p)
        chosen[i] = np.resize(pick, k) if len(pick) else 0
    return chosen


def control_accuracy(predict, X, y, chosen):
    return float(np.mean(predict(blank(X, chosen)) == y))


def faithfulness(predict, X, y, scores, k, seed):
    """The Gumbel top-k trick: the k largest log(ink) + Gumbel noise are a
    draw without replacement in proportion to ink (blank patches last)."""
    rng = np.random.default_rng(seed)
    ink = np.abs(X).sum(-1)                                   # (N, n)
    with np.errstate(divide="ignore"):
        keys = np.log(ink) + rng.gumbel(size=ink.shape)
    chosen = np.argsort(-keys, axis=1)[:, :k]
    return (ranked_accuracy(predict, X, y, scores, k),
            control_accuracy(predict, X, y, chosen))


def faithfulness_by_choice(predict, X, y, scores, k, seed):
    chosen = drawn(X, k, np.random.default_rng(seed))
    return (ranked_accuracy(predict, X, y, scores, k),
            control_accuracy(predict, X, y, chosen))


def uniform_ink(predict, X, y, scores, k, seed):
    chosen = drawn(X, k, np.random.default_rng(seed), weighted=False)
    return (ranked_accuracy(predict, X, y, scores, k),
            control_accuracy(predict, X, y, chosen))


def any_patch(predict, X, y, scores, k, seed):
    rng = np.random.default_rng(seed)
    chosen = np.array([rng.choice(X.shape[1], size=k, replace=False)
                       for _ in range(len(X))])
    return (ranked_accuracy(predict, X, y, scores, k),
            control_accuracy(predict, X, y, chosen))


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


def too_many(predict, X, y, scores, k, seed):
    chosen = drawn(X, 3 * k, np.random.default_rng(seed))
    return (ranked_accuracy(predict, X, y, scores, k),
            control_accuracy(predict, X, y, chosen))


@pytest.mark.parametrize("answer, status, code", [
    (faithfulness, CORRECT, None),
    (None, NOT_DONE, "not-done"),
    (lambda *args: None, NOT_DONE, "not-done"),
    (uniform_ink, WRONG, "control-uniform"),
    (any_patch, WRONG, "control-any-patch"),
    (lowest_first, WRONG, "lowest-blanked"),
    (lambda *args: (abs(faithfulness(*args)[0] - 0.1),
                    faithfulness(*args)[1]), WRONG, "not-the-ranked"),
    (unseeded, WRONG, "not-seeded"),
    (fixed_seed, WRONG, "seed-ignored"),
    (too_many, WRONG, "not-the-control"),
    (lambda *args: (1.0, 2.0), WRONG, "not-a-share"),
    (lambda *args: 0.5, WRONG, "type"),
])
@pytest.mark.slow
def test_faithfulness(answer, status, code):
    verdict(checks.check_faithfulness, [answer], status, code)


@pytest.mark.slow
def test_faithfulness_off_by_one_is_named():
    # k = 1 has no "k - 1" to compare with: judge the case with k = 2 alone
    ex = checks.check_faithfulness
    cases = [c for c in ex.public_cases() if c["k"] > 1]
    assert cases
    fb = ex.assess(ex.attempt([one_fewer], cases), cases)
    expect(fb, WRONG, "one-fewer-blanked")


@pytest.mark.parametrize("answer, seed", [
    (faithfulness, 0), (faithfulness, 1), (faithfulness, 2),
    (faithfulness_by_choice, 3)])
@pytest.mark.slow
def test_faithfulness_right_answer_passes_hidden_seeds(answer, seed):
    """The tolerance is honest: right controls pass hidden draws."""
    fb = graded(checks.check_faithfulness, answer, seed=seed)
    assert fb.status == CORRECT, fb.message


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_faithfulness_uniform_control_fails_hidden_seeds(seed):
    fb = graded(checks.check_faithfulness, uniform_ink, seed=seed)
    expect(fb, WRONG, "control-uniform")


@pytest.mark.slow
def test_faithfulness_cases_have_blank_patches():
    for case in checks.check_faithfulness.public_cases():
        blank_share = np.mean(np.abs(case["X"]).sum(-1) == 0)
        assert 0.35 < blank_share < 0.55
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


@pytest.mark.parametrize("answer, status, code", [
    ((1, -1), CORRECT, None),
    (np.array([1, -1]), CORRECT, None),
    ((1, 1), WRONG, "signs-wrong"),
    ((-1, 1), WRONG, "signs-wrong"),
    (None, NOT_DONE, "not-done"),
    ((1, 0), WRONG, "not-a-sign"),
    ((0.5, -1), WRONG, "not-two-signs"),
    ("+-", WRONG, "not-two-signs"),
    ((1, -1, 1), WRONG, "not-two-signs"),
])
def test_reading_heads_signs(answer, status, code):
    verdict(checks.check_reading_heads, [answer], status, code)


# ------------------------------------------------------------ input × grad
def input_x_gradient(model, X, of=None):
    x = torch.from_numpy(X).requires_grad_(True)
    logits, _ = model(x)
    target = logits.argmax(1) if of is None else of(logits)
    picked = target if target.ndim == 1 and target.dtype.is_floating_point \
        else logits.gather(1, target[:, None])[:, 0]
    picked.sum().backward()
    return x.grad.numpy(), (X * x.grad.numpy()).sum(-1)


def right_ixg(model, X):
    return input_x_gradient(model, X)[1]


def library_ixg(model, X):
    from selfattention import interpret
    return (X * interpret.logit_gradient(model, X)).sum(-1)


def of_log_probability(logits):
    return torch.log_softmax(logits, 1).gather(
        1, logits.argmax(1)[:, None])[:, 0]


def of_probability(logits):
    return torch.softmax(logits, 1).gather(
        1, logits.argmax(1)[:, None])[:, 0]


def integrated(model, X, steps, alphas=None, of_path=False, times=True,
               mean=True):
    """Integrated gradients from the blank image, midpoint rule, with the
    slips the check names."""
    with torch.no_grad():
        fixed = model(torch.from_numpy(X))[0].argmax(1)
    alphas = (np.arange(steps) + 0.5) / steps if alphas is None else alphas
    total = 0.0
    for a in alphas:
        x = torch.from_numpy(a * X).requires_grad_(True)
        logits, _ = model(x)
        t = logits.argmax(1) if of_path else fixed
        logits.gather(1, t[:, None]).sum().backward()
        total = total + x.grad.numpy()
    g = total / steps if mean else total
    return (X * g).sum(-1) if times else g.sum(-1)


def by_batch(model, X, steps):
    """Another honest route: all points of the path in one batch, the
    predicted logit picked with a one-hot mask."""
    N = len(X)
    alpha = torch.arange(1, steps + 1, dtype=torch.float64) - 0.5
    path = (alpha[:, None, None, None] / steps * torch.from_numpy(X))
    path = path.reshape(steps * N, *X.shape[1:]).requires_grad_(True)
    with torch.no_grad():
        pred = model(torch.from_numpy(X))[0].argmax(1)
    logits, _ = model(path)
    onehot = torch.nn.functional.one_hot(pred, logits.shape[1]).repeat(
        steps, 1)
    (logits * onehot).sum().backward()
    g = path.grad.reshape(steps, N, *X.shape[1:]).mean(0).numpy()
    return (X * g).sum(-1)


@pytest.mark.parametrize("answer, status, code", [
    (integrated, CORRECT, None),
    (by_batch, CORRECT, None),
    (lambda m, X, s: torch.from_numpy(integrated(m, X, s)), CORRECT, None),
    (None, NOT_DONE, "not-done"),
    (lambda m, X, s: None, NOT_DONE, "not-done"),
    (lambda m, X, s: right_ixg(m, X), WRONG, "not-integrated"),
    (lambda m, X, s: integrated(m, X, s, np.arange(1, s + 1) / s), WRONG,
     "right-endpoints"),
    (lambda m, X, s: integrated(m, X, s, np.arange(s) / s), WRONG,
     "left-endpoints"),
    (lambda m, X, s: integrated(m, X, s, times=False), WRONG,
     "input-missing"),
    (lambda m, X, s: integrated(m, X, s, mean=False), WRONG,
     "not-averaged"),
    (lambda m, X, s: np.repeat(integrated(m, X, s)[..., None], 4, -1),
     WRONG, "not-summed"),
    (lambda m, X, s: integrated(m, X, s)[:, :4], WRONG, "shape"),
    (lambda m, X, s: 1.01 * integrated(m, X, s), WRONG,
     "not-integrated-gradients"),
])
@pytest.mark.slow
def test_integrated_gradients(answer, status, code):
    verdict(checks.check_integrated_gradients, [answer], status, code)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_integrated_gradients_on_hidden_cases(seed):
    for answer in (integrated, by_batch):
        fb = graded(checks.check_integrated_gradients, answer, seed=seed)
        assert fb.status == CORRECT, fb.message


@pytest.mark.slow
def test_a_class_taken_along_the_path_is_named_where_the_class_moves():
    # along the path from the blank image the predicted class can change;
    # where it does on a draw, the check names the slip, and it never
    # passes an answer that differs from integrated gradients
    codes = set()
    for seed in range(8):
        fb = graded(checks.check_integrated_gradients,
                    lambda m, X, s: integrated(m, X, s, of_path=True),
                    seed=seed)
        codes.add(fb.code)
    assert "class-moves" in codes and codes <= {"class-moves", "correct"}


class LinearInX(torch.nn.Module):
    """Logits linear in the patches, without bias: f(0) = 0, and every
    gradient is the same."""

    def __init__(self):
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(64, 3, dtype=torch.float64))

    def forward(self, x):
        return x.reshape(len(x), -1) @ self.W, None


def test_integrated_gradients_are_complete_on_a_model_linear_in_x():
    """On a model linear in x without bias every gradient is the same, so
    one step already sums to f(x) - f(0) = f(x) (completeness)."""
    torch.manual_seed(1)
    model = LinearInX()
    X = np.random.default_rng(1).random((4, 16, 4))
    logits = model(torch.from_numpy(X))[0].detach().numpy()
    assert np.allclose(judges_ig_linear(model, X), logits.max(1))


def judges_ig_linear(model, X):
    return integrated(model, X, 1).sum(1)


@pytest.mark.slow
def test_input_x_gradient_of_a_linear_model_is_exact():
    """On a model that is linear in x with no bias, x · grad sums to the
    logit (Euler): a reference independent of autograd's bookkeeping."""
    torch.manual_seed(0)
    model = LinearInX()
    X = np.random.default_rng(0).random((4, 16, 4))
    logits = model(torch.from_numpy(X))[0].detach().numpy()
    assert np.allclose(right_ixg(model, X).sum(1), logits.max(1))


@pytest.mark.slow
def test_faithfulness_judge_handles_an_image_without_ink():
    ex = checks.check_faithfulness
    case = ex.public_cases()[1]
    case["X"][0] = 0.0                          # a blank image
    case["y"] = judges._linear_predict(case["W"])(case["X"])
    fb = ex.assess(ex.attempt([faithfulness], [case]), [case])
    assert fb.status == CORRECT, fb.message
