"""The tiny vision transformer (:ref:`ch-position`, :ref:`ch-transformer`,
:ref:`ch-misconceptions`) on 8 × 8 digits in 2 × 2-pixel patches;
:func:`train` is deterministic (float64, its own seeds, one thread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ._validate import (boundary, divides, floats, generator, instance,
                        integer, ints, number, one_per_image, optional,
                        positive, positive_int, require)
from .patches import patchify
from .position import relative_position_index
from .torch_bridge import torch_threads

__all__ = ["DigitSplit", "digit_split", "shuffle_patches", "RelativeBias",
           "Block", "TinyViT", "train", "forward", "predict", "accuracy"]


@dataclass(frozen=True)
class DigitSplit:
    """Digits as tokens (N, 16, 4) in [0, 1], labels (N,), test images
    (N, 8, 8), the patch ``grid`` and the patch side ``patch`` in pixels."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    images_test: np.ndarray
    grid: tuple = (4, 4)
    patch: int = 2


@boundary(test_fraction=number(0, 1, strict=True), seed=integer(0))
def digit_split(test_fraction=0.25, seed=0):
    """The 1,797 digits as patch tokens, split reproducibly by label."""
    # scikit-learn takes about 3 s to import: only when a split is made.
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    images, labels = digits.images / 16.0, digits.target  # (N, 8, 8), (N,)
    train, test = train_test_split(np.arange(len(labels)),
                                   test_size=float(test_fraction),
                                   stratify=labels, random_state=seed)
    train, test = np.sort(train), np.sort(test)
    X = patchify(images, 2)                              # (N, 16, 4)
    return DigitSplit(X[train], labels[train], X[test], labels[test],
                      images[test])


@boundary(X=floats(ndim=3), rng=generator())
def shuffle_patches(X, rng):
    """Each image's patches in its own random order (:ref:`ch-position`):
    returns ``X_shuffled`` (N, n, d_in), ``X_shuffled[i] = X[i, perms[i]]``,
    and ``perms`` (N, n)."""
    perms = np.stack([rng.permutation(X.shape[1]) for _ in range(len(X))])
    return np.take_along_axis(X, perms[:, :, None], axis=1), perms


# ------------------------------------------------------------------ model
class RelativeBias(nn.Module):
    """A learned score bias per head and 2-D patch offset (Swin's B)."""

    def __init__(self, grid, h):
        super().__init__()
        H, W = grid
        self.table = nn.Parameter(torch.zeros(h, (2 * H - 1) * (2 * W - 1)))
        index = torch.from_numpy(relative_position_index(grid))  # (n, n)
        self.register_buffer("index", index, persistent=False)

    def forward(self):
        """The bias (h, 1+n, 1+n) on every score; 0 for the class token."""
        bias = self.table[:, self.index]         # (h, n, n) by offset
        return nn.functional.pad(bias, (1, 0, 1, 0))  # (h, 1+n, 1+n)


