"""The training of the tiny ViT on 8 × 8 digits (:func:`train`, deterministic:
float64, its own seeds, one thread), and its ``make train`` recipes, with the
arguments of ``selfattention_models.digits.TRAINED_DIGITS``.
"""

import math

import numpy as np
import torch
from torch import nn

from selfattention._validate import (boundary, divides, instance, integer,
                                     positive, positive_int)
from selfattention.torch_bridge import torch_threads
from selfattention.vit import TinyViT
from selfattention_models.digits import TRAINED_DIGITS, DigitSplit, digit_split

from .recipes import recipe, weight_arrays

__all__ = ["train"]


@boundary(data=instance(DigitSplit, "a DigitSplit from digit_split()"),
          position=instance(bool), seed=integer(0), epochs=positive_int(),
          d=positive_int(), h=positive_int(), depth=positive_int(),
          d_mlp=positive_int(), batch_size=positive_int(), lr=positive(),
          threads=positive_int(),
          checks=(lambda d, h: divides("h", h, (d,), "the token width d"),))
def train(data, position=True, seed=0, epochs=15, d=32, h=4, depth=2,
          d_mlp=64, batch_size=64, lr=5e-3, threads=1):
    """A :class:`~selfattention.vit.TinyViT` trained on ``data``, the same
    on every run."""
    X = torch.tensor(data.X_train, dtype=torch.float64)
    y = torch.from_numpy(np.asarray(data.y_train, dtype=np.int64))
    rng = np.random.default_rng(seed)
    with torch_threads(threads):
        with torch.random.fork_rng(devices=[]):     # the caller's stream
            torch.manual_seed(seed)                  # stays untouched
            model = TinyViT(X.shape[1], X.shape[2], d, h, depth, d_mlp,
                            position=position).double()
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0,
                                fused=True)
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=lr, pct_start=0.1,
            total_steps=epochs * math.ceil(len(X) / batch_size))
        model.train()
        model.losses = []                        # mean loss of each epoch
        for _ in range(epochs):
            model.losses.append(0.0)
            for idx in torch.from_numpy(rng.permutation(len(X))).split(
                    batch_size):
                loss = nn.functional.cross_entropy(model(X[idx])[0], y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                model.losses[-1] += loss.item() * len(idx) / len(X)
    return model.eval()


def _digits_recipe(name, arguments):
    @recipe(name, rtol=0.0, atol=1e-6, retrained_by_test=True)
    def train_digits():
        model = train(digit_split(), **arguments)
        return {**weight_arrays(model), "losses": np.array(model.losses)}
    train_digits.__doc__ = (f":func:`train` on :func:`digit_split` with "
                            f"{arguments or 'its defaults'}: the weights "
                            f"(``w/<name>``) and each epoch's mean loss.")
    return train_digits


for _name, _arguments in TRAINED_DIGITS.items():
    _digits_recipe(_name, _arguments)
