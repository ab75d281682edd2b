"""Chapter 6's exercise checks accept right answers and explain wrong ones."""

import functools

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from exercise_answers import expect, hidden, run, verdict
from selfattention import interpret, patches, vit
from selfattention_models import mnist
from selfattention_models.digits import digit_split
from selfattention_exercises import transformer as checks
from selfattention_training.digits import train

# ------------------------------------------------------------ counts
def counts(n, d, h, d_mlp):
    return (4 * d * d + 2 * d * d_mlp + 9 * d + d_mlp,
            4 * n * d * d + 2 * n * n * d + 2 * n * d * d_mlp)


def built(n, d, h, d_mlp):                 # counted on a real block
    block = vit.Block(d, h, d_mlp)
    with FlopCounterMode(display=False) as flops:
        block(torch.zeros(1, n, d))
    return (sum(p.numel() for p in block.parameters()),
            flops.get_total_flops() // 2)


@pytest.mark.parametrize("n, d, h, d_mlp", [(17, 32, 4, 64), (5, 8, 2, 16),
                                            (50, 48, 6, 96)])
def test_the_formulas_count_what_pytorch_counts(n, d, h, d_mlp):
    assert counts(n, d, h, d_mlp) == built(n, d, h, d_mlp)


def shifted(dp=0, dm=0, heads=False):
    def answer(n, d, h, d_mlp):
        p, m = counts(n, d, h, d_mlp)
        extra = h if heads else 0
        return p + (dp(n, d, d_mlp) if dp else 0) + extra, \
            m + (dm(n, d, d_mlp) if dm else 0)
    return answer


@pytest.mark.parametrize("answer, status, code", [
    (counts, "correct", None),
    # counted with PyTorch's FlopCounterMode, a reference of the exercise
    (built, "for review", "for-review"),
    (None, "not done", "not-done"),
    (lambda n, d, h, d_mlp: None, "not done", "not-done"),
    (lambda n, d, h, d_mlp: 5, "wrong", "not-a-pair"),
    (shifted(heads=True), "wrong", "counts-depend-on-h"),
    (shifted(dp=lambda n, d, m: -4 * d), "wrong", "layernorms-missing"),
    (shifted(dp=lambda n, d, m: -(5 * d + m)), "wrong", "biases-missing"),
    (shifted(dp=lambda n, d, m: -(d * d + d)), "wrong",
     "output-projection-missing"),
    (shifted(dp=lambda n, d, m: 7), "wrong", "not-the-params"),
    (shifted(dm=lambda n, d, m: -2 * n * n * d), "wrong", "products-missing"),
    (shifted(dm=lambda n, d, m: -2 * n * d * m), "wrong", "mlp-missing"),
    (shifted(dm=lambda n, d, m: 4 * n * d * d + 2 * n * n * d
             + 2 * n * d * m), "wrong", "macs-doubled"),
    (shifted(dm=lambda n, d, m: -1), "wrong", "not-the-macs"),
    (shifted(dp=lambda n, d, m: -(m * d + d)), "wrong", "mlp-layer-missing"),
    (shifted(dp=lambda n, d, m: -(2 * d * d + 2 * d)), "wrong",
     "projections-missing"),
    (shifted(dm=lambda n, d, m: -n * n * d), "wrong", "one-product-counted"),
    (shifted(dm=lambda n, d, m: -3 * n * d * d), "wrong",
     "projections-missing"),
])
def test_block_counts_check(answer, status, code):
    verdict(checks.check_block_counts, [answer], status, code)


def test_block_counts_draws_head_counts_that_divide_the_width():
    for seed in range(20):
        for case in checks.check_block_counts.draw(
                np.random.default_rng(seed)):
            assert case["d"] % case["h"] == 0
            assert case["d"] % case["h_other"] == 0
            assert case["h"] != case["h_other"]


# ------------------------------------------------------------ rollout limit
def layer(maps, residual):
    m = maps.shape[-1]
    return residual * np.eye(m) + (1 - residual) * maps.mean(axis=0)


def rollout_limit(maps, residual):
    mu, V = np.linalg.eig(layer(maps, residual).T)
    one = np.argmin(np.abs(mu - 1))
    pi = V[:, one].real
    return pi / pi.sum(), float(np.delete(np.abs(mu), one).max())


def by_powers(maps, residual):
    """Another derivation: the rows of Â^(2^k) for the limit, the
    eigenvalues of Â minus the limit's projection for the rate."""
    A = layer(maps, residual)
    P = A
    for _ in range(12):
        P = P @ P
    rest = A - np.ones((len(A), 1)) @ P[:1]       # the 1 removed
    return P[0], float(np.abs(np.linalg.eigvals(rest)).max())


def through_rollout(maps, residual):
    """The limit from the library's rollout of many copies of the layer."""
    deep = np.broadcast_to(maps, (1, 400) + maps.shape)
    return interpret.rollout(deep, residual)[0, 0], 0.5


def second(A):
    mu = np.linalg.eigvals(A)
    mu = np.delete(mu, np.argmin(np.abs(mu - 1)))
    return mu[np.argmax(np.abs(mu))]


def with_rate(rate):
    return lambda maps, r: (rollout_limit(maps, r)[0], rate(maps, r))


def with_limit(limit):
    return lambda maps, r: (limit(maps, r), rollout_limit(maps, r)[1])


def summed_heads(maps, r):
    A = r * np.eye(maps.shape[-1]) + (1 - r) * maps.sum(axis=0)
    return float(abs(second(A / A.sum(-1, keepdims=True))))


def estimated(maps, r):
    A = layer(maps, r)
    P = np.linalg.matrix_power(A, 8)
    pi = rollout_limit(maps, r)[0]
    return float(np.abs(A @ P - pi).max() / np.abs(P - pi).max())


def test_the_limit_is_where_deep_rollout_goes_at_the_derived_rate():
    rng = np.random.default_rng(0)
    for case in checks.check_rollout_limit.draw(rng):
        maps, r = case["maps"], case["residual"]
        pi, rate = rollout_limit(maps, r)
        R = interpret.rollout(np.broadcast_to(maps, (1, 300) + maps.shape),
                              r)[0]
        assert np.allclose(R, pi, atol=1e-9)
        gaps = [np.abs(interpret.rollout(np.broadcast_to(
            maps, (1, L) + maps.shape), r)[0] - pi).max() for L in (40, 80)]
        assert np.isclose((gaps[1] / gaps[0]) ** (1 / 40), rate, rtol=0.05)


def test_the_residual_moves_the_rate_but_not_the_limit():
    case = checks.check_rollout_limit.public_cases()[0]
    maps = case["maps"]
    (pi0, rate0), (pi1, rate1) = (rollout_limit(maps, r) for r in (0.2, 0.7))
    assert np.allclose(pi0, pi1) and rate1 > rate0


@pytest.mark.parametrize("answer, status, code", [
    (rollout_limit, "correct", None),
    (by_powers, "correct", None),
    (None, "not done", "not-done"),
    (lambda maps, r: None, "not done", "not-done"),
    (lambda maps, r: rollout_limit(maps, r)[0], "wrong", "not-a-pair"),
    (through_rollout, "for review", "for-review"),
    (with_limit(lambda maps, r: np.tile(rollout_limit(maps, r)[0],
                                        (maps.shape[-1], 1))),
     "wrong", "shape"),
    (with_limit(lambda maps, r: np.full(maps.shape[-1],
                                        1 / maps.shape[-1])),
     "wrong", "right-eigenvector"),
    (with_limit(lambda maps, r: -3 * rollout_limit(maps, r)[0]), "wrong",
     "not-normalised"),
    (with_limit(lambda maps, r: rollout_limit(maps[:1], r)[0]), "wrong",
     "first-head-only"),
    (with_limit(lambda maps, r: np.linalg.matrix_power(layer(maps, r),
                                                       6)[0]),
     "wrong", "not-converged"),
    (with_limit(lambda maps, r: layer(maps, r).mean(axis=0)), "wrong",
     "not-the-limit"),
    (with_rate(lambda maps, r: second(layer(maps, r))), "wrong",
     "rate-not-modulus"),
    (with_rate(lambda maps, r: float(second(layer(maps, r)).real)), "wrong",
     "rate-not-modulus"),
    (with_rate(lambda maps, r: float(abs(second(maps.mean(0))))), "wrong",
     "identity-missing"),
    (with_rate(lambda maps, r: r + (1 - r) * float(abs(second(
        maps.mean(0))))), "wrong", "modulus-before-mixing"),
    (with_rate(summed_heads), "wrong", "heads-summed"),
    (with_rate(lambda maps, r: rollout_limit(maps[:1], r)[1]), "wrong",
     "first-head-only"),
    (with_rate(lambda maps, r: 1.0), "wrong", "largest-eigenvalue"),
    (with_rate(estimated), "wrong", "rate-estimated"),
    (with_rate(lambda maps, r: rollout_limit(maps, r)[1] ** 2), "wrong",
     "not-the-rate"),
    (with_rate(lambda maps, r: np.ones(2)), "wrong", "shape"),
])
def test_rollout_limit_check(answer, status, code):
    verdict(checks.check_rollout_limit, [answer], status, code)


def test_rollout_limit_check_passes_the_answers_on_hidden_cases():
    hidden(checks.check_rollout_limit, rollout_limit)
    hidden(checks.check_rollout_limit, by_powers)


# ------------------------------------------------------------ experiment
def test_no_position_public_case_is_the_chapters_seed():
    assert checks.check_no_position.public_cases() == [{"seed": 0}]
    assert checks.check_no_position.written


@pytest.mark.parametrize("out, status, code", [
    ((0.66, np.full((2, 4), 3.9)), "correct", None),
    ((0.66, np.full((2, 4), 3.9).tolist()), "correct", None),
    ((0.95, np.full((2, 4), 3.9)), "wrong", "position-used"),
    ((0.3, np.full((2, 4), 3.9)), "wrong", "off-the-expected"),
    ((66.0, np.full((2, 4), 3.9)), "wrong", "not-a-share"),
    ((0.66, np.full((4, 2), 3.9)), "wrong", "shape"),
    ((0.66, np.full((2, 4), 1.95)), "wrong", "distances-not-pixels"),
    ((0.66,), "wrong", "type"),
    (None, "not done", "not-done"),
])
def test_no_position_judge(out, status, code):
    verdict(checks.check_no_position, [lambda seed: out], status, code)


@pytest.mark.slow
def test_no_position_right_answer_passes_on_a_hidden_seed():
    data = digit_split()

    def distance_without_position(seed):
        model = train(data, position=False, seed=seed)
        _, maps = vit.forward(model, data.X_test)
        return (vit.accuracy(model, data.X_test, data.y_test),
                interpret.mean_attention_distance(maps, data.grid,
                                                  data.patch))

    cases = [{"seed": 11}]
    ex = checks.check_no_position
    fb = ex.assess(ex.attempt([distance_without_position], cases), cases)
    assert fb.status == "correct", fb.message


def test_the_no_position_experiment_gives_no_auto_points():
    """Its numbers could be trained at home for every case: the written
    part carries its points, and the grader runs none of it."""
    ex = checks.check_no_position
    assert ex.points == 0 and ex.written_points > 0


# ------------------------------------------------------------ shifted digits
def measured(name, images, labels, how="zero"):
    """Accuracy (S,), distances per head (S, L, h) and, unrenormalised,
    (S, L), of ``name`` on the digits ``images`` of classes ``labels``,
    moved as ``how`` says."""
    images = np.ascontiguousarray(images, dtype=float)
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    return _measured(name, images.tobytes(), labels.tobytes(), how)


@functools.lru_cache(maxsize=None)
def _measured(name, image_bytes, label_bytes, how):
    split = mnist.mnist_split()
    labels = np.frombuffer(label_bytes, dtype=np.int64)
    images = np.frombuffer(image_bytes).reshape(len(labels), 28, 28)
    model = mnist.load_vit(name)
    D = interpret.patch_distances(split.grid, split.patch)
    acc, dist, raw = [], [], []
    for s in checks.SHIFTS:
        if how == "wrap":
            moved = np.roll(images, (s, s), axis=(1, 2))
        else:
            k = 4 * s if how == "patches" else s
            padded = np.pad(images, ((0, 0), (k, k), (k, k)))
            r, c = {"zero": (0, 0), "back": (2 * k, 2 * k),
                    "right": (k, 0), "down": (0, k),
                    "patches": (0, 0)}[how]
            moved = padded[:, r:r + 28, c:c + 28]
        logits, maps = vit.forward(model, patches.patchify(moved, 4))
        acc.append(np.mean(logits.argmax(1) == labels))
        dist.append(interpret.mean_attention_distance(maps, split.grid,
                                                      split.patch))
        P = maps[:, :, :, 1:, 1:]
        raw.append((P * D).sum(-1).mean(axis=(0, 2, 3)))
    return np.array(acc), np.array(dist), np.array(raw)


def shift_test(name, images, labels):
    acc, dist, _ = measured(name, images, labels)
    return acc, dist.mean(-1)


def shift_answer(how="zero", acc=lambda a: a, dist=lambda d, raw: d):
    def answer(name, images, labels):
        a, d, raw = measured(name, images, labels, how)
        return acc(a), dist(d.mean(-1), raw)
    return answer


def heads_averaged_first(name, images, labels):
    """The slip of averaging each layer's map over the heads before
    measuring one distance, instead of averaging the heads' distances."""
    acc, _, _ = measured(name, images, labels)
    split = mnist.mnist_split()
    model = mnist.load_vit(name)
    dist = []
    for s in checks.SHIFTS:
        moved = np.pad(images, ((0, 0), (s, 0), (s, 0)))[:, :28, :28]
        _, maps = vit.forward(model, patches.patchify(moved, 4))
        dist.append(interpret.mean_attention_distance(
            maps.mean(axis=2, keepdims=True), split.grid, split.patch)[:, 0])
    return acc, np.array(dist)


def tabulated(name, images, labels):
    """A table of the 1,000 test digits measured at home, looked up by the
    nearest test digit (measured here only for the digits looked up, which
    gives the same numbers as the whole table would)."""
    split = mnist.mnist_split()
    gaps = ((images[:, None] - split.images_test[None]) ** 2).sum((2, 3))
    nearest = gaps.argmin(axis=1)
    return shift_test(name, split.images_test[nearest],
                      split.y_test[nearest])


def test_shift_cases_are_five_noisy_test_digits_drawn_anew():
    ex = checks.check_shift
    split = mnist.mnist_split()
    case = ex.public_cases()[0]
    images, labels = case["images"], case["labels"]
    assert images.shape == (5, 28, 28) and labels.shape == (5,)
    # each is a test digit of its class with noise of its own, in [0, 0.05]
    gaps = images[:, None] - split.images_test[None]
    nearest = np.abs(gaps).max(axis=(2, 3)).argmin(axis=1)
    noise = images - split.images_test[nearest]
    assert len(set(nearest)) == 5
    assert np.array_equal(labels, split.y_test[nearest])
    assert noise.min() >= 0 and noise.max() <= 0.05
    assert noise.std() > 0.01 and not np.allclose(noise[0], noise[1])
    again = ex.draw(np.random.default_rng(1))[0]
    assert not np.array_equal(again["images"], images)
    assert ex.points > 0 and ex.written_points > 0 and ex.written


@pytest.mark.parametrize("answer, status, code", [
    (None, "not done", "not-done"),
    (lambda name, images, labels: None, "not done", "not-done"),
    (lambda name, images, labels: np.zeros(5), "wrong", "type"),
    (lambda name, images, labels: (np.zeros(4), np.zeros((5, 4))), "wrong",
     "shape"),
    (lambda name, images, labels: (np.zeros(5), np.zeros((5, 4, 4))),
     "wrong", "shape"),
    (lambda name, images, labels: (np.full(5, 50.0), np.zeros((5, 4))),
     "wrong", "not-a-share"),
])
def test_shift_check_reads_the_form_of_the_answer(answer, status, code):
    verdict(checks.check_shift, [answer], status, code)


@pytest.mark.slow
@pytest.mark.parametrize("answer, status, code", [
    (shift_test, "correct", None),
    (shift_answer("back"), "wrong", "shifted-the-wrong-way"),
    (shift_answer("wrap"), "wrong", "wrapped-around"),
    (shift_answer("right"), "wrong", "one-axis-only"),
    (shift_answer("down"), "wrong", "one-axis-only"),
    (shift_answer("patches"), "wrong", "shifted-by-patches"),
    (shift_answer(acc=lambda a: np.full(5, a[0])), "wrong",
     "accuracy-unshifted"),
    (shift_answer(dist=lambda d, raw: d / 4), "wrong",
     "distances-in-patches"),
    (shift_answer(dist=lambda d, raw: raw), "wrong", "not-renormalised"),
    (shift_answer(dist=lambda d, raw: np.tile(d[:1], (5, 1))), "wrong",
     "distances-unshifted"),
    (heads_averaged_first, "wrong", "heads-averaged-first"),
    (shift_answer(acc=lambda a: a[::-1]), "wrong", "not-the-measurement"),
    # a table of the clean test digits: the noise moves the distances
    (tabulated, "wrong", "not-the-measurement"),
])
def test_shift_check_names_each_slip(answer, status, code):
    verdict(checks.check_shift, [answer], status, code)


@pytest.mark.slow
def test_shift_accepts_shares_computed_in_float32():
    """A share of 5 digits from torch, (pred == y).float().mean(1), is 0.6
    only to within 2.4e-8: the same count of digits, and right."""
    answer = shift_answer(acc=lambda a: torch.from_numpy(a).float().numpy())
    verdict(checks.check_shift, [answer], "correct")
    hidden(checks.check_shift, answer, seeds=range(2))


@pytest.mark.slow
def test_shift_right_answer_passes_on_hidden_digits():
    hidden(checks.check_shift, shift_test, seeds=range(2))


@pytest.mark.slow
def test_a_table_of_the_test_digits_does_not_answer_hidden_cases():
    """Exact per-digit numbers of the 1,000 test digits (the table a
    student could measure at home) earn nothing on the grader's digits,
    which the measurement itself answers."""
    for seed in range(2):
        expect(run(checks.check_shift, tabulated, seed), "wrong",
               "not-the-measurement")
    hidden(checks.check_shift, shift_test, seeds=range(2))
