"""Real handwriting for :ref:`ch-transformer`: a vision transformer and a CNN
of the same
size trained on 28 × 28 MNIST digits with one recipe, and the ``make train``
recipes that write what the chapter shows.

The split is fixed: :func:`mnist_split` keeps 1,000 of the 5,000 digits of
:func:`selfattention.data.mnist_digits` for testing (100 per class) and
trains on the other 4,000, or on a stratified subset of them. A digit becomes
7 × 7 = 49 tokens of 4 × 4 pixels (16 values each).

Loading the trained vision transformer (:ref:`ch-transformer` and
:ref:`ch-misconceptions`)::

    from selfattention import mnist, trained, vit
    model = mnist.load_vit("vit-mnist")     # TinyViT, float64, eval mode
    split = mnist.mnist_split()             # the same 4,000 / 1,000 digits
    logits, maps = vit.forward(model, split.X_test)
    # logits (1000, 10); maps (1000, L, h, 1 + 49, 1 + 49), token 0 the
    # class token, token 1 + j the patch j of the row-major 7 × 7 grid
    # (split.grid, split.patch = (7, 7), 4 for selfattention.interpret).

``mnist.load_vit`` builds the model from the arrays of
``trained.load(name)``: ``config`` (see ``CONFIG_KEYS``) and one array
``w/<parameter name>`` per entry of the model's ``state_dict``. The recipe
``vit-mnist-local`` is the same model with a learned relative position bias
(:class:`selfattention.vit.RelativeBias`) in place of position embeddings.
``vit.forward``, ``vit.accuracy``, ``vit.predict`` and every function of
``selfattention.interpret`` take these models as they take :ref:`ch-position`'s.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from . import interpret, trained
from ._validate import boundary, integer, one_of
from .data import mnist_digits
from .flops import count_flops
from .patches import patchify
from .vit import (TinyViT, accuracy, forward, load_weight_arrays,
                  weight_arrays)

__all__ = ["MnistSplit", "mnist_split", "SmallCNN", "shift", "tokens",
           "fit", "correct", "multiply_adds", "parameters", "build_vit",
           "load_vit", "VIT", "CONFIG_KEYS"]

# The vision transformer of chapter 6: 49 tokens of 16 pixels, 4 blocks.
VIT = dict(n=49, d_in=16, d=64, h=4, depth=4, d_mlp=128)
CONFIG_KEYS = ("n", "d_in", "d", "h", "depth", "d_mlp", "position",
               "pre_ln", "relative_bias")


@dataclass(frozen=True)
class MnistSplit:
    """Training and test images (N, 28, 28) in [0, 1] with labels (N,), and
    the test digits as tokens ``X_test`` (N, 49, 16) on a ``grid`` of
    ``patch``-pixel patches."""

    images_train: np.ndarray
    y_train: np.ndarray
    images_test: np.ndarray
    y_test: np.ndarray
    X_test: np.ndarray
    grid: tuple = (7, 7)
    patch: int = 4


@boundary(n_train=integer(10, 4000), seed=integer(0))
def mnist_split(n_train=4000, seed=0):
    """The fixed split: 1,000 test digits, ``n_train`` training digits.

    scikit-learn's stratified ``train_test_split`` (``random_state=seed``)
    holds out 1,000 of the 5,000 digits; a smaller training set is a
    stratified subset of the other 4,000, drawn the same way.
    """
    # scikit-learn takes about 3 s to import: only when a split is made.
    from sklearn.model_selection import train_test_split
    images, labels = mnist_digits()
    train, test = train_test_split(np.arange(len(labels)), test_size=1000,
                                   stratify=labels, random_state=seed)
    if n_train < len(train):
        train, _ = train_test_split(train, train_size=n_train,
                                    stratify=labels[train],
                                    random_state=seed)
    train, test = np.sort(train), np.sort(test)
    return MnistSplit(images[train], labels[train], images[test],
                      labels[test], patchify(images[test], 4))


# ------------------------------------------------------------------ the CNN
class SmallCNN(nn.Module):
    """Four 3 × 3 convolutions, two max-pools, a mean and a classifier.

    Each convolution is followed by batch norm and a ReLU; the default
    widths hold about as many parameters as the ViT of ``PAIR_VIT``.
    """

    def __init__(self, widths=(16, 24, 32, 32), classes=10):
        super().__init__()
        a, b, c, e = widths

        def conv(i, o):                          # same-size 3 × 3 conv
            return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o),
                    nn.ReLU()]
        self.features = nn.Sequential(
            *conv(1, a), nn.MaxPool2d(2),        # (B, a, 14, 14)
            *conv(a, b), nn.MaxPool2d(2),        # (B, b, 7, 7)
            *conv(b, c), *conv(c, e),            # (B, e, 7, 7)
            nn.AdaptiveAvgPool2d(1), nn.Flatten())   # (B, e)
        self.head = nn.Linear(e, classes)

    def forward(self, x):
        """Logits (B, classes) of images x (B, 1, 28, 28)."""
        return self.head(self.features(x))


# ------------------------------------------------------------------ recipe
def shift(images, rng, pixels=2):
    """Each image (B, 28, 28) moved by its own random offset.

    At most ``pixels`` rows and columns each way; zeros fill the border.
    """
    B, H, W = images.shape
    padded = nn.functional.pad(images, (pixels,) * 4)     # (B, H+2p, W+2p)
    off = torch.from_numpy(rng.integers(0, 2 * pixels + 1, size=(B, 2)))
    rows = off[:, :1] + torch.arange(H)                   # (B, H)
    cols = off[:, 1:] + torch.arange(W)                   # (B, W)
    return padded[torch.arange(B)[:, None, None], rows[:, :, None],
                  cols[:, None, :]]                       # (B, H, W)


def tokens(images, p=4):
    """Images (B, H·p, W·p) to tokens (B, H·W, p²), row-major.

    The PyTorch twin of :func:`selfattention.patches.patchify`.
    """
    B, Hp, Wp = images.shape
    g = images.reshape(B, Hp // p, p, Wp // p, p)         # (B, H, p, W, p)
    return g.transpose(2, 3).reshape(B, -1, p * p)        # (B, n, p²)


def _inputs(model, images):
    """What ``model`` reads: tokens for a ViT, one channel for a CNN."""
    if isinstance(model, TinyViT):
        return tokens(images)                             # (B, 49, 16)
    return images[:, None]                                # (B, 1, 28, 28)


def _logits(model, images):
    """The logits (B, classes) of either model for images (B, 28, 28)."""
    out = model(_inputs(model, images))
    return out[0] if isinstance(out, tuple) else out


def fit(model, images, labels, seed, epochs, batch_size=100, lr=2e-3,
        weight_decay=0.05, warmup=0.1, pixels=2):
    """Train a TinyViT or SmallCNN in place; the loss of every step.

    AdamW; the learning rate rises linearly over the first ``warmup`` share
    of the steps (none if 0) and falls to zero along a cosine; every batch
    is shifted by up to ``pixels`` (:func:`shift`). Batches and shifts come
    from ``default_rng(seed)``; the weights' dtype sets the images'.
    """
    dtype = next(model.parameters()).dtype
    X = torch.from_numpy(np.asarray(images)).to(dtype)    # (N, 28, 28)
    y = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    rng = np.random.default_rng(seed)
    steps = epochs * math.ceil(len(X) / batch_size)
    warm = round(warmup * steps)

    def rate(step):                              # multiplies lr
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
    opt = torch.optim.AdamW(model.parameters(), lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    losses = []
    model.train()
    for _ in range(epochs):
        for idx in torch.from_numpy(rng.permutation(len(X))).split(
                batch_size):
            batch = shift(X[idx], rng, pixels)
            loss = nn.functional.cross_entropy(_logits(model, batch), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    model.eval()
    return np.array(losses)


def correct(model, images, labels):
    """How many of ``images`` (N, 28, 28) the model classifies as
    ``labels``."""
    dtype = next(model.parameters()).dtype
    X = torch.from_numpy(np.asarray(images)).to(dtype)
    with torch.no_grad():
        pred = torch.cat([_logits(model, b).argmax(1) for b in X.split(500)])
    return int((pred.numpy() == np.asarray(labels)).sum())


def multiply_adds(model):
    """Multiply-adds of one 28 × 28 image's forward pass: half the FLOPs
    that PyTorch's ``FlopCounterMode`` counts (convolutions, linear maps,
    matrix products; elementwise work and softmax not counted)."""
    dtype = next(model.parameters()).dtype
    image = torch.zeros(1, 28, 28, dtype=dtype)
    with torch.no_grad():
        flops = count_flops(_logits, model, image)
    return sum(flops.values()) // 2


def parameters(model):
    """The number of trained values in ``model``."""
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------ files
def _vit(position=True, pre_ln=True, relative_bias=False, **sizes):
    cfg = {**VIT, **sizes}
    grid = (7, 7) if relative_bias else None
    return TinyViT(cfg["n"], cfg["d_in"], cfg["d"], cfg["h"], cfg["depth"],
                   cfg["d_mlp"], position=position, pre_ln=pre_ln,
                   grid=grid), cfg


def _weights(model, config):
    arrays = weight_arrays(model)
    arrays["config"] = np.array([int(config[k]) for k in CONFIG_KEYS])
    return arrays


def build_vit(arrays):
    """A float64 :class:`~selfattention.vit.TinyViT` in evaluation mode
    from a recipe's arrays (``config`` and the ``w/...`` weights)."""
    cfg = dict(zip(CONFIG_KEYS, (int(v) for v in arrays["config"])))
    flags = {k: bool(cfg.pop(k)) for k in ("position", "pre_ln",
                                           "relative_bias")}
    return load_weight_arrays(_vit(**flags, **cfg)[0], arrays)


