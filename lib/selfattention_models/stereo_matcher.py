"""Trained stereo matchers on the Motorcycle pair (:ref:`ch-matching`): a
convolutional :class:`Encoder` and a :class:`Matcher` that alternates row
self-attention and cross-attention within the epipolar band.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from selfattention.stereo import MAX_DISP

from . import trained
from .motorcycle import half_resolution_pair

__all__ = ["Encoder", "Matcher", "match_rows", "band_scores", "load_encoder",
           "load_matcher", "predict", "predict_held_out"]


class Encoder(nn.Module):
    """Three 3 × 3 convolutions: (B, 3, H, W) -> unit-length features
    (B, H, W, width). Its receptive field is 7 × 7 pixels."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1))
        self.log_scale = nn.Parameter(torch.tensor(float(np.log(10.0))))

    def forward(self, img):
        """(B, 3, H, W) images -> (B, H, W, width) unit-length features."""
        return F.normalize(self.net(img).permute(0, 2, 3, 1), dim=-1)


def band_scores(f_left, f_right, max_disp: int = MAX_DISP):
    """``disparity_volume`` in PyTorch: (..., W, D) features of the two rows
    -> (..., W, max_disp + 1) dot products, ``-inf`` off the image."""
    W = f_left.shape[-2]
    columns = []
    for d in range(max_disp + 1):
        s = (f_left[..., d:, :] * f_right[..., :W - d, :]).sum(-1)
        pad = s.new_full(s.shape[:-1] + (d,), float("-inf"))
        columns.append(torch.cat([pad, s], dim=-1))
    return torch.stack(columns, dim=-1)                 # (..., W, D + 1)


class _Layer(nn.Module):
    """Pre-norm attention and MLP, queries from ``x``, keys and values from
    ``y``. Where a query may look is a boolean mask; how far the key lies
    enters as a learned bias per offset, added to the scores (as Swin's
    relative position bias, :ref:`ch-windows`), so the layer knows relative
    but no absolute column. The two residual branches start at zero (their
    last weights are zero): a new layer passes its input through unchanged."""

    def __init__(self, width: int, heads: int, offsets: int):
        super().__init__()
        self.norm_q, self.norm_k = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.bias = nn.Parameter(torch.zeros(offsets))
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(),
                                 nn.Linear(2 * width, width))
        for last in (self.attn.out_proj, self.mlp[2]):
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def forward(self, x, y, allowed, offset):
        q, k = self.norm_q(x), self.norm_k(y)
        # a float mask is added to the scores: the bias where allowed,
        # -inf where not
        scores_bias = torch.where(allowed, self.bias[offset],
                                  float("-inf")).to(x.dtype)
        out, weights = self.attn(q, k, k, attn_mask=scores_bias,
                                 need_weights=True,
                                 average_attn_weights=True)
        x = x + out
        return x + self.mlp(self.norm_mlp(x)), weights


class Matcher(nn.Module):
    """Encoder, then ``pairs`` rounds of self-attention along each row
    (within ``radius`` columns) and cross-attention between the rows of the
    two images (within the epipolar band), then the band of scores."""

    def __init__(self, width: int = 32, heads: int = 2, pairs: int = 1,
                 max_disp: int = MAX_DISP, radius: int = 32):
        super().__init__()
        self.max_disp, self.radius = max_disp, radius
        self.encoder = Encoder(width)
        self.self_layers = nn.ModuleList(_Layer(width, heads, 2 * radius + 1)
                                         for _ in range(pairs))
        self.cross_layers = nn.ModuleList(_Layer(width, heads, max_disp + 1)
                                          for _ in range(pairs))
        self.out = nn.Linear(width, width)
        nn.init.eye_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, left, right):
        """Scores (B, H, W, max_disp + 1) and the last left-to-right
        cross-attention weights (B·H, W, W), as the class says."""
        B, _, H, W = left.shape
        fl = self.encoder(left).reshape(B * H, W, -1)     # (B·H, W, D)
        fr = self.encoder(right).reshape(B * H, W, -1)
        fl, fr, weights = match_rows(fl, fr, self.self_layers,
                                     self.cross_layers, self.radius,
                                     self.max_disp)
        fl = F.normalize(self.out(fl), dim=-1)
        fr = F.normalize(self.out(fr), dim=-1)
        scores = band_scores(fl, fr, self.max_disp)       # (B·H, W, D + 1)
        return scores.reshape(B, H, W, -1), weights


