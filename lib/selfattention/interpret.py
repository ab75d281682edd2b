"""Reading a trained tiny ViT (:ref:`ch-transformer`, :ref:`ch-misconceptions`):
``maps`` is the stack of :func:`selfattention.vit.forward`, (N, L, h, 1+n, 1+n),
token 0 the class token, token ``1 + j`` patch ``j`` of the row-major grid.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from . import vit
from ._validate import (boundary, floats, grid_shape, integer, ints,
                        number, one_per_image, optional, positive_int,
                        require, same_shape, sequence)
from .vit import _MODEL, _tensor, accuracy, tokens_fit

__all__ = ["patch_distances", "mean_attention_distance", "cls_attention",
           "rollout", "head_ablation", "pair_ablation", "logit_gradient",
           "occlusion", "remove_patches", "removal_curve",
           "rank_correlation"]


_MAPS = floats(ndim=5)


def _maps_fit(maps, grid=None) -> None:
    """As many keys as queries, and with a ``grid``, ``n = H·W``."""
    m, n = maps.shape, None if grid is None else grid[0] * grid[1]
    require(m[-1] == m[-2] and n in (None, m[-1] - 1),
            f"maps must have shape (N, L, h, 1+n, 1+n), as many keys as "
            f"queries (n = {n} patches of the grid {grid}), got {m}")


def _labels_fit(model, X, y) -> None:
    tokens_fit(model, X)
    one_per_image(X, y=y)


# ------------------------------------------------------------------ where
@boundary(grid=grid_shape(), patch=positive_int())
def patch_distances(grid, patch):
    """Distances in pixels between patch centres, shape (n, n), n = H·W."""
    r, c = np.divmod(np.arange(grid[0] * grid[1]), grid[1])
    return patch * np.hypot(r[:, None] - r, c[:, None] - c)


@boundary(maps=_MAPS, grid=grid_shape(), patch=positive_int(),
          checks=(_maps_fit,))
def mean_attention_distance(maps, grid, patch):
    """Attention-weighted distance from query to key patches, (L, h)."""
    P = maps[:, :, :, 1:, 1:]                            # (N, L, h, n, n)
    D = patch_distances(grid, patch)                     # (n, n) pixels
    per_query = np.einsum("...qk,qk->...q", P, D) / P.sum(-1)  # (N, L, h, n)
    return per_query.mean(axis=(0, 3))


@boundary(maps=_MAPS, layer=integer(), checks=(_maps_fit,))
def cls_attention(maps, layer=-1):
    """The class token's weights on the patches, head-averaged, (N, n)."""
    return maps[:, layer, :, 0, 1:].mean(axis=1)


@boundary(maps=_MAPS, residual=number(0, 1), checks=(_maps_fit,))
def rollout(maps, residual=0.5):
    """Attention rollout (Abnar and Zuidema, 2020), (N, 1+n, 1+n)."""
    N, L, h, m, _ = maps.shape
    R = np.broadcast_to(np.eye(m), (N, m, m))
    for layer in range(L):
        A = (1 - residual) * maps[:, layer].mean(axis=1) + residual * np.eye(m)
        R = (A / A.sum(-1, keepdims=True)) @ R          # (N, m, m)
    return R


# ------------------------------------------------------------------ what
@boundary(model=_MODEL, X=floats(ndim=3), y=ints(ndim=1),
          checks=(_labels_fit,))
def head_ablation(model, X, y):
    """Accuracy with each head removed before ``W_O``, shape (L, h)."""
    L, h = len(model.blocks), model.blocks[0].h
    out = np.empty((L, h))
    for layer, head in np.ndindex(L, h):
        keep = np.ones((L, h))
        keep[layer, head] = 0.0
        out[layer, head] = accuracy(model, X, y, keep)
    return out


@boundary(model=_MODEL, X=floats(ndim=3), y=ints(ndim=1),
          checks=(_labels_fit,))
