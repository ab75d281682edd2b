"""The tiny vision transformer of chapters 5 and 11."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from selfattention import patches, vit


@pytest.fixture(scope="module")
def data():
    return vit.digit_split()


def fresh_model(position, seed=0, **options):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return vit.TinyViT(position=position, **options).double().eval()


# ------------------------------------------------------------ data
def test_split_is_stratified_disjoint_and_reproducible(data):
    assert data.X_train.shape == (1347, 16, 4)
    assert data.X_test.shape == (450, 16, 4)
    assert data.images_test.shape == (450, 8, 8)
    assert np.array_equal(patches.patchify(data.images_test, 2), data.X_test)
    assert 0 <= data.X_train.min() and data.X_train.max() <= 1
    for digit in range(10):
        n_test = np.sum(data.y_test == digit)
        n_all = n_test + np.sum(data.y_train == digit)
        assert n_test / n_all == pytest.approx(0.25, abs=0.01)
    again = vit.digit_split()
    assert np.array_equal(again.X_test, data.X_test)
    assert np.array_equal(again.y_train, data.y_train)
    other = vit.digit_split(seed=1)
    assert not np.array_equal(other.y_test, data.y_test)


def test_split_holds_the_fraction_asked_for():
    small = vit.digit_split(test_fraction=0.1)
    assert len(small.y_test) == 180 and len(small.y_train) == 1617
    assert set(small.y_test) == set(range(10))


@pytest.mark.parametrize("kwargs, error, name", [
    ({"test_fraction": 0.0}, ValueError, "test_fraction"),
    ({"test_fraction": 1.0}, ValueError, "test_fraction"),
    ({"test_fraction": 1}, ValueError, "test_fraction"),
    ({"test_fraction": "0.2"}, TypeError, "test_fraction"),
    ({"seed": -1}, ValueError, "seed"),
    ({"seed": 0.5}, TypeError, "seed"),
])
def test_split_names_the_bad_argument(kwargs, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        vit.digit_split(**kwargs)


# ------------------------------------------------------------ model
@pytest.mark.parametrize("kwargs, error, name", [
    ({"heads": 3}, ValueError, "heads"),
    ({"dim": 32.0}, TypeError, "dim"),
    ({"depth": 0}, ValueError, "depth"),
    ({"position": 1}, TypeError, "position"),
    ({"pos_std": -0.1}, ValueError, "pos_std"),
])
def test_model_names_a_bad_configuration(kwargs, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        vit.TinyViT(**kwargs)


def test_model_functions_name_bad_input():
    model = fresh_model(True)
    with pytest.raises(ValueError, match=r"\bx\b"):
        model(torch.zeros(2, 15, 4, dtype=torch.float64))
    X = np.zeros((2, 16, 4))
    for call, error, name in [
            (lambda: vit.logits(model, np.zeros((2, 16, 3))), ValueError, "X"),
            (lambda: vit.predict(model, X[0]), ValueError, "X"),
            (lambda: vit.logits("model", X), TypeError, "model"),
            (lambda: vit.accuracy(model, X, [1.0, 2.0]), TypeError, "y"),
            (lambda: vit.accuracy(model, X, [1, 2, 3]), ValueError, "y"),
            (lambda: vit.cls_attention(model, X, layer=0.5), TypeError,
             "layer"),
            (lambda: vit.shuffle_patches(X, 0), TypeError, "rng"),
            (lambda: vit.gradient_importance(model, X, [1]), ValueError,
             "target"),
            (lambda: vit.gradient_importance(model, X, [0.5, 1.5]),
             TypeError, "target")]:
        with pytest.raises(error, match=rf"\b{name}\b"):
            call()


@given(seed=st.integers(0, 1000))
@settings(max_examples=15)
def test_without_position_shuffling_patches_changes_nothing(seed):
    rng = np.random.default_rng(seed)
    X = rng.random((3, 16, 4))
    X_s, perms = vit.shuffle_patches(X, rng)
    model = fresh_model(False, seed=seed)
    assert np.allclose(vit.logits(model, X_s), vit.logits(model, X),
                       rtol=0, atol=1e-12)


def test_with_position_shuffling_patches_changes_the_logits():
    rng = np.random.default_rng(1)
    X = rng.random((3, 16, 4))
    X_s, _ = vit.shuffle_patches(X, rng)
    model = fresh_model(True)
    assert not np.allclose(vit.logits(model, X_s), vit.logits(model, X),
                           atol=1e-6)


def test_shuffle_patches_permutes_each_image_separately():
    rng = np.random.default_rng(2)
    X = rng.random((4, 16, 4))
    X_s, perms = vit.shuffle_patches(X, rng)
    for i in range(4):
        assert sorted(perms[i]) == list(range(16))
        assert np.array_equal(X_s[i], X[i, perms[i]])
    assert len({tuple(p) for p in perms}) == 4


def test_attention_maps_are_distributions():
    model = fresh_model(True, depth=2)
    X = np.random.default_rng(3).random((5, 16, 4))
    A = vit.attention_maps(model, X)
    assert A.shape == (2, 5, 4, 17, 17)
    assert np.allclose(A.sum(axis=-1), 1)
    a = vit.cls_attention(model, X)
    assert a.shape == (5, 16)
    assert np.allclose(a, A[-1, :, :, 0, 1:].mean(axis=1))


def test_replacing_cls_weights_by_their_own_values_changes_nothing():
    model = fresh_model(True, depth=2)
    X = np.random.default_rng(4).random((3, 16, 4))
    own = vit.attention_maps(model, X)[-1][:, :, 0, :]       # (N, h, 17)
    assert np.allclose(vit.logits_with_cls_weights(model, X, own),
                       vit.logits(model, X), rtol=0, atol=1e-13)
    V = vit.cls_values(model, X)
    assert V.shape == (3, 4, 17, 8)
    # a different map (uniform) changes them
    uniform = np.full_like(own, 1 / 17)
    changed = vit.logits_with_cls_weights(model, X, uniform)
    assert not np.allclose(changed, vit.logits(model, X), atol=1e-6)
    with pytest.raises(ValueError, match=r"\bweights\b"):
        vit.logits_with_cls_weights(model, X, own[:, :2])


def test_gradient_importance_matches_finite_differences():
    model = fresh_model(True)
    x = np.random.default_rng(5).random((1, 16, 4))
    target = int(vit.predict(model, x)[0])
    g = vit.gradient_importance(model, x)
    eps = 1e-6
    numeric = np.zeros((16, 4))
    for j in range(16):
        for p in range(4):
            up, down = x.copy(), x.copy()
            up[0, j, p] += eps
            down[0, j, p] -= eps
            numeric[j, p] = (vit.logits(model, up)[0, target]
                             - vit.logits(model, down)[0, target]) / (2 * eps)
    assert np.allclose(g[0], np.linalg.norm(numeric, axis=1), rtol=1e-5,
                       atol=1e-9)
    other = (target + 1) % 10
    assert not np.allclose(vit.gradient_importance(model, x, [other]), g)


# ------------------------------------------------------------ training
def test_training_is_deterministic_and_leaves_global_state_alone(data):
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected_draw = torch.rand(3)
    torch.manual_seed(123)
    a = vit.train(data, position=True, epochs=1)
    assert torch.equal(torch.rand(3), expected_draw)   # caller's stream intact
    assert torch.get_num_threads() == threads
    assert not torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        vit.train(data, position=False, epochs=1)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    b = vit.train(data, position=True, epochs=1)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    c = vit.train(data, position=True, epochs=1, seed=1)
    assert not torch.equal(a.head.weight, c.head.weight)
    assert len(a.losses) == 1 and not a.training
    assert next(a.parameters()).dtype == torch.float64


def test_training_learns_something(data):
    model = vit.train(data, position=True, epochs=3)
    assert model.losses[-1] < model.losses[0]
    assert vit.accuracy(model, data.X_test, data.y_test) > 0.5
    assert not vit.train(data, position=False, epochs=1).position


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(data=np.zeros((3, 16, 4))), TypeError, "data"),
    (dict(epochs=0), ValueError, "epochs"),
    (dict(batch_size=2.5), TypeError, "batch_size"),
    (dict(lr=0.0), ValueError, "lr"),
    (dict(heads=3), ValueError, "heads"),        # reaches TinyViT's checks
])
def test_training_names_the_bad_argument(data, kwargs, error, name):
    kwargs = {"data": data, **kwargs}
    with pytest.raises(error, match=rf"\b{name}\b"):
        vit.train(**kwargs)


# ------------------------------------------------------------ rank correlation
def pearson_of_ranks(a, b):
    """Spearman's rho without ties: the correlation of the orders."""
    ra, rb = (np.argsort(np.argsort(v)) for v in (a, b))
    return np.corrcoef(ra, rb)[0, 1]


