"""Reading a trained tiny ViT: distances, rollout, ablation, attributions."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from selfattention import interpret, vit


def fresh_model(seed=0, **options):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return vit.TinyViT(**options).double().eval()


def random_maps(rng, N=2, L=2, h=3, m=17):
    """Row-stochastic maps of shape (N, L, h, m, m)."""
    A = rng.random((N, L, h, m, m)) ** 4
    return A / A.sum(-1, keepdims=True)


# ------------------------------------------------------------ distances
def test_patch_distances_on_a_grid_that_is_not_square():
    D = interpret.patch_distances((2, 3), 2)
    assert D.shape == (6, 6)
    assert np.allclose(D, D.T) and np.all(np.diag(D) == 0)
    assert D[0, 1] == 2 and D[0, 3] == 2            # right and below
    assert D[0, 5] == pytest.approx(2 * np.hypot(1, 2))


def test_mean_attention_distance_of_simple_maps():
    grid, n = (4, 4), 16
    D = interpret.patch_distances(grid, 2)
    uniform = np.full((1, 1, 1, n + 1, n + 1), 1 / (n + 1))
    assert interpret.mean_attention_distance(uniform, grid, 2)[0, 0] == \
        pytest.approx(D.mean())
    to_self = np.zeros((1, 1, 1, n + 1, n + 1))
    to_self[..., 0, 0] = 1
    to_self[..., 1:, 1:] = 0.5 * np.eye(n)        # half on itself,
    to_self[..., 1:, 0] = 0.5                      # half on the class token
    assert interpret.mean_attention_distance(to_self, grid, 2)[0, 0] == 0
    right = np.zeros((3, 1, 2, n + 1, n + 1))     # every query: its right
    right[..., 0, 0] = 1                           # neighbour, wrapping
    for j in range(n):
        r, c = divmod(j, 4)
        right[..., 1 + j, 1 + 4 * r + (c + 1) % 4] = 1
    expected = (12 * 2 + 4 * 6) / 16               # 12 at 2 px, 4 at 6 px
    assert np.allclose(interpret.mean_attention_distance(right, grid, 2),
                       expected)


def test_cls_attention_is_the_head_averaged_class_row():
    maps = random_maps(np.random.default_rng(0))
    a = interpret.cls_attention(maps, layer=0)
    assert a.shape == (2, 16)
    assert np.allclose(a, maps[:, 0, :, 0, 1:].mean(axis=1))


# ------------------------------------------------------------ rollout
@given(seed=st.integers(0, 10_000), L=st.integers(1, 4))
@settings(max_examples=25)
def test_rollout_rows_are_distributions(seed, L):
    maps = random_maps(np.random.default_rng(seed), L=L, m=5)
    R = interpret.rollout(maps)
    assert R.shape == (2, 5, 5)
    assert np.all(R >= 0) and np.allclose(R.sum(-1), 1)


def test_rollout_multiplies_the_layers_last_on_the_left():
    maps = random_maps(np.random.default_rng(1), N=1, L=2, m=5)
    A1, A2 = (0.5 * maps[0, k].mean(0) + 0.5 * np.eye(5) for k in (0, 1))
    R = interpret.rollout(maps)[0]
    assert np.allclose(R, A2 @ A1)
    assert not np.allclose(R, A1 @ A2)
    assert np.allclose(interpret.rollout(maps[:, :1])[0], A1)


def test_rollout_extremes():
    maps = random_maps(np.random.default_rng(2), m=5)
    assert np.allclose(interpret.rollout(maps, residual=1.0), np.eye(5))
    A1, A2 = maps[0, 0].mean(0), maps[0, 1].mean(0)
    assert np.allclose(interpret.rollout(maps, residual=0.0)[0], A2 @ A1)
    eye = np.broadcast_to(np.eye(5), maps.shape)
    assert np.allclose(interpret.rollout(eye), np.eye(5))


# ------------------------------------------------------------ the model
def test_head_ablation_is_accuracy_with_one_head_kept_out():
    model = fresh_model()
    rng = np.random.default_rng(3)
    X, y = rng.random((40, 16, 4)), rng.integers(0, 10, 40)
    out = interpret.head_ablation(model, X, y)
    assert out.shape == (2, 4)
    keep = np.ones((2, 4))
    keep[1, 2] = 0
    assert out[1, 2] == vit.accuracy(model, X, y, keep)


def test_pair_ablation_is_accuracy_with_two_heads_kept_out():
    model = fresh_model()
    rng = np.random.default_rng(4)
    X, y = rng.random((30, 16, 4)), rng.integers(0, 10, 30)
    out = interpret.pair_ablation(model, X, y)
    assert out.shape == (2, 6)                     # pairs (0, 1), (0, 2), ...
    keep = np.ones((2, 4))
    keep[1, [1, 3]] = 0                            # the fifth pair: (1, 3)
    assert out[1, 4] == vit.accuracy(model, X, y, keep)


def test_occlusion_is_one_forward_pass_per_blanked_patch():
    model = fresh_model(seed=6)
    rng = np.random.default_rng(6)
    X = rng.random((7, 16, 4))
    X[rng.random((7, 16)) < 0.4] = 0.0             # some patches blank
    drop, label = interpret.occlusion(model, X)
    logits = vit.forward(model, X)[0]
    rows, pred = np.arange(7), logits.argmax(1)
    for j in range(16):
        X_j = X.copy()
        X_j[:, j] = 0.0
        out = vit.forward(model, X_j)[0]
        assert np.allclose(drop[:, j], logits[rows, pred] - out[rows, pred],
                           rtol=0, atol=1e-12)
        assert np.array_equal(label[:, j], out.argmax(1))
    blank = ~X.any(-1)
    assert blank.any() and np.all(drop[blank] == 0)
    assert np.all(label[blank] == np.broadcast_to(pred[:, None], X.shape[:2])[
        blank])
    other, _ = interpret.occlusion(model, X, value=0.5)   # another fill
    assert not np.allclose(other, drop)


def test_removal_curve_counts_what_remove_patches_leaves_right():
    model = fresh_model(seed=7)
    rng = np.random.default_rng(7)
    X, scores = rng.random((25, 16, 4)), rng.random((25, 16))
    y = vit.predict(model, X)                      # all right at k = 0
    curve = interpret.removal_curve(model, X, y, scores, [0, 3, 16])
    assert curve[0] == 25 and curve.dtype.kind == "i"
    for k, count in zip((3, 16), curve[1:]):
        left = interpret.remove_patches(X, scores, k)
        assert count == np.sum(vit.predict(model, left) == y)


@pytest.mark.slow
def test_logit_gradient_matches_finite_differences():
    model = fresh_model()
    x = np.random.default_rng(5).random((1, 16, 4))
    target = int(vit.predict(model, x)[0])
    g = interpret.logit_gradient(model, x)
    assert g.shape == (1, 16, 4)
    eps = 1e-6
    numeric = np.zeros((16, 4))
    for j, p in np.ndindex(16, 4):
        up, down = x.copy(), x.copy()
        up[0, j, p] += eps
        down[0, j, p] -= eps
        numeric[j, p] = (vit.forward(model, up)[0][0, target]
                         - vit.forward(model, down)[0][0, target]) / (2 * eps)
    assert np.allclose(g[0], numeric, rtol=1e-5, atol=1e-9)
    other = np.array([(target + 1) % 10])
    assert not np.allclose(interpret.logit_gradient(model, x, other), g)


def test_remove_patches_blanks_the_top_k_and_breaks_ties_by_index():
    X = np.ones((2, 5, 3))
    scores = np.array([[0.1, 0.9, 0.5, 0.9, 0.0],
                       [1.0, 1.0, 1.0, 1.0, 1.0]])
    out = interpret.remove_patches(X, scores, 2)
    assert np.array_equal(out[0, :, 0], [1, 0, 1, 0, 1])
    assert np.array_equal(out[1, :, 0], [0, 0, 1, 1, 1])
    assert np.all(X == 1)                          # the input is untouched
    assert np.array_equal(interpret.remove_patches(X, scores, 0), X)
    assert np.all(interpret.remove_patches(X, scores, 5, value=-1) == -1)


# ------------------------------------------------------------ rank correlation
def pearson_of_ranks(a, b):
    ra, rb = (np.argsort(np.argsort(v)) for v in (a, b))
    return np.corrcoef(ra, rb)[0, 1]


@given(seed=st.integers(0, 10_000), n=st.integers(3, 30))
def test_rank_correlation_is_the_correlation_of_the_ranks(seed, n):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, 3, n))
    b[:, : n // 3] = a[:, : n // 3] + 0.1 * b[:, : n // 3]
    rho = interpret.rank_correlation(a, b)
    assert rho.shape == (3,)
    for i in range(3):
        assert rho[i] == pytest.approx(pearson_of_ranks(a[i], b[i]))
    assert interpret.rank_correlation(a[0], b[0]) == pytest.approx(rho[0])


def test_rank_correlation_sees_only_the_order():
    x = np.array([[0.1, 0.5, 0.2, 0.9], [1.0, 2.0, 3.0, 4.0]])
    assert np.allclose(interpret.rank_correlation(x, x ** 3), 1)
    assert np.allclose(interpret.rank_correlation(x, -x), -1)
    assert interpret.rank_correlation([1.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == \
        pytest.approx(np.sqrt(3) / 2)
    assert np.isnan(interpret.rank_correlation([[1.0, 1.0, 1.0]],
                                               [[1, 2, 3]])[0])


# ------------------------------------------------------------ bad input
def test_analyses_name_the_bad_argument():
    model = fresh_model()
    maps = random_maps(np.random.default_rng(0))
    X, y = np.zeros((2, 16, 4)), np.array([1, 2])
    for call, error, name in [
            (lambda: interpret.patch_distances(4, 2), TypeError, "grid"),
            (lambda: interpret.mean_attention_distance(maps, (3, 3), 2),
             ValueError, "maps"),
            (lambda: interpret.mean_attention_distance(maps[0], (4, 4), 2),
             ValueError, "maps"),
            (lambda: interpret.rollout(maps, residual=1.5), ValueError,
             "residual"),
            (lambda: interpret.cls_attention(maps, layer=0.5), TypeError,
             "layer"),
            (lambda: interpret.head_ablation(model, X, y[:1]), ValueError,
             "y"),
            (lambda: interpret.logit_gradient(model, X, [0.5, 1.5]),
             TypeError, "target"),
            (lambda: interpret.remove_patches(X, np.zeros((3, 16)), 1),
             ValueError, "scores"),
            (lambda: interpret.remove_patches(X, np.zeros((2, 16)), -1),
             ValueError, "k"),
            (lambda: interpret.rank_correlation(np.zeros((2, 4)),
                                                np.zeros((2, 5))),
             ValueError, "a")]:
        with pytest.raises(error, match=rf"\b{name}\b"):
            call()


def test_the_shared_relations_pass_fitting_arguments_and_refuse_others():
    model = fresh_model()
    rng = np.random.default_rng(1)
    maps, X = random_maps(rng), rng.random((2, 16, 4))
    assert interpret.logit_gradient(model, X, np.array([3, 4])).shape == \
        X.shape
    assert interpret.rollout(maps, residual=0).shape == (2, 17, 17)
    assert np.allclose(interpret.rollout(maps, residual=1), np.eye(17))
    assert interpret.cls_attention(maps).shape == (2, 16)
    for call in [
            lambda: interpret.logit_gradient(model, X, np.array([3, 4, 5])),
            lambda: interpret.logit_gradient(model, X[:, :15]),
            lambda: interpret.head_ablation(model, X[:, :, :3], [1, 2]),
            lambda: interpret.cls_attention(maps[..., :16]),
            lambda: interpret.rollout(maps[..., :16, :]),
            lambda: interpret.rank_correlation(np.ones((2, 1)),
                                               np.ones((2, 1))),
            lambda: interpret.rank_correlation(np.ones(3), np.ones(4))]:
        with pytest.raises(ValueError):
            call()