def pair_ablation(model, X, y):
    """Accuracy with two heads of one layer removed, shape (L, h(h-1)/2)."""
    L, h = len(model.blocks), model.blocks[0].h
    pairs = list(itertools.combinations(range(h), 2))
    out = np.empty((L, len(pairs)))
    for layer, (p, (a, b)) in itertools.product(range(L), enumerate(pairs)):
        keep = np.ones((L, h))
        keep[layer, [a, b]] = 0.0                    # both heads out
        out[layer, p] = vit.accuracy(model, X, y, keep)
    return out


@boundary(model=_MODEL, X=floats(ndim=3), target=optional(ints(ndim=1)),
          checks=(tokens_fit,
                  lambda X, target: one_per_image(X, target=target)))
def logit_gradient(model, X, target=None):
    """Gradient of each image's ``target`` logit (default: the predicted
    class) with respect to its tokens, shape (N, n, d_in)."""
    x = _tensor(X).requires_grad_(True)
    logits, _ = model(x)
    t = logits.argmax(1) if target is None else torch.from_numpy(target)
    logits.gather(1, t[:, None]).sum().backward()
    return x.grad.numpy()


@boundary(model=_MODEL, X=floats(ndim=3), value=floats(ndim=0),
          checks=(tokens_fit,))
def occlusion(model, X, value=0.0):
    """Each patch set to ``value`` in turn: logit drops, new labels."""
    logits = vit.forward(model, X)[0]                    # (N, classes)
    pred = logits.argmax(axis=1)                         # (N,)
    drop = np.zeros(X.shape[:2])                         # (N, n)
    label = np.repeat(pred[:, None], X.shape[1], axis=1)     # (N, n)
    i, j = np.nonzero((X != value).any(axis=-1))         # patches to set
    for part in np.array_split(np.arange(len(i)), max(1, len(i) // 500)):
        ii, jj, rows = i[part], j[part], np.arange(len(part))
        X_one = X[ii].copy()                             # (B, n, d_in)
        X_one[rows, jj] = value                          # one patch each
        out = vit.forward(model, X_one)[0]               # (B, classes)
        drop[ii, jj] = logits[ii, pred[ii]] - out[rows, pred[ii]]
        label[ii, jj] = out.argmax(axis=1)
    return drop, label


@boundary(X=floats(ndim=3), scores=floats(ndim=2), k=integer(0),
          value=floats(ndim=0),
          checks=(lambda X, scores: one_per_image(X, scores=scores),))
def remove_patches(X, scores, k, value=0.0):
    """``X`` with each image's ``k`` top-scoring patches set to ``value``."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    X = X.copy()
    X[np.arange(len(X))[:, None], order] = value
    return X


@boundary(model=_MODEL, X=floats(ndim=3), y=ints(ndim=1),
          scores=floats(ndim=2), ks=sequence(integer(0)),
          value=floats(ndim=0),
          checks=(_labels_fit,
                  lambda X, scores: one_per_image(X, scores=scores)))
def removal_curve(model, X, y, scores, ks, value=0.0):
    """Images still right after :func:`remove_patches`, a count per ``k``."""
    return np.array([int((vit.predict(model, remove_patches(
        X, scores, k, value)) == y).sum()) for k in ks])


@boundary(a=floats(min_ndim=1), b=floats(min_ndim=1),
          checks=(lambda a, b: same_shape(a=a, b=b),
                  lambda a: require(a.shape[-1] >= 2, f"a must hold 2 or more "
                                    f"items a row, got shape {a.shape}")))
def rank_correlation(a, b):
    """Spearman's rank correlation of ``a`` and ``b`` along the last axis."""
    from scipy.stats import rankdata   # about 2 s to import: only here
    ra, rb = rankdata(a, axis=-1), rankdata(b, axis=-1)
    ra -= ra.mean(-1, keepdims=True)
    rb -= rb.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (ra * rb).sum(-1) / np.sqrt((ra**2).sum(-1) * (rb**2).sum(-1))
    return rho[()]