@given(seed=st.integers(0, 10_000), n=st.integers(3, 30))
def test_rank_correlation_is_the_correlation_of_the_ranks(seed, n):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, 3, n))
    b[:, : n // 3] = a[:, : n // 3] + 0.1 * b[:, : n // 3]
    rho = vit.rank_correlation(a, b)
    assert rho.shape == (3,)
    for i in range(3):
        assert rho[i] == pytest.approx(pearson_of_ranks(a[i], b[i]))
    assert vit.rank_correlation(a[0], b[0]) == pytest.approx(rho[0])


def test_rank_correlation_sees_only_the_order():
    x = np.array([[0.1, 0.5, 0.2, 0.9], [1.0, 2.0, 3.0, 4.0]])
    assert np.allclose(vit.rank_correlation(x, x ** 3), 1)
    assert np.allclose(vit.rank_correlation(x, -x), -1)
    # ties share their mean rank; a row of ties has no order at all
    assert vit.rank_correlation([1.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == \
        pytest.approx(np.sqrt(3) / 2)
    assert np.isnan(vit.rank_correlation([[1.0, 1.0, 1.0]], [[1, 2, 3]])[0])


@pytest.mark.parametrize("a, b, error, name", [
    (np.zeros((2, 4)), np.zeros((2, 5)), ValueError, "a"),
    (np.zeros(1), np.zeros(1), ValueError, "a"),
    (np.zeros(3), "b", TypeError, "b"),
])
def test_rank_correlation_names_the_bad_argument(a, b, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        vit.rank_correlation(a, b)
