"""Chapter 6's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from exercise_answers import own
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


@pytest.mark.parametrize("answer, status, words", [
    (counts, "correct", []),
    (built, "correct", []),
    (None, "not done", ["empty"]),
    (lambda n, d, h, d_mlp: None, "not done", ["None"]),
    (lambda n, d, h, d_mlp: 5, "wrong", ["pair"]),
    (shifted(heads=True), "wrong", ["change with h"]),
    (shifted(dp=lambda n, d, m: -4 * d), "wrong", ["LayerNorms"]),
    (shifted(dp=lambda n, d, m: -(5 * d + m)), "wrong", ["biases"]),
    (shifted(dp=lambda n, d, m: -(d * d + d)), "wrong", ["W_O"]),
    (shifted(dp=lambda n, d, m: 7), "wrong", ["more than"]),
    (shifted(dm=lambda n, d, m: -2 * n * n * d), "wrong", ["both products"]),
    (shifted(dm=lambda n, d, m: -2 * n * d * m), "wrong", ["the MLP"]),
    (shifted(dm=lambda n, d, m: 4 * n * d * d + 2 * n * n * d
             + 2 * n * d * m), "wrong", ["twice"]),
    (shifted(dm=lambda n, d, m: -1), "wrong", ["fewer than"]),
])
def test_block_counts_check(answer, status, words):
    fb = checks.check_block_counts.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


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


@pytest.mark.parametrize("answer, status, words", [
    (rollout, "correct", []),
    (None, "not done", ["empty"]),
    (lambda maps, r: None, "not done", ["None"]),
    (reversed_order, "wrong", ["wrong order"]),
    (lambda maps, r: rollout(maps, 0.0), "wrong", ["identity is missing"]),
    (heads_summed, "wrong", ["summed"]),
    (lambda maps, r: rollout(maps[:, :, :1], r), "wrong", ["first head"]),
    (lambda maps, r: rollout(maps, r)[:, 0], "wrong", ["shape"]),
    (lambda maps, r: rollout(maps, 1 - r), "wrong", ["differs"]),
    (interpret.rollout, "for review", ["rollout"]),
])
def test_rollout_check(answer, status, words):
    fb = checks.check_rollout.feedback(answer)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


# ------------------------------------------------------------ experiment
def test_no_position_public_case_is_the_chapters_seed():
    assert checks.check_no_position.public_cases() == [{"seed": 0}]
    assert checks.check_no_position.written


@pytest.mark.parametrize("out, status, words", [
    ((0.66, np.full((2, 4), 3.9)), "correct", []),
    ((0.66, np.full((2, 4), 3.9).tolist()), "correct", []),
    ((0.95, np.full((2, 4), 3.9)), "wrong", ["position=False"]),
    ((0.3, np.full((2, 4), 3.9)), "wrong", ["55%"]),
    ((66.0, np.full((2, 4), 3.9)), "wrong", ["[0, 1]"]),
    ((0.66, np.full((4, 2), 3.9)), "wrong", ["(L, h)"]),
    ((0.66, np.full((2, 4), 1.95)), "wrong", ["pixels"]),
    ((0.66,), "wrong", ["pair"]),
    (None, "not done", ["None"]),
])
def test_no_position_judge(out, status, words):
    fb = checks.check_no_position.feedback(lambda seed: out)
    assert fb.status == status, fb.message
    for word in words:
        assert word in fb.message


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