def match_rows(fl, fr, self_layers, cross_layers, radius, max_disp):
    """Self-attention within each row, then cross-attention between rows."""
    x = torch.arange(fl.shape[1])
    gap = x[:, None] - x[None, :]                         # (W, W): x - x'
    near = gap.abs() <= radius                            # local window
    band = (gap >= 0) & (gap <= max_disp)                 # epipolar mask
    near_at = (gap + radius).clamp(0, 2 * radius)         # bias indices
    band_at = gap.clamp(0, max_disp)                      # = disparity
    for self_layer, cross in zip(self_layers, cross_layers):
        fl, _ = self_layer(fl, fl, near, near_at)         # within left
        fr, _ = self_layer(fr, fr, near, near_at)         # within right
        fl, weights = cross(fl, fr, band, band_at)        # left asks right
        fr, _ = cross(fr, fl, band.T, band_at.T)          # right asks left
    return fl, fr, weights


def _restore(model, arrays, dtype):
    state = {k: torch.as_tensor(arrays[k], dtype=dtype)
             for k in model.state_dict()}
    model.load_state_dict(state)
    return model.eval()


def load_encoder() -> Encoder:
    """The trained :class:`Encoder` (float64), from ``make train``."""
    return _restore(Encoder(), trained.load("stereo-encoder"), torch.float64)


def load_matcher() -> Matcher:
    """The trained :class:`Matcher` (float32), from ``make train``."""
    return _restore(Matcher(), trained.load("stereo-matcher"), torch.float32)


@torch.no_grad()
def predict(model, rows=None):
    """Run a trained model on the pair; keep the rows ``rows`` (a slice,
    default all). Returns ``scores`` (rows, W, MAX_DISP + 1) as float64
    NumPy, with ``-inf`` off the image, the learned ``temperature``, and for
    a :class:`Matcher` the last cross-attention ``weights`` (rows, W, W)."""
    pair = half_resolution_pair()
    rows = slice(None) if rows is None else rows
    dtype = next(model.parameters()).dtype
    as_batch = lambda a: torch.as_tensor(                       # noqa: E731
        np.ascontiguousarray(a.transpose(2, 0, 1))[None], dtype=dtype)
    left, right = as_batch(pair.left), as_batch(pair.right)
    # Rows are independent after the encoder, whose 7 × 7 field needs three
    # rows of context on either side.
    start, stop, _ = rows.indices(left.shape[2])
    lo, hi = max(start - 3, 0), min(stop + 3, left.shape[2])
    left, right = left[..., lo:hi, :], right[..., lo:hi, :]
    keep = slice(start - lo, stop - lo)
    out = {}
    if isinstance(model, Encoder):
        scores = band_scores(model(left), model(right))[0, keep]
        scale = model.log_scale
    else:
        scores, weights = model(left, right)
        scores = scores[0, keep]
        W = left.shape[3]
        out["weights"] = weights.reshape(hi - lo, W, W)[keep].double() \
            .numpy()
        scale = model.encoder.log_scale
    out["scores"] = scores.double().numpy()
    out["temperature"] = float(torch.exp(-scale))
    return out


def predict_held_out(model):
    """:func:`predict` on each held-out block of rows, joined along the
    rows: ``scores`` (50, W, MAX_DISP + 1), ``temperature``, and for a
    :class:`Matcher` ``weights`` (50, W, W)."""
    parts = [predict(model, block)
             for block in half_resolution_pair().blocks]
    out = {key: np.concatenate([p[key] for p in parts])
           for key in parts[0] if key != "temperature"}
    out["temperature"] = parts[0]["temperature"]
    return out
