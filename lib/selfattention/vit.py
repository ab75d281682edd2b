"""The tiny vision transformer (:ref:`ch-position`, :ref:`ch-transformer`,
:ref:`ch-misconceptions`) on 8 × 8 digits in 2 × 2-pixel patches, and its
use: the logits, weights, predictions and accuracy of a trained model.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._validate import (boundary, floats, generator, instance, ints,
                        one_per_image, optional, require)
from .position import relative_position_index

__all__ = ["shuffle_patches", "RelativeBias", "Block", "TinyViT", "forward",
           "predict", "accuracy"]


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
