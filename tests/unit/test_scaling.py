"""Unit and property tests of selfattention.scaling (chapter 2) and of the
kernel-free bar figure it is shown with (interactive.bar_explorer)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from selfattention import example, interactive, patches
from selfattention.attention import softmax
from selfattention.scaling import (LogitStats, jacobian_norm, logit_stats,
                                   scaling_experiment, softmax_jacobian)

logits = hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3,
                                                 max_side=6),
                    elements=st.floats(-8, 8, allow_nan=False, width=64))


# ------------------------------------------------------------ the Jacobian
@given(logits)
def test_jacobian_matches_finite_differences(s):
    s = s.reshape(-1, s.shape[-1])[0]
    J = softmax_jacobian(softmax(s))
    eps = 1e-6
    for j in range(s.size):
        step = np.zeros_like(s)
        step[j] = eps
        column = (softmax(s + step) - softmax(s - step)) / (2 * eps)
        np.testing.assert_allclose(J[:, j], column, atol=1e-7)


@given(logits)
def test_jacobian_is_symmetric_and_its_rows_sum_to_zero(s):
    J = softmax_jacobian(softmax(s))
    assert J.shape == s.shape + s.shape[-1:]
    np.testing.assert_allclose(J, np.swapaxes(J, -1, -2), atol=1e-15)
    np.testing.assert_allclose(J.sum(axis=-1), 0.0, atol=1e-12)


@given(logits)
def test_jacobian_norm_has_a_closed_form(s):
    p = softmax(s)
    sq, cube = (p ** 2).sum(-1), (p ** 3).sum(-1)
    closed = np.sqrt(np.maximum(sq - 2 * cube + sq ** 2, 0.0))
    np.testing.assert_allclose(jacobian_norm(p), closed, atol=1e-7)


def test_jacobian_norm_at_known_points():
    n = 16
    assert jacobian_norm(np.eye(n)[3]) == 0.0
    assert jacobian_norm(np.full(n, 1 / n)) == pytest.approx(np.sqrt(n - 1) / n)
    assert jacobian_norm(np.array([0.5, 0.5, 0.0])) == pytest.approx(0.5)


def test_jacobian_vanishes_as_the_row_saturates():
    s = np.random.default_rng(0).standard_normal(16)
    norms = [jacobian_norm(softmax(c * s)) for c in (4, 16, 64, 256)]
    assert norms == sorted(norms, reverse=True)
    assert norms[-1] < 1e-10


# ------------------------------------------------------------ statistics
def test_logit_stats_of_scores_that_need_no_scaling():
    S = np.array([[[0.0, 1.0], [2.0, 0.0]]])
    st_ = logit_stats(S, 1)
    assert st_.max_weight_raw == st_.max_weight_scaled
    assert st_.jacobian_raw == st_.jacobian_scaled
    assert st_.logit_std == pytest.approx(S.std())
    p = softmax(S)
    assert st_.max_weight_raw == pytest.approx(p.max(-1).mean())


def test_logit_stats_scaling_flattens_the_rows():
    S = 10 * np.random.default_rng(1).standard_normal((4, 8, 8))
    st_ = logit_stats(S, 100)
    assert st_.max_weight_scaled < st_.max_weight_raw
    assert isinstance(st_, LogitStats) and st_.d_k == 100


def test_dot_products_of_unit_components_have_variance_d_k():
    rng = np.random.default_rng(5)
    for d_k in (4, 64, 1024):
        q, k = rng.standard_normal((2, 4000, d_k))
        assert np.var((q * k).sum(-1)) / d_k == pytest.approx(1.0, abs=0.08)


def test_digit_experiment_reproduces_the_table():
    T = patches.digit_patch_tokens()
    rows = scaling_experiment(T, [4, 16, 64, 256, 1024],
                              example.running_example().rng)
    got = [f"{r.d_k} {r.logit_std:.1f} {r.max_weight_raw:.2f}/"
           f"{r.max_weight_scaled:.2f} {r.jacobian_raw:.3f}/"
           f"{r.jacobian_scaled:.3f}" for r in rows]
    assert got == ["4 2.0 0.28/0.17 0.313/0.285",
                   "16 4.1 0.45/0.18 0.318/0.289",
                   "64 8.2 0.60/0.18 0.269/0.288",
                   "256 16.3 0.74/0.18 0.200/0.290",
                   "1024 32.1 0.81/0.17 0.142/0.289"]


def test_experiment_draws_query_then_key_weights_from_the_stream():
    T = np.random.default_rng(2).standard_normal((3, 5, 4))
    rng = np.random.default_rng(9)
    (got,) = scaling_experiment(T, [8], rng)
    ref = np.random.default_rng(9)
    Gq = ref.standard_normal((3, 4, 8)) / 2.0
    Gk = ref.standard_normal((3, 4, 8)) / 2.0
    S = (T @ Gq) @ (T @ Gk).transpose(0, 2, 1)
    assert got == logit_stats(S, 8)
    assert rng.standard_normal() == ref.standard_normal()    # same state


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize("call, error, name", [
    (lambda: softmax_jacobian("p"), TypeError, "p"),
    (lambda: softmax_jacobian([0.5, 0.6]), ValueError, "p"),
    (lambda: softmax_jacobian([1.5, -0.5]), ValueError, "p"),
    (lambda: softmax_jacobian([np.nan, 1.0]), ValueError, "p"),
    (lambda: jacobian_norm(np.float64(1.0)), ValueError, "p"),
    (lambda: logit_stats(np.zeros(3), 4), ValueError, "S"),
    (lambda: logit_stats(np.zeros((2, 2)), 0), ValueError, "d_k"),
    (lambda: logit_stats(np.zeros((2, 2)), 2.5), TypeError, "d_k"),
    (lambda: scaling_experiment(np.zeros((4, 2)), [4],
                                np.random.default_rng()), ValueError, "T"),
    (lambda: scaling_experiment(np.zeros((1, 4, 2)), [4], 0), TypeError,
     "rng"),
    (lambda: scaling_experiment(np.zeros((1, 4, 2)), [0],
                                np.random.default_rng()), ValueError,
     r"d_ks\[0\]"),
    (lambda: scaling_experiment(np.zeros((1, 4, 2)), 4,
                                np.random.default_rng()), TypeError, "d_ks"),
    (lambda: scaling_experiment(np.zeros((1, 4, 2)), [4],
                                np.random.default_rng(), weight_scale=-1.0),
     ValueError, "weight_scale"),
])
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=f"^{name}"):
        call()


# ------------------------------------------------------------ bar_explorer
def bars():
    return np.random.default_rng(3).random((3, 2, 5))


def test_bar_explorer_is_self_contained_and_stable():
    html = interactive.bar_explorer(bars(), ["a", "b", "c"], ["raw", "scaled"],
                                    title="rows").data
    again = interactive.bar_explorer(bars(), ["a", "b", "c"],
                                     ["raw", "scaled"], title="rows").data
    assert html == again
    assert html.count('data-choice="') == 3
    assert 'data-testid="bar-explorer"' in html and "<script>" in html
    assert "http" not in html                       # nothing loaded from a CDN
    assert f"{bars()[2, 1, 4]:.4f}".rstrip("0") in html


def test_bar_explorer_escapes_labels():
    html = interactive.bar_explorer(bars(), ["<b>", "b", "c"], ["x", "y"],
                                    title="</script>").data
    assert "<b>" not in html and "</script>" not in html.split("<script>")[0]
    assert html.count("</script>") == 1


@pytest.mark.parametrize("kwargs, words", [
    (dict(values=np.zeros((2, 5))), ["shape"]),
    (dict(values=-bars()), ["non-negative"]),
    (dict(choices=["a"]), ["choices", "3"]),
    (dict(series=["a", "b", "c"]), ["series", "2"]),
    (dict(choice=3), ["choice", "between"]),
])
def test_bar_explorer_rejects_bad_input(kwargs, words):
    args = dict(values=bars(), choices=["a", "b", "c"], series=["r", "s"])
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        interactive.bar_explorer(**args)
    for word in words:
        assert word in str(info.value)