@boundary(name=one_of("vit-mnist", "vit-mnist-local", "vit-mnist-tiny"))
def load_vit(name="vit-mnist"):
    """The trained vision transformer ``name`` from its checked file."""
    return build_vit(trained.load(name))


def _train_vit(seed, n_train=4000, epochs=20, threads=2, warmup=0.1,
               dtype=torch.float32, **model_args):
    split = mnist_split(n_train)
    with trained.torch_threads(threads):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model, cfg = _vit(**model_args)
            model.to(dtype)
            start = time.perf_counter()
            loss = fit(model, split.images_train, split.y_train, seed,
                       epochs, warmup=warmup)
            seconds = time.perf_counter() - start
    flags = {"position": True, "pre_ln": True, "relative_bias": False,
             **{k: v for k, v in model_args.items()
                if k in ("position", "pre_ln", "relative_bias")}}
    return model, {**cfg, **flags}, loss, seconds


def _vit_recipe(**model_args):
    model, cfg, loss, seconds = _train_vit(0, **model_args)
    split = mnist_split()
    return {**_weights(model, cfg), "loss": loss.astype(np.float32),
            "seconds": np.float64(seconds),
            "test_correct": np.int64(correct(model, split.images_test,
                                             split.y_test))}


@trained.recipe("vit-mnist", threads=2)
def vit_mnist():
    """The chapter's ViT: learned position embeddings, 20 epochs over 4,000
    digits, float32 on two threads."""
    return _vit_recipe()