class Block(nn.Module):
    """Pre-LN block: z + MSA(LN(z)), then z + MLP(LN(z))."""

    def __init__(self, d, h, d_mlp, pre_ln=True, grid=None):
        super().__init__()
        self.h, self.pre_ln = h, pre_ln
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)           # W_Q, W_K, W_V side by side
        self.out = nn.Linear(d, d)               # W_O
        self.mlp = nn.Sequential(nn.Linear(d, d_mlp), nn.GELU(),
                                 nn.Linear(d_mlp, d))
        self.bias = None if grid is None else RelativeBias(grid, h)

    def forward(self, z, keep=None):             # new z, weights (B, h, n, n)
        B, n, d = z.shape
        x = self.ln1(z) if self.pre_ln else z
        qkv = self.qkv(x).view(B, n, 3, self.h, d // self.h)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)     # each (B, h, n, d_k)
        S = q @ k.transpose(-2, -1) / math.sqrt(d // self.h)  # (B, h, n, n)
        S = S if self.bias is None else S + self.bias()  # (h, n, n) added
        A = S.softmax(dim=-1)                    # (B, h, n, n)
        y = A @ v                                # (B, h, n, d_k)
        if keep is not None:                     # keep: (h,), 0 drops a head
            y = y * keep[:, None, None]
        y = y.transpose(1, 2).reshape(B, n, d)   # (B, n, h·d_k): heads joined
        z = z + self.out(y)                      # residual around attention
        if self.pre_ln:
            return z + self.mlp(self.ln2(z)), A  # residual around the MLP
        z = self.ln1(z)                          # post-LN: normalise the sums
        return self.ln2(z + self.mlp(z)), A


class TinyViT(nn.Module):
    """Patch embedding, class token, position embeddings, blocks, head."""

    def __init__(self, n=16, d_in=4, d=32, h=4, depth=2, d_mlp=64,
                 classes=10, position=True, pre_ln=True, grid=None):
        super().__init__()
        self.embed = nn.Linear(d_in, d)          # one token per patch
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = (nn.Parameter(0.02 * torch.randn(1, 1 + n, d))
                    if position else None)       # one vector per slot
        self.blocks = nn.ModuleList(Block(d, h, d_mlp, pre_ln, grid)
                                    for _ in range(depth))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x, keep=None):
        """Logits (B, classes) and all weights (B, L, h, 1+n, 1+n)."""
        z = self.embed(x)                        # (B, n, d); x: (B, n, d_in)
        z = torch.cat([self.cls.expand(len(z), -1, -1), z], dim=1)
        if self.pos is not None:                 # z: (B, 1+n, d)
            z = z + self.pos
        maps = []
        for i, block in enumerate(self.blocks):
            z, A = block(z, None if keep is None else keep[i])
            maps.append(A)                       # (B, h, 1+n, 1+n)
        logits = self.head(self.ln(z[:, 0]))     # (B, classes): class token
        return logits, torch.stack(maps, dim=1)  # maps: (B, L, h, 1+n, 1+n)


# ------------------------------------------------------------------ training
@boundary(data=instance(DigitSplit, "a DigitSplit from digit_split()"),
          position=instance(bool), seed=integer(0), epochs=positive_int(),
          d=positive_int(), h=positive_int(), depth=positive_int(),
          d_mlp=positive_int(), batch_size=positive_int(), lr=positive(),
          threads=positive_int(),
          checks=(lambda d, h: divides("h", h, (d,), "the token width d"),))
def train(data, position=True, seed=0, epochs=15, d=32, h=4, depth=2,
          d_mlp=64, batch_size=64, lr=5e-3, threads=1):
    """A :class:`TinyViT` trained on ``data``, the same on every run."""
    X = _tensor(data.X_train)
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


# ------------------------------------------------------------------ use
def _tensor(X):
    return torch.from_numpy(np.ascontiguousarray(X, dtype=np.float64))


_MODEL = instance(TinyViT)
_USE = dict(model=_MODEL, X=floats(ndim=3), keep=optional(floats(ndim=2)))


def tokens_fit(model, X) -> None:
    """Tokens ``X`` (N, n, d_in) as the model's embedding and positions
    take them."""
    n = model.pos.shape[1] - 1 if model.pos is not None else X.shape[1]
    want = (n, model.embed.in_features)
    require(X.shape[1:] == want, f"X must have shape (N, {want[0]}, "
                                 f"{want[1]}) for the model, got {X.shape}")


def _fit(model, X, keep) -> None:
    tokens_fit(model, X)
    want = (len(model.blocks), model.blocks[0].h)
    require(keep is None or keep.shape == want, f"keep must have shape (L, "
            f"h) = {want} for the model, got {getattr(keep, 'shape', None)}")


@boundary(**_USE, checks=(_fit,))
def forward(model, X, keep=None):
    """Logits (N, classes) and weights (N, L, h, 1+n, 1+n), as NumPy."""
    keep = None if keep is None else _tensor(keep)
    N, logits, maps = len(X), None, None
    with torch.no_grad():
        for start in range(0, max(N, 1), FORWARD_BATCH):
            part = slice(start, start + FORWARD_BATCH)
            out, A = model(_tensor(X[part]), keep)
            if logits is None:                   # (N, classes), (N, L, ...)
                logits = np.empty((N, *out.shape[1:]))
                maps = np.empty((N, *A.shape[1:]))
            logits[part], maps[part] = out.numpy(), A.numpy()
    return logits, maps


FORWARD_BATCH = 100


@boundary(**_USE, checks=(_fit,))
def predict(model, X, keep=None):
    """Predicted labels (N,) of patch tokens ``X`` (N, n, d_in)."""
    return forward(model, X, keep)[0].argmax(axis=1)


@boundary(**_USE, y=ints(ndim=1),
          checks=(_fit, lambda X, y: one_per_image(X, y=y)))
def accuracy(model, X, y, keep=None):
    """Share of the images ``X`` classified as ``y`` (a count over N)."""
    return float(np.mean(predict(model, X, keep) == y))
