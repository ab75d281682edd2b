"""Trained stereo matchers on the Motorcycle pair (:ref:`ch-matching`).

Two models, both trained on crops of the training rows of
:func:`selfattention.stereo.half_resolution_pair` and scored on its held-out
rows:

- :class:`Encoder`, a small convolutional feature network whose features are
  compared by :func:`selfattention.stereo.disparity_volume`;
- :class:`Matcher`, the same kind of encoder followed by layers that take
  turns between self-attention along each image's row and cross-attention
  from one image's row to the other's, restricted to the epipolar band (the
  coarse stage of LoFTR, with rows for its two-dimensional grid).

Both learn by the same loss: a softmax over each left pixel's candidate
disparities, scored by cross-entropy against the true disparity split over
its two nearest whole disparities. The recipes ``stereo-encoder`` and
``stereo-matcher`` (``make train``) write their weights.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from . import trained
from .stereo import MAX_DISP, half_resolution_pair

__all__ = ["Encoder", "Matcher", "match_rows", "band_scores", "soft_targets",
           "train_model", "load_encoder", "load_matcher", "predict",
           "predict_held_out"]


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
    relative position bias, :ref:`ch-windows`), so the layer knows relative but
    no
    absolute column. The two residual branches start at zero (their last
    weights are zero): a new layer passes its input through unchanged."""

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


def local_mask(W: int, radius: int):
    """(W, W) bool, True where column ``x'`` lies within ``radius`` of
    ``x``: the window of the self-attention layers."""
    x = np.arange(W)
    return np.abs(x[:, None] - x[None, :]) <= radius


class Matcher(nn.Module):
    """Encoder, then ``pairs`` rounds of self-attention along each row
    (within ``radius`` columns) and cross-attention between the rows of the
    two images (within the epipolar band), then the band of scores.

    ``left``, ``right`` (B, 3, H, W) -> scores (B, H, W, max_disp + 1) and
    the last left-to-right cross-attention weights (B·H, W, W), averaged
    over the heads.
    """

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
    """Self-attention within each row, then cross-attention between rows.

    ``fl``, ``fr`` (rows, W, D): features of the left and right rows ->
    both updated, and the last left-to-right cross-attention weights
    (rows, W, W). Self-attention sees ``radius`` columns either side;
    left pixel ``x`` asks right pixels ``x - d``, ``0 <= d <= max_disp``,
    and right pixel ``x'`` asks left pixels ``x' + d``.
    """
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


def soft_targets(disparity, max_disp: int = MAX_DISP):
    """The true disparity (H, W), NaN unknown, as weights on the two nearest
    whole disparities -> (H, W, max_disp + 1) and a (H, W) bool of pixels
    that count (known, and whose match lies on the image)."""
    H, W = disparity.shape
    known = np.isfinite(disparity)
    d = np.where(known, disparity, 0.0)
    low = np.floor(d).astype(int)
    frac = d - low
    x = np.arange(W)[None, :]
    counts = known & (x - low - 1 >= 0) & (low + 1 <= max_disp)
    T = np.zeros((H, W, max_disp + 1))
    rows, cols = np.nonzero(counts)
    T[rows, cols, low[rows, cols]] = 1 - frac[rows, cols]
    T[rows, cols, low[rows, cols] + 1] += frac[rows, cols]
    return T, counts


def _loss(scores, targets, counts, log_scale):
    # Scale the possible candidates only: 0 · -inf in the gradient of the
    # scale would be NaN.
    possible = torch.isfinite(scores)
    z = torch.where(possible, scores.masked_fill(~possible, 0.0)
                    * log_scale.exp(), float("-inf"))
    logp = torch.log_softmax(z, dim=-1)
    logp = torch.where(targets > 0, logp, torch.zeros_like(logp))
    return -(targets * logp).sum(-1)[counts].mean()


def _crops(train_rows, rows_per_crop: int):
    """Start rows of crops lying wholly inside the training rows."""
    starts = [int(s) for s in train_rows
              if np.isin(np.arange(s, s + rows_per_crop), train_rows).all()]
    return np.array(starts)


def train_model(model, steps: int, rows_per_crop: int, lr: float,
                seed: int, dtype=torch.float64, columns_per_crop: int = 128):
    """Adam on crops of ``rows_per_crop × columns_per_crop`` pixels drawn
    from the training rows; a left pixel counts if its true match lies in
    the crop. Returns the loss after each step."""
    pair = half_resolution_pair()
    T, counts = soft_targets(pair.disparity, MAX_DISP)
    as_batch = lambda a: torch.as_tensor(                       # noqa: E731
        np.ascontiguousarray(a.transpose(2, 0, 1))[None], dtype=dtype)
    left, right = as_batch(pair.left), as_batch(pair.right)    # (1,3,H,W)
    T, counts = torch.as_tensor(T, dtype=dtype), torch.as_tensor(counts)
    rng = np.random.default_rng(seed)
    starts = _crops(pair.train_rows, rows_per_crop)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    reach = np.floor(np.nan_to_num(pair.disparity)) + 1   # (H, W)
    W = left.shape[-1]
    for _ in range(steps):
        s = int(rng.choice(starts))
        c = int(rng.integers(0, W - columns_per_crop + 1))
        rows = slice(s, s + rows_per_crop)
        cols = slice(c, c + columns_per_crop)
        inside = torch.as_tensor(np.arange(columns_per_crop)
                                 >= reach[rows, cols])
        a, b = left[..., rows, cols], right[..., rows, cols]
        if isinstance(model, Encoder):
            scores, scale = band_scores(model(a), model(b)), model.log_scale
        else:
            scores, _ = model(a, b)
            scale = model.encoder.log_scale
        loss = _loss(scores[0], T[rows, cols], counts[rows, cols] & inside,
                     scale)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def _state(model) -> dict:
    return {k: v.detach().cpu().numpy() for k, v in
            model.state_dict().items()}


def _restore(model, arrays, dtype):
    state = {k: torch.as_tensor(arrays[k], dtype=dtype)
             for k in model.state_dict()}
    model.load_state_dict(state)
    return model.eval()


# Float64 on one thread from fixed seeds repeats every operation in the
# same order, so a retrain matches the file bit for bit on one machine. On
# another CPU (different but correctly rounded vectorised kernels) the
# training is chaotic: measured on an AMD EPYC against the file, the losses
# differ by 1e-16 at step 5, 1e-12 at 100, 3e-8 at 200 and 4e-3 at 250. So
# the test suite retrains the first 100 steps and compares their losses
# (tests/unit/test_stereo.py), rather than the whole recipe.
@trained.recipe("stereo-encoder")
def train_encoder(steps: int = 300) -> dict:
    """The convolutional encoder: ``steps`` steps of 8-row crops, float64."""
    with trained.torch_threads(1):
        torch.manual_seed(0)
        model = Encoder().double()
        losses = train_model(model, steps=steps, rows_per_crop=8, lr=3e-3,
                             seed=0)
    return {**_state(model), "losses": losses}


@trained.recipe("stereo-matcher", after=("stereo-encoder",))
def train_matcher() -> dict:
    """The self-/cross-attention matcher, its encoder started from the
    trained ``stereo-encoder``: 600 steps, float32, one thread."""
    with trained.torch_threads(1):
        torch.manual_seed(1)
        model = Matcher()
        model.encoder.load_state_dict(load_encoder().float().state_dict())
        losses = train_model(model, steps=600, rows_per_crop=8, lr=1e-3,
                             seed=1, dtype=torch.float32)
    return {**_state(model), "losses": losses}


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
