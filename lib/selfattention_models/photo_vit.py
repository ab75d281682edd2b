"""The tiny ViT on photographs (:ref:`ch-photographs`): a masked-patch version,
the crops and scenes it is measured on, the detector's query decoder over its
tokens, and the loaders of the weights.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import nn

from selfattention._validate import (boundary, divides, floats, generator,
                                     instance, integer, one_of,
                                     positive_int)
from selfattention.detection import DecoderLayer
from selfattention.patches import patchify
from selfattention.vit import TinyViT

from . import trained
from .photos import random_crops, split_photographs
from .scenes import digit_scenes, split_digits
from .trained import load_weight_arrays

CROP, PATCH, ZOOM = 32, 4, 384       # photographs: 8 × 8 patches of 4 px
SCENE, DIGIT, DIGIT_PATCH = 56, 28, 7  # clutter: 8 × 8 patches of 7 px
GRID = (8, 8)                        # both: 64 tokens
SIZES = dict(n=64, d=64, h=4, depth=4, d_mlp=128)

__all__ = ["MaskedViT", "photo_tokens", "masked_patch_loss",
           "hide_half", "photo_model", "held_out_crops", "load_photo_vit",
           "clutter_split", "clutter_scenes", "clutter_test_scenes",
           "clutter_model", "clutter_inputs", "load_clutter_model",
           "PHOTO_MODELS", "CLUTTER_MODELS", "detection_scenes",
           "detection_test_scenes", "QueryDecoder", "detector_model",
           "load_detector"]


class MaskedViT(TinyViT):
    """A :class:`~selfattention.vit.TinyViT` that can hide patches behind a
    learned mask token and predict every patch's pixels from its output
    token."""

    def __init__(self, **sizes):
        super().__init__(**sizes)
        d, d_in = self.embed.out_features, self.embed.in_features
        self.mask_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pixels = nn.Linear(d, d_in)         # output token -> p² pixels

    def encode(self, x, hidden=None):
        """Output tokens and weights; ``hidden`` (B, n) patches get the mask."""
        z = self.embed(x)                        # (B, n, d)
        if hidden is not None:
            z = torch.where(hidden[..., None], self.mask_token, z)
        z = torch.cat([self.cls.expand(len(z), -1, -1), z], dim=1) + self.pos
        maps = []                                # z: (B, 1+n, d)
        for block in self.blocks:
            z, A = block(z)
            maps.append(A)                       # (B, h, 1+n, 1+n)
        return self.ln(z), torch.stack(maps, dim=1)

    def forward(self, x, hidden=None):
        """Logits (B, classes) from the class token, and the weights."""
        z, maps = self.encode(x, hidden)
        return self.head(z[:, 0]), maps

    def reconstruct(self, x, hidden=None):
        """Pixels (B, n, p²) predicted for every patch, and the weights."""
        z, maps = self.encode(x, hidden)
        return self.pixels(z[:, 1:]), maps


@boundary(crops=floats(ndim=3), patch=positive_int(),
          checks=(lambda crops, patch: divides(
              "patch", patch, crops.shape[-2:],
              "the crops' height and width"),))
def photo_tokens(crops, patch):
    """Crops (B, S, S) to tokens (B, n, patch²), each crop first
    standardised (zero mean, unit variance; 10⁻³ added to the deviation) so
    that its brightness and contrast say nothing about where it comes
    from."""
    mu = crops.mean(axis=(1, 2), keepdims=True)
    sd = crops.std(axis=(1, 2), keepdims=True) + 1e-3
    return patchify((crops - mu) / sd, patch)


@boundary(pred=instance(torch.Tensor, "a torch tensor (B, n, p²)"),
          target=instance(torch.Tensor, "a torch tensor (B, n, p²)"),
          hidden=instance(torch.Tensor, "a bool torch tensor (B, n)"))
def masked_patch_loss(pred, target, hidden):
    """Mean squared error over the hidden patches only."""
    if pred.shape != target.shape or pred.dim() != 3:
        raise ValueError(f"pred and target must share a shape (B, n, p²); "
                         f"got {tuple(pred.shape)} and {tuple(target.shape)}")
    if hidden.dtype != torch.bool or hidden.shape != pred.shape[:2]:
        raise ValueError(f"hidden must be bool of shape {tuple(pred.shape[:2])}"
                         f"; got {hidden.dtype} {tuple(hidden.shape)}")
    if not bool(hidden.any()):
        raise ValueError("hidden hides no patch: the loss has nothing to "
                         "score")
    per_patch = ((pred - target) ** 2).mean(dim=-1)     # (B, n)
    return per_patch[hidden].mean()


@boundary(rng=generator(), batch=positive_int(), n=positive_int())
def hide_half(rng, batch, n):
    """(batch, n) bool: in each row, ``n // 2`` patches drawn without
    replacement from ``rng`` are hidden."""
    order = rng.random((batch, n)).argsort(axis=1)      # a random rank each
    return torch.from_numpy(order < n // 2)


# ------------------------------------------------- the chapter's models
@boundary(classes=positive_int())
def photo_model(classes):
    """An untrained photographs' :class:`MaskedViT`: width 64, 4 blocks of
    4 heads, 64 tokens of 4 × 4 pixels, ``classes`` photographs to name."""
    return MaskedViT(d_in=PATCH * PATCH, classes=classes, **SIZES)


@boundary(n=positive_int(), seed=integer(0))
def held_out_crops(n=500, seed=1000):
    """``n`` crops (n, 32, 32) of the held-out photographs, 384 pixels on
    their shorter side: those the recipes measure distances on."""
    test_names = list(split_photographs()[1])
    return random_crops(np.random.default_rng(seed), test_names, n, CROP,
                        ZOOM)[0]


PHOTO_MODELS = tuple(f"photos-{objective}-{seed}"
                     for objective in ("mim", "which") for seed in range(3))
CLUTTER_MODELS = ("clutter-vit", "clutter-cnn")


@boundary(name=one_of(*PHOTO_MODELS))
def load_photo_vit(name):
    """The trained photographs' ViT ``name`` (``photos-mim-0``, ...), float64,
    in evaluation mode."""
    arrays = trained.load(name)
    classes = arrays["w/head.weight"].shape[0]
    return load_weight_arrays(photo_model(classes), arrays)


@lru_cache(maxsize=None)
def clutter_split():
    """The clutter task's photographs and MNIST digits, each split in two:
    ``(train_photos, test_photos, train_digits, test_digits)``."""
    train_photos, test_photos = split_photographs()
    train_digits, test_digits = split_digits(0.2)
    return train_photos, test_photos, train_digits, test_digits


@boundary(rng=generator(), n=positive_int(), test=instance(bool))
def clutter_scenes(rng, n, test=False):
    """``n`` scenes of one 28-pixel digit on a 56 × 56 crop, from the
    training (or held-out) photographs and digits."""
    tp, sp, td, sd = clutter_split()
    return digit_scenes(rng, n, list(sp if test else tp), sd if test else td,
                        size=SCENE, n_digits=(1, 1),
                        digit_size=(DIGIT, DIGIT))


@boundary(n=positive_int(), seed=integer(0))
def clutter_test_scenes(n=1000, seed=2000):
    """The scenes every clutter model is tested on."""
    return clutter_scenes(np.random.default_rng(seed), n, test=True)


@boundary(kind=one_of("vit", "cnn"))
def clutter_model(kind, dtype=torch.float32):
    """An untrained clutter model: ``"vit"`` or ``"cnn"``
    (:class:`selfattention_models.mnist.SmallCNN`)."""
    if kind == "cnn":
        from .mnist import SmallCNN
        return SmallCNN().to(dtype)
    return TinyViT(d_in=DIGIT_PATCH ** 2, **SIZES).to(dtype)


@boundary(kind=one_of("vit", "cnn"), images=floats(ndim=3),
          checks=(lambda images, patch: divides(
              "patch", patch, images.shape[-2:],
              "the images' height and width"),))
def clutter_inputs(kind, images, dtype=torch.float32, patch=DIGIT_PATCH):
    """Scenes (B, S, S) as the model ``kind`` reads them: images
    (B, 1, S, S) for the CNN, tokens (B, n, patch²) for a ViT."""
    if kind == "cnn":
        return torch.from_numpy(images[:, None]).to(dtype)  # (B, 1, S, S)
    return torch.from_numpy(patchify(images, patch)).to(dtype)


@boundary(name=one_of(*CLUTTER_MODELS))
def load_clutter_model(name):
    """The trained clutter model ``name`` (``clutter-vit``, ``clutter-cnn``),
    float64, in evaluation mode."""
    arrays = trained.load(name)
    kind = "cnn" if "w/features.0.weight" in arrays else "vit"
    return load_weight_arrays(clutter_model(kind), arrays)


# ------------------------------------------------------------ detection
class QueryDecoder(nn.Module):
    """``queries`` learned vectors decoded against ``tokens`` encoder
    tokens of width ``d``; returns class logits (B, N, classes + 1, the
    last one *no object*), boxes (B, N, 4) as fractions of the image side,
    and each layer's cross-attention (B, L, h, N, n)."""

    def __init__(self, queries=4, tokens=64, d=64, h=4, d_mlp=128, depth=2,
                 classes=10):
        super().__init__()
        self.queries = nn.Parameter(torch.randn(1, queries, d))
        self.key_pos = nn.Parameter(0.02 * torch.randn(1, tokens, d))
        self.layers = nn.ModuleList(DecoderLayer(d, h, d_mlp)
                                    for _ in range(depth))
        self.ln = nn.LayerNorm(d)
        self.classify = nn.Linear(d, classes + 1)
        self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(),
                                 nn.Linear(d, 4))

    def forward(self, memory):
        z = self.queries.expand(len(memory), -1, -1)
        maps = []
        for layer in self.layers:
            z, A = layer(z, memory, self.key_pos)
            maps.append(A)
        z = self.ln(z)
        centre_size = self.box(z).sigmoid()      # (cy, cx, h, w) in [0, 1]
        centre, size = centre_size[..., :2], centre_size[..., 2:]
        boxes = torch.cat([centre - size / 2, centre + size / 2], -1)
        return self.classify(z), boxes, torch.stack(maps, 1)


