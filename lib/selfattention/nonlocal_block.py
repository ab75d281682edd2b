"""Non-local blocks: self-attention over the ``N = T·H·W`` positions of a video
feature map (T, H, W, C), numbered ``t·H·W + r·W + c`` (:ref:`ch-nonlocal`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ._validate import (boundary, floats, one_of, optional, positive_int,
                        require, same_shape)
from .attention import attention

__all__ = ["FORMS", "SCOPES", "scope_mask", "nonlocal_op", "NonLocalBlock"]

FORMS = ("embedded_gaussian", "dot_product")
SCOPES = ("spacetime", "space", "time")


@boundary(T=positive_int(), H=positive_int(), W=positive_int(),
          scope=one_of(*SCOPES))
def scope_mask(T, H, W, scope="spacetime"):
    """Which positions of a (T, H, W) feature map each position may use."""
    N = T * H * W
    if scope == "spacetime":
        return np.ones((N, N), dtype=bool)
    frame = np.arange(N) // (H * W)                       # (N,) t
    place = np.arange(N) % (H * W)                        # (N,) r·W + c
    key = frame if scope == "space" else place
    return key[:, None] == key[None, :]                   # (N, N)


def _embeddings_fit(X, W_theta, W_phi, W_g) -> None:
    """The embeddings take the channels of ``X``."""
    for name, W in (("W_theta", W_theta), ("W_phi", W_phi), ("W_g", W_g)):
        require(W.shape[0] == X.shape[-1], f"{name} must have one row per "
                f"channel of X ({X.shape[-1]}), got shape {W.shape}")
    same_shape(W_theta=W_theta, W_phi=W_phi)


@boundary(X=floats(min_ndim=4), W_theta=floats(ndim=2),
          W_phi=floats(ndim=2), W_g=floats(ndim=2), form=one_of(*FORMS),
          scope=one_of(*SCOPES), checks=(_embeddings_fit,))
def nonlocal_op(X, W_theta, W_phi, W_g, form="embedded_gaussian",
                scope="spacetime"):
    """The non-local operation over every position of a video feature map."""
    *batch, T, H, W, C = X.shape
    mask = scope_mask(T, H, W, scope)                     # (N, N)
    x = X.reshape(*batch, T * H * W, C)                   # (..., N, C)
    theta, phi, g = x @ W_theta, x @ W_phi, x @ W_g       # (..., N, d)
    if form == "embedded_gaussian":                       # softmax(θφᵀ) g
        Y, F = attention(theta, phi, g, mask=mask, scale=1.0)
    else:                                                 # θφᵀ / N, no softmax
        S = theta @ np.swapaxes(phi, -1, -2)              # (..., N, N)
        F = np.where(mask, S, 0.0) / mask.sum(axis=-1, keepdims=True)
        Y = F @ g                                         # (..., N, d_v)
    return Y.reshape(*batch, T, H, W, g.shape[-1]), F


class NonLocalBlock(nn.Module):
    """``z = x + gamma · W_z(y)``, gamma a learnable scalar starting at 0."""

    @boundary(channels=positive_int(), inner=optional(positive_int()),
              form=one_of(*FORMS))
    def __init__(self, channels, inner=None, form="embedded_gaussian"):
        super().__init__()
        inner = max(1, channels // 2) if inner is None else inner
        self.form = form
        self.theta = nn.Linear(channels, inner, bias=False)
        self.phi = nn.Linear(channels, inner, bias=False)
        self.g = nn.Linear(channels, inner, bias=False)
        self.out = nn.Linear(inner, channels, bias=False)        # W_z
        self.gamma = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block applied to ``x``; the output has the shape of ``x``."""
        if x.ndim < 3 or x.shape[1] != self.theta.in_features:
            raise ValueError(f"x must have shape (B, C={self.theta.in_features}"
                             f", *positions), got {tuple(x.shape)}")
        z = x.flatten(2).transpose(1, 2)                          # (B, N, C)
        S = self.theta(z) @ self.phi(z).transpose(1, 2)           # (B, N, N)
        F = torch.softmax(S, -1) if self.form == "embedded_gaussian" \
            else S / S.shape[-1]
        y = self.out(F @ self.g(z)).transpose(1, 2)               # (B, C, N)
        return x + self.gamma * y.reshape(x.shape)
