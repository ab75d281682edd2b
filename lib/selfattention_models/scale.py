"""The scale of the scores in training (:ref:`ch-scaling`): one small attention
model on MNIST whose runs differ only in what divides ``Q Kᵀ`` (``√d_k``, 1 or
``d_k``); ``make train`` writes the curves the chapter loads.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from selfattention._validate import boundary, floats

__all__ = ["D_K", "ScaleAttention", "ScaleModel", "entropy"]

D_K = 256                        # key width of every run
WIDTH = 32                       # token width d
PATCH = 7                        # 28 × 28 pixels -> 4 × 4 patches of 7 × 7
GRID = (4, 4)


class ScaleAttention(nn.Module):
    """One attention head whose scores are divided by ``divide``."""

    def __init__(self, d: int, d_k: int, divide: float):
        super().__init__()
        self.W_Q = nn.Parameter(torch.randn(d, d_k) / math.sqrt(d))
        self.W_K = nn.Parameter(torch.randn(d, d_k) / math.sqrt(d))
        self.W_V = nn.Parameter(torch.randn(d, d) / math.sqrt(d))
        self.W_O = nn.Parameter(torch.randn(d, d) / math.sqrt(d))
        self.divide = divide

    def forward(self, x):
        """Output (B, n, d) and weights (B, n, n) for tokens x (B, n, d)."""
        Q, K, V = x @ self.W_Q, x @ self.W_K, x @ self.W_V  # (B, n, d_k|d)
        S = Q @ K.transpose(1, 2) / self.divide            # (B, n, n)
        self.last_scores = S.detach()                      # kept to measure
        A = torch.softmax(S, dim=-1)                       # rows sum to 1
        return A @ V @ self.W_O, A                         # (B, n, d), A


class ScaleModel(nn.Module):
    """Two pre-LN blocks of one :class:`ScaleAttention` head and an MLP over
    16 patch tokens and a class token; logits from the class token."""

    def __init__(self, divide: float, d: int = WIDTH, d_k: int = D_K,
                 n: int = GRID[0] * GRID[1], p: int = PATCH * PATCH):
        super().__init__()
        self.embed = nn.Linear(p, d)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, n + 1, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(5))
        self.heads = nn.ModuleList(ScaleAttention(d, d_k, divide)
                                   for _ in range(2))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(),
                          nn.Linear(2 * d, d)) for _ in range(2))
        self.out = nn.Linear(d, 10)

    def forward(self, X):
        """Logits (B, 10) and both heads' weights (B, 2, 1+n, 1+n) for
        patch tokens X (B, n, p)."""
        x = self.embed(X)                                  # (B, n, d)
        x = torch.cat([self.cls.expand(len(X), -1, -1), x], 1) + self.pos
        maps = []
        for i, (head, mlp) in enumerate(zip(self.heads, self.mlps)):
            y, A = head(self.norms[2 * i](x))
            x = x + y                                      # (B, n + 1, d)
            x = x + mlp(self.norms[2 * i + 1](x))
            maps.append(A)
        return self.out(self.norms[4](x[:, 0])), torch.stack(maps, 1)


@boundary(A=floats(min_ndim=1))
def entropy(A):
    """Entropy in nats of each attention row, ``-Σ_j a_j log a_j`` over the
    last axis; weights that underflow to 0 add 0 (:ref:`ch-scaling`)."""
    terms = -A * np.log(np.where(A > 0, A, 1.0))           # 0 where a_j = 0
    return terms.sum(axis=-1)                              # (...)
