"""Object queries in the manner of DETR (Carion et al. 2020) over a ViT's patch
tokens, with bipartite matching (:ref:`ch-photographs`); boxes are (top, left,
bottom, right), bottom and right excluded.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ._validate import (agree, boundary, floats, ints, number, positive_int,
                        require)

__all__ = ["CrossAttention", "DecoderLayer", "box_iou",
           "generalized_box_iou", "matching_cost", "match_queries",
           "detections", "precision_recall", "box_shares", "encoder_tokens"]

NO_OBJECT = 10                   # the class after the ten digits
COST_WEIGHTS = (1.0, 5.0, 2.0)   # class, L1, GIoU: Carion et al. 2020


class CrossAttention(nn.Module):
    """Multi-head attention of ``queries`` (B, N, d) to ``keys`` and
    ``values`` (B, n, d): returns (B, N, d) and the weights (B, h, N, n)."""

    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.q, self.k, self.v = (nn.Linear(d, d) for _ in range(3))
        self.out = nn.Linear(d, d)

    def forward(self, queries, keys, values):
        B, N, d = queries.shape
        n, d_k = keys.shape[1], d // self.h

        def heads(x, m):                         # (B, m, d) -> (B, h, m, d_k)
            return x.view(B, m, self.h, d_k).transpose(1, 2)
        q = heads(self.q(queries), N)
        k, v = heads(self.k(keys), n), heads(self.v(values), n)
        A = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)
        y = (A @ v).transpose(1, 2).reshape(B, N, d)   # heads joined
        return self.out(y), A                    # A: (B, h, N, n)


class DecoderLayer(nn.Module):
    """Pre-LN: the queries attend to each other, then to the image's
    tokens (their keys with a learned position added), then an MLP."""

    def __init__(self, d, h, d_mlp):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(d) for _ in range(3))
        self.self_attn = CrossAttention(d, h)
        self.cross_attn = CrossAttention(d, h)
        self.mlp = nn.Sequential(nn.Linear(d, d_mlp), nn.GELU(),
                                 nn.Linear(d_mlp, d))

    def forward(self, z, memory, key_pos):
        x = self.ln1(z)
        z = z + self.self_attn(x, x, x)[0]       # queries share out digits
        y, A = self.cross_attn(self.ln2(z), memory + key_pos, memory)
        z = z + y                                # each query reads the image
        return z + self.mlp(self.ln3(z)), A


# ------------------------------------------------------------------ boxes
def _iou_terms(a, b):
    """IoU and generalised IoU of boxes ``a`` and ``b`` (..., 4), which
    broadcast; NumPy arrays or tensors."""
    lib = torch if isinstance(a, torch.Tensor) else np

    def area(t, l, b_, r):
        return lib.clip(b_ - t, 0, None) * lib.clip(r - l, 0, None)
    at, al, ab, ar = (a[..., i] for i in range(4))
    bt, bl, bb, br = (b[..., i] for i in range(4))
    inter = area(lib.maximum(at, bt), lib.maximum(al, bl),
                 lib.minimum(ab, bb), lib.minimum(ar, br))
    union = area(at, al, ab, ar) + area(bt, bl, bb, br) - inter
    hull = area(lib.minimum(at, bt), lib.minimum(al, bl),
                lib.maximum(ab, bb), lib.maximum(ar, br))
    iou = inter / union
    return iou, iou - (hull - union) / hull


def _boxes(**boxes) -> None:
    """Each array of boxes, by argument name, holds (top, left, bottom,
    right) on its last axis."""
    for name, b in boxes.items():
        require(b.shape[-1] == 4, f"{name} must hold 4 numbers per box "
                f"(top, left, bottom, right), got shape {b.shape}")


@boundary(a=floats(ndim=2), b=floats(ndim=2),
          checks=(lambda a, b: _boxes(a=a, b=b),))
def box_iou(a, b):
    """(N, M): intersection over union of every box of ``a`` (N, 4) with
    every box of ``b`` (M, 4); boxes of no area are not allowed."""
    return _iou_terms(a[:, None], b[None])[0]


@boundary(a=floats(ndim=2), b=floats(ndim=2),
          checks=(lambda a, b: _boxes(a=a, b=b),))
def generalized_box_iou(a, b):
    """(N, M): IoU minus the share of the smallest box holding both that
    neither covers (Rezatofighi et al. 2019), in (-1, 1]; unlike IoU it
    still says how far apart two boxes that do not meet are."""
    return _iou_terms(a[:, None], b[None])[1]


# --------------------------------------------------------------- matching
def _scene_fits(name, per_box, boxes, labels, true_boxes) -> None:
    """``per_box`` (argument ``name``) and ``boxes`` have one row per
    predicted box, ``labels`` and ``true_boxes`` one per object."""
    _boxes(boxes=boxes, true_boxes=true_boxes)
    agree(name, per_box, 0, "boxes", boxes, 0, "have one row per box")
    agree("labels", labels, 0, "true_boxes", true_boxes, 0,
          "have one row per box")


@boundary(probs=floats(ndim=2), boxes=floats(ndim=2), labels=ints(ndim=1),
          true_boxes=floats(ndim=2),
          checks=(lambda probs, boxes, labels, true_boxes: _scene_fits(
              "probs", probs, boxes, labels, true_boxes),))
def matching_cost(probs, boxes, labels, true_boxes):
    """(N, k): the cost of letting query ``i`` answer for object ``j``:
    minus its probability of ``labels[j]``, plus 5 times the L1 distance of
    its box to ``true_boxes[j]``, minus 2 times their generalised IoU."""
    w_class, w_l1, w_giou = COST_WEIGHTS
    l1 = np.abs(boxes[:, None] - true_boxes[None]).sum(-1)
    giou = _iou_terms(boxes[:, None], true_boxes[None])[1]
    return -w_class * probs[:, labels] + w_l1 * l1 - w_giou * giou


@boundary(cost=floats(ndim=2))
def match_queries(cost):
    """The pairs (query, object) of least total ``cost`` (N, k), N >= k,
    each object answered by one query: two int arrays ``(queries,
    objects)``, ``objects`` in order (``linear_sum_assignment``)."""
    from scipy.optimize import linear_sum_assignment
    if cost.shape[0] < cost.shape[1]:
        raise ValueError(f"cost must have at least as many queries as "
                         f"objects, got shape {cost.shape}")
    rows, cols = linear_sum_assignment(cost)
    order = cols.argsort()                       # by object, not by query
    return rows[order].astype(np.int64), cols[order].astype(np.int64)


@boundary(logits=floats(ndim=3))
def detections(logits):
    """(B, N) int: the class each query reports, ``NO_OBJECT`` (10) when
    it reports none; ``logits`` (B, N, 11)."""
    return logits.argmax(-1)


@boundary(classes=ints(ndim=1), boxes=floats(ndim=2), labels=ints(ndim=1),
          true_boxes=floats(ndim=2), threshold=number(0, 1, strict=True),
          checks=(lambda classes, boxes, labels, true_boxes: _scene_fits(
              "classes", classes, boxes, labels, true_boxes),))
def precision_recall(classes, boxes, labels, true_boxes, threshold=0.5):
    """One scene's counts ``(true_positives, reported, objects)``."""
    from scipy.optimize import linear_sum_assignment
    shown = classes != NO_OBJECT
    if not shown.any() or not len(labels):
        return 0, int(shown.sum()), len(labels)
    iou = _iou_terms(boxes[shown][:, None], true_boxes[None])[0]
    iou = np.where(classes[shown][:, None] == labels[None], iou, 0.0)
    rows, cols = linear_sum_assignment(-iou)
    return int((iou[rows, cols] >= threshold).sum()), int(shown.sum()), \
        len(labels)


@boundary(boxes=ints(ndim=2), size=positive_int(), patch=positive_int(),
          checks=(lambda boxes: _boxes(boxes=boxes),))
def box_shares(boxes, size, patch):
    """(k, n): each patch's share of the pixels of each box (k, 4) in
    pixels, on a ``size`` × ``size`` image of ``patch``-pixel patches in
    row-major order; a uniform map puts ``shares.mean(1)`` in the box."""
    from .object_attention import patch_shares
    masks = np.zeros((len(boxes), size, size))
    for mask, (t, l, b, r) in zip(masks, boxes):
        mask[t:b, l:r] = 1.0
    return patch_shares(masks, patch)


def encoder_tokens(vit, x):
    """The patch tokens (B, n, d) that a :class:`~selfattention.vit.TinyViT`
    ``vit`` makes of ``x`` (B, n, d_in): its blocks' output after the last
    norm, without the class token."""
    z = torch.cat([vit.cls.expand(len(x), -1, -1), vit.embed(x)], 1)
    z = z + vit.pos
    for block in vit.blocks:
        z = block(z)[0]
    return vit.ln(z)[:, 1:]
