"""The tiny vision transformer of chapters 5, 6 and 11."""

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from selfattention import patches, vit
from selfattention_models.digits import digit_split
from selfattention_training.digits import train


@pytest.fixture(scope="module")
def data():
    return digit_split()


def fresh_model(seed=0, **options):
    """An untrained model in float64 with weights drawn from ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return vit.TinyViT(**options).double().eval()


def tokens(seed, N=3, n=16, d_in=4):
    return np.random.default_rng(seed).random((N, n, d_in))


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
    again = digit_split()
    assert np.array_equal(again.X_test, data.X_test)
    assert np.array_equal(again.y_train, data.y_train)
    assert not np.array_equal(digit_split(seed=1).y_test, data.y_test)


def test_split_holds_the_fraction_asked_for():
    small = digit_split(test_fraction=0.1)
    assert len(small.y_test) == 180 and len(small.y_train) == 1617
    assert set(small.y_test) == set(range(10))


@pytest.mark.parametrize("kwargs, error, name", [
    ({"test_fraction": 0.0}, ValueError, "test_fraction"),
    ({"test_fraction": 1.0}, ValueError, "test_fraction"),
    ({"test_fraction": "0.2"}, TypeError, "test_fraction"),
    ({"seed": -1}, ValueError, "seed"),
    ({"seed": 0.5}, TypeError, "seed"),
])
def test_split_names_the_bad_argument(kwargs, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        digit_split(**kwargs)


def test_shuffle_patches_permutes_each_image_separately():
    X = tokens(2, N=4)
    X_s, perms = vit.shuffle_patches(X, np.random.default_rng(2))
    for i in range(4):
        assert sorted(perms[i]) == list(range(16))
        assert np.array_equal(X_s[i], X[i, perms[i]])
    assert len({tuple(p) for p in perms}) == 4
    with pytest.raises(TypeError, match=r"\brng\b"):
        vit.shuffle_patches(X, 0)


# ------------------------------------------------------------ the block
@given(seed=st.integers(0, 10_000), h=st.sampled_from([1, 2, 4]),
       n=st.integers(1, 9))
@pytest.mark.slow
@settings(max_examples=20)
def test_block_attention_is_pytorchs_multihead_attention(seed, h, n):
    """With the MLP silenced, a block adds MHA(LN(z)) to z, and its weights
    are the per-head weights of ``torch.nn.MultiheadAttention``."""
    d = 8
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        block = vit.Block(d, h, 16).double()
        z = torch.randn(2, n, d, dtype=torch.float64)
    torch.nn.init.zeros_(block.mlp[-1].weight)
    torch.nn.init.zeros_(block.mlp[-1].bias)
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(block.qkv.weight)
        mha.in_proj_bias.copy_(block.qkv.bias)
        mha.out_proj.weight.copy_(block.out.weight)
        mha.out_proj.bias.copy_(block.out.bias)
        out, A = block(z)
        x = block.ln1(z)
        ref, ref_A = mha(x, x, x, average_attn_weights=False)
    assert A.shape == (2, h, n, n)
    assert torch.allclose(out - z, ref, rtol=0, atol=1e-12)
    assert torch.allclose(A, ref_A, rtol=0, atol=1e-12)


def test_removing_a_head_is_zeroing_its_columns_of_W_O():
    block = fresh_model().blocks[0]
    z = torch.from_numpy(tokens(1, n=17, d_in=32))
    keep = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    with torch.no_grad():
        kept, A_kept = block(z, keep)
        block.out.weight[:, 8:16] = 0.0              # head 2's d_k columns
        cut, A_cut = block(z)
    assert torch.allclose(kept, cut, rtol=0, atol=1e-13)
    assert torch.equal(A_kept, A_cut)               # the maps are untouched


# ------------------------------------------------------------ the model
def test_forward_returns_logits_and_every_map():
    model = fresh_model(depth=3, h=2)
    logits, maps = vit.forward(model, tokens(3, N=5))
    assert logits.shape == (5, 10)
    assert maps.shape == (5, 3, 2, 17, 17)
    assert np.allclose(maps.sum(axis=-1), 1)
    assert np.array_equal(vit.predict(model, tokens(3, N=5)),
                          logits.argmax(axis=1))
    same, _ = vit.forward(model, tokens(3, N=5), np.ones((3, 2)))
    assert np.array_equal(same, logits)


def test_without_any_head_the_class_token_sees_no_patch():
    model = fresh_model()
    logits, _ = vit.forward(model, tokens(4, N=6), np.zeros((2, 4)))
    assert np.allclose(logits, logits[0], rtol=0, atol=1e-12)
    one_left = np.zeros((2, 4))
    one_left[1, 2] = 1.0
    logits, _ = vit.forward(model, tokens(4, N=6), one_left)
    assert not np.allclose(logits, logits[0], atol=1e-6)


@given(seed=st.integers(0, 1000))
@settings(max_examples=10)
def test_without_position_shuffling_patches_changes_nothing(seed):
    rng = np.random.default_rng(seed)
    X = rng.random((3, 16, 4))
    X_s, _ = vit.shuffle_patches(X, rng)
    model = fresh_model(seed, position=False)
    assert np.allclose(vit.forward(model, X_s)[0], vit.forward(model, X)[0],
                       rtol=0, atol=1e-12)


def test_with_position_shuffling_patches_changes_the_logits():
    rng = np.random.default_rng(1)
    X = rng.random((3, 16, 4))
    X_s, _ = vit.shuffle_patches(X, rng)
    model = fresh_model()
    assert not np.allclose(vit.forward(model, X_s)[0],
                           vit.forward(model, X)[0], atol=1e-6)


def test_the_model_has_the_parameters_it_shows():
    model = fresh_model(n=16, d_in=4, d=32, h=4, depth=2, d_mlp=64)
    block = 2 * 2 * 32 + 32 * 96 + 96 + 32 * 32 + 32 + 2 * 32 * 64 + 64 + 32
    whole = 4 * 32 + 32 + 32 + 17 * 32 + 2 * block + 2 * 32 + 32 * 10 + 10
    assert sum(p.numel() for p in model.parameters()) == whole
    assert sum(p.numel() for p in fresh_model(position=False)
               .parameters()) == whole - 17 * 32


def test_model_functions_name_bad_input():
    model = fresh_model()
    X = np.zeros((2, 16, 4))
    for call, error, name in [
            (lambda: vit.forward(model, np.zeros((2, 16, 3))), ValueError,
             "X"),
            (lambda: vit.forward(model, np.zeros((2, 15, 4))), ValueError,
             "X"),
            (lambda: vit.predict(model, X[0]), ValueError, "X"),
            (lambda: vit.forward("model", X), TypeError, "model"),
            (lambda: vit.forward(model, X, np.ones((2, 3))), ValueError,
             "keep"),
            (lambda: vit.accuracy(model, X, [1.0, 2.0]), TypeError, "y"),
            (lambda: vit.accuracy(model, X, [1, 2, 3]), ValueError, "y")]:
        with pytest.raises(error, match=rf"\b{name}\b"):
            call()


def test_the_model_relations_pass_what_fits_the_model():
    model, X = fresh_model(), tokens(0, N=2)
    assert vit.forward(model, X, np.ones((2, 4)))[0].shape == (2, 10)
    assert vit.accuracy(model, X, [1, 2], np.zeros((2, 4))) in (0.0, 0.5, 1.0)
    free = fresh_model(position=False)          # no positions: any n fits
    assert vit.predict(free, tokens(0, N=2, n=9)).shape == (2,)
    for call in [lambda: vit.predict(free, tokens(0, N=2, d_in=3)),
                 lambda: vit.forward(model, X, np.ones((4, 2))),
                 lambda: vit.accuracy(model, X, [1])]:
        with pytest.raises(ValueError):
            call()


# ------------------------------------------------------------ training
@pytest.mark.slow
def test_training_is_deterministic_and_leaves_global_state_alone(data):
    # 128 digits: two threads beside the other test worker spin for long
    small = dataclasses.replace(data, X_train=data.X_train[:128],
                                y_train=data.y_train[:128])
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected_draw = torch.rand(3)
    torch.manual_seed(123)
    a = train(small, epochs=1, threads=2)
    assert torch.equal(torch.rand(3), expected_draw)   # caller's stream intact
    assert torch.get_num_threads() == threads
    b = train(small, epochs=1, threads=2)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    c = train(small, epochs=1, seed=1)
    assert not torch.equal(a.head.weight, c.head.weight)
    assert len(a.losses) == 1 and not a.training
    assert next(a.parameters()).dtype == torch.float64


@pytest.mark.slow
def test_training_learns_and_position_is_optional(data):
    model = train(data, epochs=6)
    assert model.losses[-1] < model.losses[0]
    assert vit.accuracy(model, data.X_test, data.y_test) > 0.5
    assert train(data, position=False, epochs=1).pos is None


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(data=np.zeros((3, 16, 4))), TypeError, "data"),
    (dict(epochs=0), ValueError, "epochs"),
    (dict(batch_size=2.5), TypeError, "batch_size"),
    (dict(lr=0.0), ValueError, "lr"),
    (dict(h=3), ValueError, "h"),
    (dict(position=1), TypeError, "position"),
])
def test_training_names_the_bad_argument(data, kwargs, error, name):
    kwargs = {"data": data, **kwargs}
    with pytest.raises(error, match=rf"\b{name}\b"):
        train(**kwargs)
