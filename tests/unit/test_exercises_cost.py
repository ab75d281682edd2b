"""The chapter 7 checks accept right answers and explain wrong ones."""

import math

import numpy as np
import pytest

from exercise_answers import expect, hidden, run
from selfattention import blockwise, timing
from selfattention_exercises import cost


# ------------------------------------------------------------------ merge
def merge(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = np.maximum(m_a, m_b)
    shift = np.where(np.isneginf(m), 0.0, m)
    a, b = np.exp(m_a - shift), np.exp(m_b - shift)
    return m, a * l_a + b * l_b, a[:, None] * acc_a + b[:, None] * acc_b


def no_guard(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = np.maximum(m_a, m_b)
    a, b = np.exp(m_a - m), np.exp(m_b - m)
    return m, a * l_a + b * l_b, a[:, None] * acc_a + b[:, None] * acc_b


def no_rescale(m_a, l_a, acc_a, m_b, l_b, acc_b):
    return np.maximum(m_a, m_b), l_a + l_b, acc_a + acc_b


def flipped(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = np.maximum(m_a, m_b)
    a, b = np.exp(m - m_a), np.exp(m - m_b)
    return m, a * l_a + b * l_b, a[:, None] * acc_a + b[:, None] * acc_b


def wrong_max(m_a, l_a, acc_a, m_b, l_b, acc_b):
    _, l, acc = merge(m_a, l_a, acc_a, m_b, l_b, acc_b)
    return np.minimum(m_a, m_b), l, acc


def by_online_update(m_a, l_a, acc_a, m_b, l_b, acc_b):
    # folds an empty block in: it calls the library's own update
    S = np.full((len(m_a), 1), -np.inf)
    return blockwise.online_softmax_update(m_a, l_a, acc_a, S,
                                           np.zeros((1, acc_a.shape[1])))


@pytest.mark.parametrize("answer, status, code", [
    (merge, "correct", None),
    (None, "not done", "not-done"),
    (lambda *a: None, "not done", "not-done"),
    # checked by the run in the student's kernel, which reports a message
    (lambda *a: (1, 2), "wrong", "type"),
    (lambda *a: (a[0], a[1], a[2].T), "wrong", "shape"),
    (no_guard, "wrong", "empty-rows-nan"),
    (no_rescale, "wrong", "not-rescaled"),
    (flipped, "wrong", "overflow"),
    (wrong_max, "wrong", "not-the-max"),
    (lambda *a: (merge(*a)[0], 2 * merge(*a)[1], merge(*a)[2]), "wrong",
     "not-the-merge"),
    (lambda *a: 1 / 0, "wrong", "raised"),
])
def test_merge_check(answer, status, code):
    expect(run(cost.check_merge, answer), status, code)


def test_merge_calling_the_online_update_is_for_review():
    assert run(cost.check_merge, by_online_update).status == "for review"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_merge_passes_hidden_cases(seed):
    assert run(cost.check_merge, merge, seed).passed


# ------------------------------------------------------------------ depth
def depth(grid, k):
    return math.ceil((max(grid) - 1) / ((k - 1) // 2))


def side(k, d):
    # the honest search, written differently from the solution: per token,
    # attention 4d² + 2s²d against depth · k²d²
    r, largest = (k - 1) // 2, 0
    for s in range(2, 2 * k * k * d // r + 4):
        if 4 * d + 2 * s * s <= depth((s, s), k) * k * k * d:
            largest = s
    return largest


def one_layer_side(k, d):
    return math.isqrt((k * k - 4) * d // 2)


def side_without_projections(k, d):
    r, largest = (k - 1) // 2, 0
    for s in range(2, 2 * k * k * d // r + 4):
        if 2 * s * s <= depth((s, s), k) * k * k * d:
            largest = s
    return largest


def side_with_reach_k_minus_1(k, d):
    largest = 0
    for s in range(2, 2 * k * k * d + 4):
        if 4 * d + 2 * s * s <= math.ceil((s - 1) / (k - 1)) * k * k * d:
            largest = s
    return largest


@pytest.mark.parametrize("answer, status, code", [
    (depth, "correct", None),
    (lambda g, k: np.int64(depth(g, k)), "correct", None),
    (None, "not done", "not-done"),
    (lambda g, k: math.ceil((max(g) - 1) / (k - 1)), "wrong",
     "reach-k-minus-1"),
    (lambda g, k: math.ceil((min(g) - 1) / ((k - 1) // 2)), "wrong",
     "shorter-side"),
    (lambda g, k: math.ceil((g[0] + g[1] - 2) / ((k - 1) // 2)), "wrong",
     "distances-added"),
    (lambda g, k: (max(g) - 1) // ((k - 1) // 2) - 1, "wrong",
     "not-the-depth"),
    (lambda g, k: math.ceil(math.log(g[0] * g[1], k)), "wrong",
     "dilated-depth"),
    (lambda g, k: (max(g) - 1) / ((k - 1) // 2) + 0.5, "wrong",
     "not-whole"),
    (lambda g, k: (3, 4), "wrong", "type"),
    (lambda g, k: "55", "wrong", "type"),
])
def test_depth_check(answer, status, code):
    expect(cost.check_conv_depth.feedback(answer, side), status, code)


@pytest.mark.parametrize("answer, status, code", [
    (side, "correct", None),
    (lambda k, d: np.int64(side(k, d)), "correct", None),
    (None, "not done", "not-done"),
    (one_layer_side, "wrong", "one-layer"),
    (side_without_projections, "wrong", "no-projections"),
    (side_with_reach_k_minus_1, "wrong", "side-reach"),
    (lambda k, d: side(k, d) ** 2, "wrong", "tokens-not-side"),
    (lambda k, d: side(k, d) + 1, "wrong", "not-the-side"),
    (lambda k, d: [side(k, d)], "wrong", "side-type"),
])
def test_global_side_check(answer, status, code):
    expect(cost.check_conv_depth.feedback(depth, answer), status, code)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_depth_passes_hidden_cases(seed):
    hidden(cost.check_conv_depth, [depth, side], seeds=[seed])


def test_the_public_case_at_vit_b_width():
    # one 3 × 3 stack that sees a 3,454-pixel side costs what one attention
    # layer over it costs, far beyond one layer's break-even of 1,920 tokens
    assert side(3, 768) == 3454 and one_layer_side(3, 768) ** 2 < 1920


def watched(grid, k):
    # stacks the convolutions on the grid and watches the receptive field
    # of a corner grow: right on small grids, measured rather than derived
    seen = np.zeros(grid, bool)
    seen[0, 0] = True
    layers, r = 0, (k - 1) // 2
    while not seen.all():
        rows, cols = np.nonzero(seen)
        seen[:rows.max() + r + 1, :cols.max() + r + 1] = True
        layers += 1
    return layers


def test_depth_cannot_be_watched_on_the_last_case():
    ex = cost.check_conv_depth
    small = [c for c in ex.public_cases() if max(c["grid"]) < 100]
    fb = ex.assess(ex.attempt([watched, side], small), small)
    assert fb.passed                              # the route is right...
    expect(ex.feedback(watched, side), "wrong", "out-of-memory")


def test_depth_diagnoses_floor_on_a_grid_that_needs_rounding():
    ex = cost.check_conv_depth
    case = [{"grid": (8, 20), "k": 5, "d": 64}]
    fb = ex.assess(ex.attempt(
        [lambda g, k: (max(g) - 1) // ((k - 1) // 2), side], case), case)
    expect(fb, "wrong", "not-rounded-up")


# ------------------------------------------------------------------ memory
def memory(n, d, blocks, seed):
    Q, K, V = timing.random_qkv(n, d, np.random.default_rng(seed))
    return [timing.peak_bytes(blockwise.blockwise_attention, Q, K, V,
                              block=b) for b in blocks]


def memory64(n, d, blocks, seed):
    Q, K, V = (x.astype(np.float64) for x in
               timing.random_qkv(n, d, np.random.default_rng(seed)))
    return [timing.peak_bytes(blockwise.blockwise_attention, Q, K, V,
                              block=b) for b in blocks]


def memory_with_inputs(n, d, blocks, seed):
    def made_inside(b):
        Q, K, V = timing.random_qkv(n, d, np.random.default_rng(seed))
        return blockwise.blockwise_attention(Q, K, V, block=b)
    return [timing.peak_bytes(made_inside, b) for b in blocks]


def one_block_only(n, d, blocks, seed):
    return [4 * n * b for b in blocks]


@pytest.mark.parametrize("answer, status, code", [
    (memory, "correct", None),
    (None, "not done", "not-done"),
    (memory64, "wrong", "float64-tokens"),
    (memory_with_inputs, "wrong", "inputs-counted"),
    (one_block_only, "wrong", "not-traced"),
    (lambda n, d, blocks, seed: [1.0] * (len(blocks) + 1), "wrong",
     "shape"),
    (lambda n, d, blocks, seed: [-1.0] * len(blocks), "wrong", "not-positive"),
    (lambda n, d, blocks, seed: [2.5 * p for p in memory(n, d, blocks, seed)],
     "wrong", "off-the-expected"),
])
@pytest.mark.slow
def test_memory_check(answer, status, code):
    expect(run(cost.check_block_memory, answer), status, code)


@pytest.mark.slow
def test_memory_passes_hidden_cases():
    assert run(cost.check_block_memory, memory, 5).passed


def test_written_parts_are_declared():
    for ex in (cost.check_merge, cost.check_conv_depth,
               cost.check_block_memory):
        assert ex.written and ex.written_points >= 1