@trained.recipe("vit-mnist-local")
def vit_mnist_local():
    """The same ViT with a learned relative position bias in every block
    instead of position embeddings (the locality prior of
    :ref:`ch-transformer`),
    trained for 20 epochs on one thread."""
    return _vit_recipe(position=False, relative_bias=True,
                       threads=1)


# Its 20 passes take about a minute; tests/unit/test_mnist.py recomputes two
# of its counts instead of the whole file.
@trained.recipe("vit-mnist-ablation", after=("vit-mnist",))
def vit_mnist_ablation():
    """Test digits (of 1,000) that the chapter's ViT still gets right with
    one head removed, ``heads`` (L, h), and with every head of one layer
    removed, ``layers`` (L,): 20 float64 passes over the test set, from
    the file of ``vit-mnist`` (which ``make train`` writes first)."""
    model, split = load_vit("vit-mnist"), mnist_split()
    N = len(split.y_test)
    with trained.torch_threads(1):              # no waiting at barriers
        heads = interpret.head_ablation(model, split.X_test, split.y_test)
        L, h = heads.shape
        layers = []
        for layer in range(L):
            keep = np.ones((L, h))
            keep[layer] = 0.0                        # the whole layer
            layers.append(accuracy(model, split.X_test, split.y_test, keep))
    return {"heads": np.round(heads * N).astype(np.int64),
            "layers": np.round(np.array(layers) * N).astype(np.int64)}


# The rankings of the blanking test of :ref:`ch-misconceptions`, in the order
# of the rows of ``removal`` in ``vit-mnist-misconceptions``: the class
# token's map in each layer (head mean), rollout, |input × gradient|, ink and
# occlusion, then two random orders of all 49 patches and the same two orders
# with the ink patches first.
RANKINGS = ("layer 1", "layer 2", "layer 3", "layer 4", "rollout",
            "in×grad", "ink", "occlusion", "random", "random",
            "random ink", "random ink")
