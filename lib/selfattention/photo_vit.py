"""The tiny ViT of :ref:`ch-transformer` on photographs (:ref:`ch-photographs`):
a version that fills in hidden patches, a version with register tokens, and
the tokens they read.

Both are :class:`selfattention.vit.TinyViT` with a few parameters more and
return what it returns, logits and the stack of weights (B, L, h, m, m),
so that :mod:`selfattention.interpret` reads them as it reads the digits'
ViT.

* :class:`MaskedViT` adds a learned *mask token*, put in place of the
  embedding of every hidden patch, and a linear *pixel head* that turns each
  output token back into its patch's pixels; :func:`masked_patch_loss`
  scores only the hidden patches (masked image modelling, as in SimMIM).
* :class:`RegisterViT` appends ``k`` learned *register* tokens after the
  patches, with no position and read by nothing (Darcet et al. 2024).
"""

from __future__ import annotations

import torch
from torch import nn

from ._relations import patch_divides_image
from ._validate import boundary, floats, generator, instance, positive_int
from .patches import patchify
from .vit import TinyViT

__all__ = ["MaskedViT", "RegisterViT", "photo_tokens", "masked_patch_loss",
           "hide_half"]


class MaskedViT(TinyViT):
    """A :class:`TinyViT` that can hide patches behind a learned mask token
    and predict every patch's pixels from its output token."""

    def __init__(self, **sizes):
        super().__init__(**sizes)
        d, d_in = self.embed.out_features, self.embed.in_features
        self.mask_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pixels = nn.Linear(d, d_in)         # output token -> p² pixels

    def encode(self, x, hidden=None):
        """Output tokens (B, 1+n, d) and weights (B, L, h, 1+n, 1+n);
        ``hidden`` (B, n) bool puts the mask token in place of those
        patches' embeddings."""
        z = self.embed(x)                        # (B, n, d)
        if hidden is not None:
            z = torch.where(hidden[..., None], self.mask_token, z)
        z = torch.cat([self.cls.expand(len(z), -1, -1), z], dim=1)
        z = z + self.pos                         # (B, 1+n, d)
        maps = []
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


class RegisterViT(TinyViT):
    """A :class:`TinyViT` with ``registers`` learned tokens after the
    patches, without position, that nothing reads: room for computation
    that would otherwise take over background patches (Darcet et al. 2024).
    Its weights are (B, L, h, 1+n+k, 1+n+k)."""

    def __init__(self, registers=4, **sizes):
        super().__init__(**sizes)
        d = self.embed.out_features
        self.registers = nn.Parameter(0.02 * torch.randn(1, registers, d))

    def tokens(self, x, keep=None):
        """Output tokens (B, 1+n+k, d) before the last norm, and weights."""
        z = self.embed(x)                        # (B, n, d)
        z = torch.cat([self.cls.expand(len(z), -1, -1), z], dim=1) + self.pos
        z = torch.cat([z, self.registers.expand(len(z), -1, -1)], dim=1)
        maps = []
        for i, block in enumerate(self.blocks):
            z, A = block(z, None if keep is None else keep[i])
            maps.append(A)                       # (B, h, m, m)
        return z, torch.stack(maps, dim=1)

    def forward(self, x, keep=None):
        """Logits (B, classes) from the class token, and the weights."""
        z, maps = self.tokens(x, keep)
        return self.head(self.ln(z[:, 0])), maps


@boundary(crops=floats(ndim=3), patch=positive_int(),
          checks=(patch_divides_image.using(img="crops", p="patch"),))
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
    """Mean squared error over the hidden patches only.

    ``pred`` and ``target`` (B, n, p²) pixels, ``hidden`` (B, n) bool with
    at least one True. Each hidden patch counts once, whatever its batch
    row; the visible patches, which the model could copy, do not count.
    """
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
