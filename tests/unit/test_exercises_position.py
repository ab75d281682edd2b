"""Chapter 5's exercise checks accept right answers and explain wrong ones."""

import numpy as np
import pytest

from exercise_answers import expect, hidden, verdict
from selfattention import position as lib
from selfattention_exercises import position as checks
from selfattention_course.judges import position as judges



def relative_position_bias(table, rows, cols):
    r, c = np.divmod(np.arange(rows * cols), cols)
    return table[r[:, None] - r[None, :] + rows - 1,
                 c[:, None] - c[None, :] + cols - 1]


# ------------------------------------------------------------------ shift
def shift_matrix(d, k, base):
    """Pair i turns by k·ω_i; the code is a column on the right."""
    omega = base ** (-np.arange(0, d, 2) / d)            # (d/2,)
    c, s = np.cos(k * omega), np.sin(k * omega)
    M = np.zeros((d, d))
    i = np.arange(0, d, 2)
    M[i, i], M[i, i + 1], M[i + 1, i], M[i + 1, i + 1] = c, s, -s, c
    return M


def fitted_shift(d, k, base):
    """M from codes at random real positions, by least squares."""
    t = np.random.default_rng(0).uniform(0, 1000, 4 * d)
    omega = base ** (-np.arange(0, d, 2) / d)

    def codes(t):
        E = np.empty((t.size, d))
        E[:, 0::2], E[:, 1::2] = (np.sin(np.outer(t, omega)),
                                  np.cos(np.outer(t, omega)))
        return E

    return np.linalg.lstsq(codes(t), codes(t + k), rcond=None)[0].T


def halves_shift(d, k, base):
    order = np.r_[np.arange(0, d, 2), np.arange(1, d, 2)]
    return shift_matrix(d, k, base)[np.ix_(order, order)]   # sines first


def mixing_shift(d, k, base):
    M = shift_matrix(d, k, base)
    M[0, -1] = 0.5
    return M


@pytest.mark.parametrize("answer, status, code", [
    (shift_matrix, "correct", None),
    (fitted_shift, "correct", None),
    (None, "not done", "not-done"),
    (lambda d, k, base: None, "not done", "not-done"),
    (lambda d, k, base: shift_matrix(d, -k, base), "wrong", "transposed"),
    (lambda d, k, base: shift_matrix(d, k, base).T, "wrong", "transposed"),
    (lambda d, k, base: shift_matrix(d, 1, base), "wrong", "k-missing"),
    (lambda d, k, base: shift_matrix(d, k, np.sqrt(base)), "wrong",
     "exponent-i-over-d"),
    (lambda d, k, base: shift_matrix(d, k, 10000.0), "wrong",
     "base-ignored"),
    (halves_shift, "wrong", "halves-layout"),
    (mixing_shift, "wrong", "mixes-pairs"),
    (lambda d, k, base: np.eye(d), "wrong", "not-the-shift"),
    (lambda d, k, base: np.eye(d + 1), "wrong", "shape"),
    (lambda d, k, base: "M", "wrong", "type"),
    (lambda d, k, base: 1 / 0, "wrong", "raised"),
    (lambda d, k, base: (lib.sinusoidal_1d(2, d), shift_matrix(d, k, base))[1],
     "for review", "for-review"),
])
def test_shift_check(answer, status, code):
    verdict(checks.check_shift, [answer], status, code)


def test_the_shift_moves_the_library_s_codes():
    rng = np.random.default_rng(5)
    for _ in range(20):
        d, k = 2 * int(rng.integers(1, 20)), int(rng.integers(-30, 30))
        base = float(10 ** rng.uniform(1, 5))
        E = lib.sinusoidal_1d(80, d, base=base)
        t = np.arange(max(0, -k), min(80, 80 - k))
        assert np.allclose(E[t + k], E[t] @ judges.shift_reference(
            d, k, base).T)
        assert checks.check_shift.feedback(shift_matrix).passed


def test_the_shift_gets_full_marks_on_hidden_cases():
    hidden(checks.check_shift, [shift_matrix])


def bias_gradient(G, rows, cols):
    """Right: each entry sums G over the pairs at its offset."""
    r, c = np.divmod(np.arange(rows * cols), cols)
    grad = np.zeros((2 * rows - 1, 2 * cols - 1))
    np.add.at(grad, (r[:, None] - r[None, :] + rows - 1,
                     c[:, None] - c[None, :] + cols - 1), G)
    return grad