BLANKED = (1, 2, 4, 8, 16)                 # patches blanked per digit, k


@trained.recipe("vit-mnist-misconceptions", after=("vit-mnist",))
def vit_mnist_misconceptions():
    """What :ref:`ch-misconceptions` measures on the chapter's ViT over the
    1,000 test digits, float64 on one thread (about 60,000 images through
    the model, a few minutes).

    ``in_x_grad`` (1000, 49): each patch's pixels times the predicted
    logit's gradient, summed over the patch (signed); ``occlusion`` and
    ``occluded_label`` (1000, 49): the drop of the predicted logit and the
    class predicted when that one patch is set to 0
    (:func:`~selfattention.interpret.occlusion`); ``removal`` (12, 5): the
    digits still right after blanking each digit's k first patches under
    each ranking of :data:`RANKINGS`, for k in :data:`BLANKED`
    (:func:`~selfattention.interpret.removal_curve`, random orders from
    ``default_rng(11)``); ``pairs`` (L, 6): the digits still right with two
    heads of one layer removed
    (:func:`~selfattention.interpret.pair_ablation`).
    """
    model, split = load_vit("vit-mnist"), mnist_split()
    X, y = split.X_test, split.y_test
    N = len(y)
    with trained.torch_threads(1):              # no waiting at barriers
        maps = forward(model, X)[1]              # (N, L, h, 1+n, 1+n)
        in_x_grad = (X * interpret.logit_gradient(model, X)).sum(-1)
        drop, label = interpret.occlusion(model, X)
        ink = X.sum(-1)                          # (N, n)
        draws = np.random.default_rng(11).random((2, *ink.shape))
        scores = [*(interpret.cls_attention(maps, layer)
                    for layer in range(maps.shape[1])),
                  interpret.rollout(maps)[:, 0, 1:], np.abs(in_x_grad),
                  ink, drop, *draws, *(d + (ink > 0) for d in draws)]
        del maps                                 # 320 MB
        removal = [interpret.removal_curve(model, X, y, s, BLANKED)
                   for s in scores]
        pairs = interpret.pair_ablation(model, X, y)
    return {"in_x_grad": in_x_grad, "occlusion": drop,
            "occluded_label": label.astype(np.int8),
            "removal": np.array(removal, dtype=np.int64),
            "blanked": np.array(BLANKED),
            "pairs": np.round(pairs * N).astype(np.int64)}


# The comparisons train a pair with about a seventh of the parameters of the
# chapter's ViT, so that three seeds at four training-set sizes fit the time
# of ``make train``.
PAIR_VIT = dict(d=32, h=4, depth=2, d_mlp=64)
PAIR_CNN = (16, 24, 32, 32)                # SmallCNN's default widths

# Four ViTs of depth 4 (width 32), NORM_EPOCHS epochs of 40 steps each, for
# three seeds: pre-LN or post-LN, with or without warm-up.
NORMS = (("pre-LN", True, 0.1), ("pre-LN", True, 0.0),
         ("post-LN", False, 0.1), ("post-LN", False, 0.0))
NORM_SEEDS = (0, 1, 2)
NORM_EPOCHS = 10


@trained.recipe("vit-mnist-norms")
def vit_mnist_norms():
    """Loss of every step for pre-LN and post-LN ViTs with and without
    warm-up, ``loss`` (seeds, len(NORMS), steps), and their test digits
    right, ``test_correct`` (seeds, len(NORMS)), for the seeds of
    :data:`NORM_SEEDS` (rows in the order of :data:`NORMS`)."""
    split = mnist_split()
    losses, right = [], []
    for seed in NORM_SEEDS:
        for _, pre_ln, warmup in NORMS:
            model, _, loss, _ = _train_vit(seed, epochs=NORM_EPOCHS,
                                           threads=1, pre_ln=pre_ln,
                                           warmup=warmup, d=32, d_mlp=64)
            losses.append(loss)
            right.append(correct(model, split.images_test, split.y_test))
    shape = (len(NORM_SEEDS), len(NORMS))
    return {"loss": np.array(losses, dtype=np.float32).reshape(*shape, -1),
            "pre_ln": np.array([p for _, p, _ in NORMS]),
            "warmup": np.array([w for _, _, w in NORMS]),
            "seeds": np.array(NORM_SEEDS),
            "test_correct": np.array(right).reshape(shape)}


