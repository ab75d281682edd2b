"""The ``make train`` recipes of the MNIST models
(:mod:`selfattention_models.mnist`) and their training loop (:func:`fit`, with
:func:`shift` augmentation): the vision transformer of the chapter on the
transformer and its variants, the head ablations, the measurements of the
chapter on misconceptions, and the comparison of a small ViT with a CNN of its
size.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import torch
from torch import nn

from selfattention import interpret
from selfattention.torch_bridge import torch_threads
from selfattention.vit import accuracy, forward
from selfattention_models.mnist import (CONFIG_KEYS, NORMS, PAIR_VIT, STEPS,
                                        SmallCNN, _logits, _vit, correct,
                                        load_vit, mnist_split, multiply_adds,
                                        parameters)

from .recipes import recipe, weight_arrays

BLANKED = (1, 2, 4, 8, 16)                 # patches blanked per digit, k
PAIR_CNN = (16, 24, 32, 32)                # SmallCNN's default widths
# The runs of NORMS: three seeds, NORM_EPOCHS epochs of 40 steps each.
NORM_SEEDS = (0, 1, 2)
NORM_EPOCHS = 10

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
EPOCHS = tuple(STEPS * 100 // n for n in SIZES)   # (320, 160, 80, 40)
SEEDS = (0, 1, 2)
#: Each run's training loss is stored as the mean over this many equal
#: stretches of its steps.
LOSS_POINTS = 20


# ------------------------------------------------------------------ recipe
def shift(images, rng, pixels=2):
    """Each image (B, 28, 28) moved by its own random offset."""
    B, H, W = images.shape
    padded = nn.functional.pad(images, (pixels,) * 4)     # (B, H+2p, W+2p)
    off = torch.from_numpy(rng.integers(0, 2 * pixels + 1, size=(B, 2)))
    rows = off[:, :1] + torch.arange(H)                   # (B, H)
    cols = off[:, 1:] + torch.arange(W)                   # (B, W)
    return padded[torch.arange(B)[:, None, None], rows[:, :, None],
                  cols[:, None, :]]                       # (B, H, W)


def fit(model, images, labels, seed, epochs, batch_size=100, lr=2e-3,
        weight_decay=0.05, warmup=0.1, pixels=2):
    """Train a TinyViT or SmallCNN in place; the loss of every step."""
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


def _weights(model, config):
    arrays = weight_arrays(model)
    arrays["config"] = np.array([int(config[k]) for k in CONFIG_KEYS])
    return arrays



def _train_vit(seed, n_train=4000, epochs=20, threads=2, warmup=0.1,
               dtype=torch.float32, **model_args):
    split = mnist_split(n_train)
    with torch_threads(threads):
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


@recipe("vit-mnist", threads=2)
def vit_mnist():
    """The chapter's ViT: learned position embeddings, 20 epochs over 4,000
    digits, float32 on two threads."""
    return _vit_recipe()


@recipe("vit-mnist-local")
def vit_mnist_local():
    """The same ViT with a learned relative position bias in every block
    instead of position embeddings (the locality prior of
    :ref:`ch-transformer`),
    trained for 20 epochs on one thread."""
    return _vit_recipe(position=False, relative_bias=True,
                       threads=1)


# Its 20 passes take about a minute; tests/unit/test_mnist.py recomputes two
# of its counts instead of the whole file.
@recipe("vit-mnist-ablation", after=("vit-mnist",))
def vit_mnist_ablation():
    """Test digits (of 1,000) that the chapter's ViT still gets right with
    one head removed, ``heads`` (L, h), and with every head of one layer
    removed, ``layers`` (L,): 20 float64 passes over the test set, from
    the file of ``vit-mnist`` (which ``make train`` writes first)."""
    model, split = load_vit("vit-mnist"), mnist_split()
    N = len(split.y_test)
    with torch_threads(1):              # no waiting at barriers
        heads = interpret.head_ablation(model, split.X_test, split.y_test)
        L, h = heads.shape
        layers = []
        for layer in range(L):
            keep = np.ones((L, h))
            keep[layer] = 0.0                        # the whole layer
            layers.append(accuracy(model, split.X_test, split.y_test, keep))
    return {"heads": np.round(heads * N).astype(np.int64),
            "layers": np.round(np.array(layers) * N).astype(np.int64)}


@recipe("vit-mnist-misconceptions", after=("vit-mnist",))
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
    with torch_threads(1):              # no waiting at barriers
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


@recipe("vit-mnist-norms")
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


def _train_cnn(seed, n_train, epochs, threads=1):
    split = mnist_split(n_train)
    with torch_threads(threads):
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


@recipe("mnist-sizes-vit")
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


@recipe("mnist-sizes-cnn")
def mnist_sizes_cnn():
    """The same for the CNN of about its size (:data:`PAIR_CNN`), trained
    with the same recipe on the same digits for as many steps."""
    return _sizes_recipe(_train_cnn)


# A float64 retrain on one thread from fixed seeds is bit for bit on one
# machine. Another CPU's kernels round float64 products differently: forced
# to generic code (ATEN_CPU_CAPABILITY=default, OPENBLAS_CORETYPE=Haswell)
# the 15 AdamW steps ended at most 4.5e-8 away; atol = 1e-6 allows 20 times
# that and still catches any change of data, seed, model or recipe.
@recipe("vit-mnist-tiny", rtol=0.0, atol=1e-6,
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