DETR_QUERIES, DETR_DIGIT = 4, (16, 22)   # 1-3 digits of 16-22 px


@boundary(rng=generator(), n=positive_int(), test=instance(bool))
def detection_scenes(rng, n, test=False):
    """``n`` scenes of one to three digits of 16 to 22 pixels on a 56 × 56
    crop, from the training (or held-out) photographs and digits."""
    tp, sp, td, sd = clutter_split()
    return digit_scenes(rng, n, list(sp if test else tp), sd if test else td,
                        size=SCENE, n_digits=(1, 3), digit_size=DETR_DIGIT)


@boundary(n=positive_int(), seed=integer(0))
def detection_test_scenes(n=500, seed=3000):
    """The held-out scenes the detector is measured on."""
    return detection_scenes(np.random.default_rng(seed), n, test=True)


def detector_model(dtype=torch.float32):
    """An untrained :class:`QueryDecoder` of four queries over the clutter
    ViT's 64 tokens of width 64."""
    return QueryDecoder(DETR_QUERIES, GRID[0] * GRID[1], SIZES["d"],
                        SIZES["h"], SIZES["d_mlp"]).to(dtype)


def load_detector():
    """The trained detector: its encoder (``clutter-vit``, or the tuned
    copy that ``clutter-detr`` keeps) and its decoder, both float64 in
    evaluation mode."""
    arrays = trained.load("clutter-detr")
    tuned = {f"w/{k[2:]}": v for k, v in arrays.items() if k[:2] == "e/"}
    vit = (load_weight_arrays(clutter_model("vit"), tuned) if tuned
           else load_clutter_model("clutter-vit"))
    return vit, load_weight_arrays(detector_model(), arrays)
