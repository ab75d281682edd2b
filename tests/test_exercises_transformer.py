"""Chapter 6's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from exercise_answers import own, verdict
from selfattention import interpret, vit
from selfattention.exercises import transformer as checks

rollout = own(interpret.rollout)


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


# ------------------------------------------------------------ rollout
def reversed_order(maps, residual):
    N, L, h, m, _ = maps.shape
    R = np.broadcast_to(np.eye(m), (N, m, m))
    for layer in range(L):
        A = (1 - residual) * maps[:, layer].mean(1) + residual * np.eye(m)
        R = R @ (A / A.sum(-1, keepdims=True))
    return R


def heads_summed(maps, residual):
    return rollout(maps * maps.shape[2], residual)


@pytest.mark.parametrize("answer, status, code", [
    (rollout, "correct", None),
    (None, "not done", "not-done"),
    (lambda maps, r: None, "not done", "not-done"),
    (reversed_order, "wrong", "layers-wrong-order"),
    (lambda maps, r: rollout(maps, 0.0), "wrong", "identity-missing"),
    (heads_summed, "wrong", "heads-summed"),
    (lambda maps, r: rollout(maps[:, :, :1], r), "wrong", "first-head-only"),
    (lambda maps, r: rollout(maps, r)[:, 0], "wrong", "shape"),
    (lambda maps, r: rollout(maps, 1 - r), "wrong", "not-the-rollout"),
    (interpret.rollout, "for review", "for-review"),
])
def test_rollout_check(answer, status, code):
    verdict(checks.check_rollout, [answer], status, code)


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
    data = vit.digit_split()

    def distance_without_position(seed):
        model = vit.train(data, position=False, seed=seed)
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
