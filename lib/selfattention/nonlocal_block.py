"""Non-local blocks: self-attention over the positions of a video (chapter 9).

The non-local operation of Wang et al. (2018) computes the response at one
position of a feature map as a normalised weighted sum of the features at
*all* positions, over space and time:

    y_i = (1 / C(x)) · Σ_j f(x_i, x_j) · g(x_j),   g(x_j) = x_j W_g.

Two of its forms are implemented here, both with θ = x W_θ and φ = x W_φ:

* ``"embedded_gaussian"``: ``f = exp(θ_i · φ_j)`` and ``C(x) = Σ_j f``, which
  is a softmax over the positions, i.e. attention with scale 1;
* ``"dot_product"``: ``f = θ_i · φ_j`` and ``C(x) = N``, the number of
  positions: no softmax, weights that need not be positive or sum to one.

A video feature map has shape (T, H, W, C); its ``N = T·H·W`` positions are
numbered ``t·H·W + r·W + c``. :func:`scope_mask` restricts the operation to
space only (same frame) or time only (same place), the ablation of the paper.

:class:`NonLocalBlock` is the trainable PyTorch block, with the learnable gate
``gamma`` of SAGAN (Zhang et al., 2019) initialised at zero, so that the block
starts as the identity.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ._validate import (boundary, floats, one_of, optional, positive_int)
from .attention import attention

__all__ = ["FORMS", "SCOPES", "scope_mask",
           "nonlocal_op", "mass_per_frame", "NonLocalBlock"]

FORMS = ("embedded_gaussian", "dot_product")
SCOPES = ("spacetime", "space", "time")


# ------------------------------------------------------------------ checks
def _embeddings_fit(args) -> None:
    """θ, φ and g read the channels of X; θ and φ have the same width."""
    C = args["X"].shape[-1]
    for name in ("W_theta", "W_phi", "W_g"):
        if args[name].shape[0] != C:
            raise ValueError(f"{name} must have one row per channel of X "
                             f"({C}), got shape {args[name].shape}")
    if args["W_theta"].shape != args["W_phi"].shape:
        raise ValueError(f"W_theta and W_phi must have the same shape "
                         f"(C, d_k), got {args['W_theta'].shape} and "
                         f"{args['W_phi'].shape}")


def _whole_frames(args) -> None:
    T, length = args["T"], args["weights"].shape[-1]
    if length % T:
        raise ValueError(f"weights must hold T·H·W entries, a multiple of "
                         f"T={T}, got {length}")


# ------------------------------------------------------------------ maths
@boundary(T=positive_int(), H=positive_int(), W=positive_int(),
          scope=one_of(*SCOPES))
def scope_mask(T, H, W, scope="spacetime"):
    """Which positions of a (T, H, W) feature map each position may use.

    Parameters
    ----------
    T, H, W : int
        Frames, rows and columns; positions are numbered ``t·H·W + r·W + c``.
    scope : {"spacetime", "space", "time"}
        ``"spacetime"``: every position; ``"space"``: positions of the same
        frame; ``"time"``: the same place (r, c) in every frame.

    Returns
    -------
    mask : ndarray of bool, shape (N, N) with ``N = T·H·W``
        True = may attend. Each row holds ``N``, ``H·W`` or ``T`` Trues.
    """
    N = T * H * W
    if scope == "spacetime":
        return np.ones((N, N), dtype=bool)
    frame = np.arange(N) // (H * W)                       # (N,) t
    place = np.arange(N) % (H * W)                        # (N,) r·W + c
    key = frame if scope == "space" else place
    return key[:, None] == key[None, :]                   # (N, N)


@boundary(X=floats(min_ndim=4), W_theta=floats(ndim=2),
          W_phi=floats(ndim=2), W_g=floats(ndim=2), form=one_of(*FORMS),
          scope=one_of(*SCOPES), checks=(_embeddings_fit,))
def nonlocal_op(X, W_theta, W_phi, W_g, form="embedded_gaussian",
                scope="spacetime"):
    """The non-local operation over every position of a video feature map.

    Parameters
    ----------
    X : array_like, shape (..., T, H, W, C)
        Feature map with ``C`` channels at each of ``N = T·H·W`` positions.
    W_theta, W_phi : array_like, shape (C, d_k)
        The embeddings θ and φ (the paper's 1×1×1 convolutions).
    W_g : array_like, shape (C, d_v)
        The value embedding g.
    form : {"embedded_gaussian", "dot_product"}
        ``f = exp(θ·φ)`` normalised by its sum (a softmax: attention with
        scale 1), or ``f = θ·φ`` normalised by the number of positions the
        query may use.
    scope : {"spacetime", "space", "time"}
        Positions each query may use (:func:`scope_mask`).

    Returns
    -------
    Y : ndarray, shape (..., T, H, W, d_v)
        The responses ``y_i``.
    F : ndarray, shape (..., N, N)
        The normalised pairwise weights ``f(x_i, x_j) / C(x)``; zero outside
        the scope.

    Raises
    ------
    TypeError
        If an input is not an array of real numbers.
    ValueError
        If an input is not finite, the shapes do not fit, or ``form`` or
        ``scope`` is unknown.
    """
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


@boundary(weights=floats(min_ndim=1), T=positive_int(),
          checks=(_whole_frames,))
def mass_per_frame(weights, T):
    """Sum one query's weights over the positions of each frame.

    ``weights`` (..., T·H·W), rows of the ``F`` of :func:`nonlocal_op`,
    -> mass (..., T). ``ValueError`` if their length is not a multiple of
    ``T``.
    """
    return weights.reshape(*weights.shape[:-1], T, -1).sum(axis=-1)


class NonLocalBlock(nn.Module):
    """A non-local block with SAGAN's zero-initialised gate (chapter 9).

    ``z = x + gamma · W_z(y)``, where ``y`` is the non-local operation of
    :func:`nonlocal_op` over every position of ``x`` and ``gamma`` is a
    learnable scalar that starts at 0, so the block is exactly the identity
    when created. The embeddings are linear maps of the channels at each
    position (the paper's 1×1×1 convolutions), without biases.

    Parameters
    ----------
    channels : int
        Channels ``C`` of the input.
    inner : int, optional
        Width ``d_k = d_v`` of θ, φ and g; the paper halves ``C``, the
        default here.
    form : {"embedded_gaussian", "dot_product"}
        As in :func:`nonlocal_op`.

    Notes
    -----
    ``forward(x)`` takes ``x`` of shape ``(B, C, *positions)``, e.g.
    ``(B, C, T, H, W)`` for a video or ``(B, C, H, W)`` for an image, and
    returns a tensor of the same shape.
    """

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

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The normalised pairwise weights, shape (B, N, N)."""
        z = self._tokens(x)                                       # (B, N, C)
        S = self.theta(z) @ self.phi(z).transpose(1, 2)           # (B, N, N)
        if self.form == "embedded_gaussian":
            return torch.softmax(S, dim=-1)
        return S / S.shape[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x + gamma · W_z(y)``, same shape as ``x``."""
        z = self._tokens(x)                                       # (B, N, C)
        y = self.out(self.weights(x) @ self.g(z))                 # (B, N, C)
        y = y.transpose(1, 2).reshape(x.shape)                    # (B, C, ...)
        return x + self.gamma * y

    def _tokens(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 3 or x.shape[1] != self.theta.in_features:
            raise ValueError(
                f"x must have shape (B, C={self.theta.in_features}, "
                f"*positions), got {tuple(x.shape)}"
            )
        return x.flatten(2).transpose(1, 2)                       # (B, N, C)