def looped_gradient(G, rows, cols):
    """Right, by a loop over the table's entries."""
    grad = np.zeros((2 * rows - 1, 2 * cols - 1))
    for a in range(2 * rows - 1):
        for b in range(2 * cols - 1):
            one = np.zeros_like(grad)
            one[a, b] = 1.0
            grad[a, b] = (relative_position_bias(one, rows, cols) * G).sum()
    return grad


def fancy_indexed_gradient(G, rows, cols):
    r, c = np.divmod(np.arange(rows * cols), cols)
    grad = np.zeros((2 * rows - 1, 2 * cols - 1))
    grad[r[:, None] - r[None, :] + rows - 1,
         c[:, None] - c[None, :] + cols - 1] += G      # keeps one pair each
    return grad


def autograd_gradient(G, rows, cols):
    import torch

    t = torch.zeros((2 * rows - 1, 2 * cols - 1), dtype=torch.float64,
                    requires_grad=True)
    r, c = np.divmod(np.arange(rows * cols), cols)
    B = t[torch.from_numpy(r[:, None] - r[None, :] + rows - 1),
          torch.from_numpy(c[:, None] - c[None, :] + cols - 1)]
    (B * torch.from_numpy(G)).sum().backward()
    return t.grad.numpy()


@pytest.mark.parametrize("answer, status, code", [
    (bias_gradient, "correct", None),
    (looped_gradient, "correct", None),
    (None, "not done", "not-done"),
    (lambda G, r, c: None, "not done", "not-done"),
    (lambda G, r, c: bias_gradient(G.T, r, c), "wrong", "offset-reversed"),
    (fancy_indexed_gradient, "wrong", "duplicates-dropped"),
    (lambda G, r, c: bias_gradient(G, r, c)
     / bias_gradient(np.ones_like(G), r, c), "wrong", "mean-not-sum"),
    (lambda G, r, c: judges.bias_gradient_reference(G, r, c,
                                                    row_major=False),
     "wrong", "not-row-major"),
    (lambda G, r, c: 2 * bias_gradient(G, r, c), "wrong", "not-the-gradient"),
    (lambda G, r, c: np.zeros((r, c)), "wrong", "shape"),
    (lambda G, r, c: lib.relative_position_bias(np.ones((2 * r - 1,
                                                         2 * c - 1)), (r, c))
     and bias_gradient(G, r, c), "for review", "for-review"),
    (autograd_gradient, "for review", "for-review"),
])
def test_bias_gradient_check(answer, status, code):
    verdict(checks.check_bias_gradient, [answer], status, code)


def test_bias_gradient_passes_hidden_draws_and_its_cases_are_not_square():
    hidden(checks.check_bias_gradient, bias_gradient)
    for seed in range(5):
        for case in checks.check_bias_gradient.draw(
                np.random.default_rng(seed)):
            assert case["rows"] != case["cols"]
            assert case["G"].shape == (case["rows"] * case["cols"],) * 2


def test_the_gradient_of_a_sum_of_b_counts_the_pairs_of_each_offset():
    """With G = 1 every entry counts the pairs at its offset (the written
    part's count), here tallied pair by pair."""
    R, C = 4, 6
    pairs = judges.bias_gradient_reference(np.ones((R * C, R * C)), R, C)
    tally = np.zeros_like(pairs)
    for i in range(R * C):
        for j in range(R * C):
            (ri, ci), (rj, cj) = divmod(i, C), divmod(j, C)
            tally[ri - rj + R - 1, ci - cj + C - 1] += 1
    assert np.array_equal(pairs, tally)
    assert pairs.max() == R * C and pairs.min() == 1


# ------------------------------------------------------------ equivariance
def still_equivariant(table, rows, cols, perm):
    B = relative_position_bias(table, rows, cols)
    back = np.argsort(perm)
    return bool(np.allclose(B[back][:, back], B))


def by_attention(table, rows, cols, perm):
    """A run of attention with the bias on random tokens, by hand."""
    n = rows * cols
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((n, n)), rng.standard_normal((3, n, n))
    B = relative_position_bias(table, rows, cols)

    def f(X):
        S = (X @ W[0]) @ (X @ W[1]).T + B
        A = np.exp(S - S.max(axis=1, keepdims=True))
        return (A / A.sum(axis=1, keepdims=True)) @ (X @ W[2])

    return bool(np.allclose(f(X[perm]), f(X)[perm]))


