"""The ``make train`` recipes of :ref:`ch-photographs`: the tiny ViT trained
on photographs by two objectives, and on digits pasted on photographs.

* ``photos-mim-<seed>`` and ``photos-which-<seed>`` (seeds 0, 1, 2): a
  :class:`~selfattention.photo_vit.MaskedViT` (width 64, 4 blocks of 4
  heads) sees 32 × 32 grey crops of the 17 training photographs
  (:func:`selfattention.photos.split_photographs`), each resized to 384
  pixels on its shorter side, cut into 4 × 4-pixel patches (64 tokens). It
  learns either to fill in half of the patches, hidden behind the mask token
  (``mim``, :func:`~selfattention.photo_vit.masked_patch_loss`), or to say
  which of the 17 photographs a crop comes from (``which``). Each file
  holds the weights, the loss of every step and the mean attention
  distance of every head on 500 crops of the 4 held-out photographs,
  unmasked (``distance``) and with half of the patches hidden
  (``distance_hidden``).
* ``clutter-vit``, ``clutter-vit-registers`` and ``clutter-cnn``: one
  28-pixel digit pasted on a 56 × 56 crop
  (:func:`selfattention.scenes.digit_scenes`), 7 × 7-pixel patches for the
  ViTs; ``test_correct`` counts the right answers on 1,000 scenes of
  held-out photographs and held-out digits.

Every recipe is float32 on one thread from fixed seeds: it repeats bit for
bit on one machine. The ``-tiny`` recipes, float64 and a few steps, are
what ``make test`` retrains.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from selfattention import interpret, trained
from selfattention.photo_vit import (CROP, GRID, PATCH, ZOOM,
                                     clutter_inputs, clutter_model,
                                     clutter_scenes, clutter_test_scenes,
                                     hide_half, held_out_crops,
                                     masked_patch_loss, photo_model,
                                     photo_tokens)
from selfattention.photos import random_crops, split_photographs
from selfattention.vit import weight_arrays

from .recipes import recipe


def _schedule(opt, steps, warmup=0.05):
    """Linear warm-up over ``warmup`` of the steps, then a cosine to 0."""
    warm = max(1, round(warmup * steps))

    def rate(step):
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
    return torch.optim.lr_scheduler.LambdaLR(opt, rate)


def _distances(model, crops, hidden=None):
    """Mean attention distance (L, h) in pixels over ``crops``."""
    X = torch.from_numpy(photo_tokens(crops, PATCH)).to(
        next(model.parameters()).dtype)
    with torch.no_grad():
        maps = model(X, hidden)[1]
    return interpret.mean_attention_distance(maps.double().numpy(), GRID,
                                             PATCH)


def train_photos(objective, seed, steps, batch=128, lr=2e-3,
                 dtype=torch.float32, threads=1, held_out=500):
    """Train a :class:`~selfattention.photo_vit.MaskedViT` on crops of the
    training photographs:
    ``objective`` ``"mim"`` fills in the hidden half of the patches,
    ``"which"`` names the photograph. Returns the recipe's arrays, with
    the distances measured on ``held_out_crops(held_out)``."""
    names = list(split_photographs()[0])
    rng = np.random.default_rng(seed)
    with trained.torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = photo_model(len(names)).to(dtype)
        opt = torch.optim.AdamW(model.parameters(), lr, weight_decay=0.05)
        sched = _schedule(opt, steps)
        losses = np.empty(steps, np.float32)
        model.train()
        for step in range(steps):
            crops, source = random_crops(rng, names, batch, CROP, ZOOM)
            x = torch.from_numpy(photo_tokens(crops, PATCH)).to(dtype)
            if objective == "mim":
                hidden = hide_half(rng, batch, x.shape[1])
                pred = model.reconstruct(x, hidden)[0]
                loss = masked_patch_loss(pred, x, hidden)
            else:
                loss = nn.functional.cross_entropy(
                    model(x)[0], torch.from_numpy(source))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses[step] = loss.item()
        model.eval()
        crops = held_out_crops(held_out)
        hidden = hide_half(np.random.default_rng(1001), len(crops),
                           GRID[0] * GRID[1])
        distance = _distances(model, crops)
        distance_hidden = _distances(model, crops, hidden)
    return {**weight_arrays(model), "loss": losses, "distance": distance,
            "distance_hidden": distance_hidden}


def _photo_recipe(objective, seed):
    @recipe(f"photos-{objective}-{seed}")
    def train_one():
        return train_photos(objective, seed, steps=1000)
    train_one.__doc__ = (f"The photographs' ViT, objective {objective!r}, "
                         f"seed {seed}: 1,000 steps of 128 crops.")
    return train_one


for _objective in ("mim", "which"):
    for _seed in range(3):
        _photo_recipe(_objective, _seed)


def _curves(arrays):
    """A recipe's arrays without its weights: what a tiny recipe keeps, so
    that its file stays small; the losses and measurements that remain
    depend on every weight."""
    return {k: v for k, v in arrays.items() if not k.startswith("w/")}


@recipe("photos-mim-tiny", rtol=0.0, atol=1e-6,
                retrained_by_test=True)
def photos_mim_tiny():
    """Ten float64 steps of 16 crops of the masked-patch recipe, its losses
    and distances kept: what ``make test`` retrains to check that
    :func:`train_photos` still gives the same numbers."""
    return _curves(train_photos("mim", 0, steps=10, batch=16,
                                dtype=torch.float64, held_out=50))


# ------------------------------------------------------------------ clutter
def _logits(out):
    return out[0] if isinstance(out, tuple) else out


def train_clutter(kind, seed, steps, registers=0, batch=128, lr=2e-3,
                  dtype=torch.float32, threads=1, test_scenes=1000):
    """Train ``kind`` to name the digit of
    :func:`~selfattention.photo_vit.clutter_scenes`; returns
    the recipe's arrays, with the right answers on
    ``clutter_test_scenes(test_scenes)``."""
    rng = np.random.default_rng(seed)
    with trained.torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = clutter_model(kind, registers, dtype)
        opt = torch.optim.AdamW(model.parameters(), lr, weight_decay=0.05)
        sched = _schedule(opt, steps)
        losses = np.empty(steps, np.float32)
        model.train()
        for step in range(steps):
            s = clutter_scenes(rng, batch)
            logits = _logits(model(clutter_inputs(kind, s.images,
                                                  dtype=dtype)))
            loss = nn.functional.cross_entropy(
                logits, torch.from_numpy(s.labels[:, 0]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses[step] = loss.item()
        model.eval()
        test = clutter_test_scenes(test_scenes)
        with torch.no_grad():
            logits = _logits(model(clutter_inputs(kind, test.images,
                                                  dtype=dtype)))
        correct = int((logits.argmax(1).numpy() == test.labels[:, 0]).sum())
    return {**weight_arrays(model), "loss": losses,
            "test_correct": np.int64(correct)}


@recipe("clutter-vit")
def clutter_vit():
    """The clutter ViT: 2,500 steps of 128 scenes."""
    return train_clutter("vit", 0, steps=2500)


@recipe("clutter-vit-registers")
def clutter_vit_registers():
    """The clutter ViT with four register tokens: 2,500 steps."""
    return train_clutter("vit", 0, steps=2500, registers=4)


@recipe("clutter-cnn")
def clutter_cnn():
    """The CNN of :ref:`ch-transformer` on the clutter task: 2,500 steps."""
    return train_clutter("cnn", 0, steps=2500)


@recipe("clutter-vit-tiny", rtol=0.0, atol=1e-6,
                retrained_by_test=True)
def clutter_vit_tiny():
    """Ten float64 steps of 16 scenes of the clutter recipe, with two
    registers, its losses and count kept: what ``make test`` retrains to
    check that :func:`train_clutter` still gives the same numbers."""
    return _curves(train_clutter("vit", 0, steps=10, registers=2, batch=16,
                                 dtype=torch.float64, test_scenes=100))