# Training-set sizes. Every run of the comparison takes the same number of
# optimisation steps, batches of 100 digits, so a smaller set is passed over
# more often: EPOCHS = STEPS · 100 / size. STEPS was chosen from single runs
# of the ViT on 4,000 digits (seed 0), by their training loss alone and
# before any comparison was run: 400, 800, 1,200, 1,600 and 2,400 steps
# ended at 0.70, 0.30, 0.23, 0.16 and 0.11 (the mean of the last 40 steps).
# The loss falls steeply up to about 800 steps and slowly after; after
# 1,600 steps a further 800 took off about a third of what the 800 before
# them had. Longer runs would still lower it a little, but 12 runs of each
# model at 2,400 steps would take ``make train`` past its 30 minutes. The
# CNN at 400, 800 and 1,600 steps: 0.14, 0.05 and 0.02.
SIZES = (500, 1000, 2000, 4000)
STEPS = 1600
EPOCHS = tuple(STEPS * 100 // n for n in SIZES)   # (320, 160, 80, 40)
SEEDS = (0, 1, 2)
#: Each run's training loss is stored as the mean over this many equal
#: stretches of its steps.
LOSS_POINTS = 20


def _train_cnn(seed, n_train, epochs, threads=1):
    split = mnist_split(n_train)
    with trained.torch_threads(threads):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = SmallCNN(PAIR_CNN)
            start = time.perf_counter()
            loss = fit(model, split.images_train, split.y_train, seed,
                       epochs)
            seconds = time.perf_counter() - start
    return model, loss, seconds


def _sizes_recipe(train_one):
    split = mnist_split()
    right = np.zeros((len(SIZES), len(SEEDS)), dtype=np.int64)
    seconds = np.zeros(right.shape)
    loss = np.zeros((*right.shape, LOSS_POINTS), dtype=np.float32)
    for (i, (size, epochs)), (j, seed) in itertools.product(
            enumerate(zip(SIZES, EPOCHS)), enumerate(SEEDS)):
        model, steps, seconds[i, j] = train_one(seed, size, epochs)
        loss[i, j] = steps.reshape(LOSS_POINTS, STEPS // LOSS_POINTS).mean(1)
        right[i, j] = correct(model, split.images_test, split.y_test)
    return {"test_correct": right, "seconds": seconds, "loss": loss,
            "sizes": np.array(SIZES), "epochs": np.array(EPOCHS),
            "steps": np.int64(STEPS), "seeds": np.array(SEEDS),
            "parameters": parameters(model),
            "multiply_adds": multiply_adds(model)}


@trained.recipe("mnist-sizes-vit")
def mnist_sizes_vit():
    """The small ViT's (``PAIR_VIT``) test digits right (of 1,000), training
    seconds, (4, 3), and training loss, (4, 3, LOSS_POINTS), by
    training-set size and seed, each run :data:`STEPS` steps long; its
    parameters and multiply-adds."""
    def train_one(seed, size, epochs):
        model, _, loss, seconds = _train_vit(seed, size, epochs, threads=1,
                                             **PAIR_VIT)
        return model, loss, seconds
    return _sizes_recipe(train_one)


@trained.recipe("mnist-sizes-cnn")
def mnist_sizes_cnn():
    """The same for the CNN of about its size (:data:`PAIR_CNN`), trained
    with the same recipe on the same digits for as many steps."""
    return _sizes_recipe(_train_cnn)


# A float64 retrain on one thread from fixed seeds is bit for bit on one
# machine. Another CPU's kernels round float64 products differently: forced
# to generic code (ATEN_CPU_CAPABILITY=default, OPENBLAS_CORETYPE=Haswell)
# the 15 AdamW steps ended at most 4.5e-8 away; atol = 1e-6 allows 20 times
# that and still catches any change of data, seed, model or recipe.
@trained.recipe("vit-mnist-tiny", rtol=0.0, atol=1e-6,
                retrained_by_test=True)
def vit_mnist_tiny():
    """A small ViT (d = 32, 2 blocks) on 500 digits for 3 epochs, float64
    on one thread: the recipe that the tests retrain."""
    model, cfg, loss, _ = _train_vit(0, n_train=500, epochs=3, threads=1,
                                     dtype=torch.float64, d=32, depth=2,
                                     d_mlp=64)
    split = mnist_split()
    return {**_weights(model, cfg), "loss": loss,
            "test_correct": np.int64(correct(model, split.images_test,
                                             split.y_test))}