def torus(table, rows, cols, perm):
    """Believes that a cyclic shift keeps every offset."""
    r, c = np.divmod(np.arange(rows * cols), cols)
    dr, dc = r[perm] - r, c[perm] - c
    return bool(still_equivariant(table, rows, cols, perm)
                or (np.all(dr % rows == dr[0] % rows)
                    and np.all(dc % cols == dc[0] % cols)))


@pytest.mark.parametrize("answer, status, code", [
    (still_equivariant, "correct", None),
    (lambda t, r, c, p: still_equivariant(t, r, c, np.argsort(p)),
     "correct", None),
    (by_attention, "correct", None),
    (None, "not done", "not-done"),
    (lambda t, r, c, p: False, "wrong", "identity"),
    (lambda t, r, c, p: still_equivariant(t, r, c, p)
     and not np.array_equal(p, np.arange(r * c)), "wrong", "identity"),
    (lambda t, r, c, p: True, "wrong", "broken-missed"),
    (lambda t, r, c, p: bool(np.array_equal(p, np.arange(r * c))), "wrong",
     "symmetry-missed"),
    (torus, "wrong", "not-a-torus"),
    (lambda t, r, c, p: 1, "wrong", "type"),
    (lambda t, r, c, p: np.bool_(still_equivariant(t, r, c, p)), "correct",
     None),
    (lambda t, r, c, p: [True], "wrong", "type"),
])
def test_bias_equivariance_check(answer, status, code):
    verdict(checks.check_bias_equivariance, [answer], status, code)


def test_the_cases_agree_with_attention_and_mix_both_answers():
    """The judge's truth is what attention with the bias does, and every
    draw holds shuffles that keep equivariance and shuffles that break it."""
    for seed in range(3):
        cases = checks.check_bias_equivariance.draw(
            np.random.default_rng(seed))
        truths = [still_equivariant(**case) for case in cases]
        assert truths == [by_attention(**case) for case in cases]
        assert 4 <= sum(truths) <= len(truths) - 4


def test_a_stateful_answer_cannot_replay_the_order_of_the_cases():
    ex = checks.check_bias_equivariance
    orders = {tuple(still_equivariant(**case) for case in
                    ex.draw(np.random.default_rng(seed)))
              for seed in range(5)}
    assert len(orders) > 1


def test_bias_equivariance_gets_full_marks_on_hidden_cases():
    hidden(checks.check_bias_equivariance, [still_equivariant])
    assert checks.check_bias_equivariance.written


# ------------------------------------------------------------ experiment
def test_position_experiment_public_case_is_the_chapters_run():
    assert checks.check_positions.public_cases() == [
        {"kind": "sinusoidal", "seed": 0}]
    kinds = {case["kind"] for seed in range(30) for case in
             checks.check_positions.draw(np.random.default_rng(seed))}
    assert kinds == set(judges.KINDS)


@pytest.mark.parametrize("kind, out, status, code", [
    ("learned", (0.92, 0.17), "correct", None),
    ("sinusoidal", (0.9, 0.12), "correct", None),
    ("none", (0.6, 0.6), "correct", None),
    ("none", (0.6, 0.58), "wrong", "no-position-differs"),
    ("none", (0.93, 0.93), "wrong", "off-the-expected"),
    ("sinusoidal", (0.61, 0.61), "wrong", "codes-moved-with-patches"),
    ("learned", (0.6, 0.1), "wrong", "intact-too-low"),
    ("learned", (0.92, 0.9), "wrong", "shuffled-too-high"),
    ("learned", (92, 17), "wrong", "not-a-share"),
    ("learned", 0.92, "wrong", "type"),
])
def test_position_experiment_judge(kind, out, status, code):
    cases = [{"kind": kind, "seed": 7}]
    answer = lambda k, s: out                     # noqa: E731
    ex = checks.check_positions
    expect(ex.assess(ex.attempt([answer], cases), cases, replay=False),
           status, code)


def test_position_experiment_check_reports_not_done():
    fb = checks.check_positions.feedback(lambda kind, seed: None)
    assert fb.status == "not done"
    assert checks.check_positions.feedback(None).status == "not done"


def test_the_position_experiment_gives_no_auto_points():
    """Its numbers could be trained at home for every case: the written
    part carries its points, and the grader runs none of it."""
    ex = checks.check_positions
    assert ex.points == 0 and ex.written_points > 0
