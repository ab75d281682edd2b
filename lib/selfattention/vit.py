"""A tiny vision transformer for scikit-learn's digits (chapters 5 and 10).

Each 8 × 8 digit is cut into 2 × 2-pixel patches, 16 tokens of 4 pixels. A
linear layer embeds every patch, optional learned position embeddings are
added, a class token is prepended, and one or more pre-norm transformer
blocks follow; the class token's final state is classified. The model is
small enough to train on a CPU in about a second, which lets chapter 5
compare it with and without position embeddings, on test images whose
patches are in place or shuffled, and chapter 10 compare its attention
weights with a gradient-based importance.

Everything is float64 and :func:`train` is deterministic: it seeds its own
generator, fixes the number of threads and restores PyTorch's global state
afterwards, so two calls with the same arguments return identical weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ._legacy import as_float_array, generator, positive_int
from .patches import patchify

__all__ = ["DigitSplit", "digit_split", "TinyViT", "train", "logits",
           "predict", "accuracy", "shuffle_patches", "attention_maps",
           "cls_attention", "cls_values", "logits_with_cls_weights",
           "gradient_importance", "rank_correlation"]


@dataclass(frozen=True)
class DigitSplit:
    """scikit-learn's digits as patch tokens, split into train and test.

    * ``X_train``, ``X_test``: patch tokens, shape (N, 16, 4), 2 × 2 pixels
      per token, brightness scaled to [0, 1];
    * ``y_train``, ``y_test``: digit labels 0–9, shape (N,);
    * ``images_test``: the test images, shape (N_test, 8, 8), brightness in
      [0, 1], for figures;
    * ``grid``: the patch grid, (4, 4); ``patch``: patch side in pixels, 2.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    images_test: np.ndarray
    grid: tuple = (4, 4)
    patch: int = 2


def digit_split(test_fraction: float = 0.25, seed: int = 0) -> DigitSplit:
    """Load the 1,797 digits, patchify them and split them reproducibly.

    The split is stratified by label and drawn from
    ``np.random.default_rng(seed)``, so it is the same on every machine.

    Parameters
    ----------
    test_fraction : float
        Share of each digit's images held out for testing, in (0, 1).
    seed : int
        Seed of the split.

    Returns
    -------
    DigitSplit
    """
    from sklearn.datasets import load_digits

    if not (isinstance(test_fraction, float) and 0 < test_fraction < 1):
        raise ValueError(
            f"test_fraction must be a float in (0, 1), got {test_fraction!r}"
        )
    digits = load_digits()
    images, labels = digits.images / 16.0, digits.target
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for digit in range(10):
        idx = rng.permutation(np.flatnonzero(labels == digit))
        test[idx[:round(test_fraction * len(idx))]] = True
    X = patchify(images, 2)                              # (N, 16, 4)
    return DigitSplit(X_train=X[~test], y_train=labels[~test],
                      X_test=X[test], y_test=labels[test],
                      images_test=images[test])


class _Block(nn.Module):
    """Pre-norm transformer block: multi-head self-attention, then an MLP."""

    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(),
                                 nn.Linear(hidden, dim))

    def qkv_heads(self, z):
        """Queries, keys and values of every head, each (B, h, n, d_k)."""
        B, n, d = z.shape
        qkv = self.qkv(self.norm1(z)).reshape(B, n, 3, self.heads,
                                              d // self.heads)
        return qkv.permute(2, 0, 3, 1, 4)                # (3, B, h, n, d_k)

    def forward(self, z, cls_weights=None):
        B, n, d = z.shape
        q, k, v = self.qkv_heads(z)                      # each (B, h, n, d_k)
        S = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])   # (B, h, n, n)
        A = torch.softmax(S, dim=-1)
        if cls_weights is not None:                      # (B, h, n)
            A = torch.cat([cls_weights[:, :, None, :], A[:, :, 1:]], dim=2)
        y = (A @ v).transpose(1, 2).reshape(B, n, d)     # (B, n, d)
        z = z + self.proj(y)
        return z + self.mlp(self.norm2(z)), A


class TinyViT(nn.Module):
    """A vision transformer small enough to train in a second on a CPU.

    Parameters
    ----------
    n_tokens : int
        Patches per image (16 for 2 × 2 patches of an 8 × 8 digit).
    patch_dim : int
        Pixels per patch (4).
    dim : int
        Token width ``d``.
    heads : int
        Attention heads ``h``; must divide ``dim``.
    depth : int
        Number of transformer blocks.
    hidden : int
        Width of each block's MLP.
    n_classes : int
        Number of classes.
    position : bool
        Add learned position embeddings (one trainable vector per patch
        slot, as in ViT). Without them the model is exactly invariant to
        shuffling the patches (chapter 5).
    pos_std : float
        Standard deviation of the initial position embeddings; larger
        than ViT's 0.02 so that the short training of chapter 5 can use
        them from the first steps.

    Notes
    -----
    ``forward(x)`` takes patch tokens of shape (B, n_tokens, patch_dim) and
    returns class logits (B, n_classes); ``forward(x, attention=True)``
    also returns every block's weights, a list of (B, h, 1+n, 1+n) arrays
    whose token 0 is the class token. ``cls_weights`` of shape
    (B, h, 1+n), if given, replaces the class token's attention weights in
    the last block (chapter 10 swaps in a different map this way).
    """

    def __init__(self, n_tokens: int = 16, patch_dim: int = 4, dim: int = 32,
                 heads: int = 4, depth: int = 1, hidden: int = 64,
                 n_classes: int = 10, position: bool = True,
                 pos_std: float = 0.5):
        super().__init__()
        for name, value in (("n_tokens", n_tokens), ("patch_dim", patch_dim),
                            ("dim", dim), ("heads", heads), ("depth", depth),
                            ("hidden", hidden), ("n_classes", n_classes)):
            positive_int(value, name)
        if dim % heads:
            raise ValueError(
                f"heads={heads} must divide dim={dim} (each head has width "
                f"dim/heads)"
            )
        self.n_tokens, self.patch_dim = n_tokens, patch_dim
        self.embed = nn.Linear(patch_dim, dim)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos = (nn.Parameter(pos_std * torch.randn(1, n_tokens, dim))
                    if position else None)
        self.blocks = nn.ModuleList(_Block(dim, heads, hidden)
                                    for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)

    @property
    def position(self) -> bool:
        """Whether the model has learned position embeddings."""
        return self.pos is not None

    def forward(self, x, attention: bool = False, cls_weights=None):
        """Logits (B, n_classes), and the attention maps if ``attention``."""
        if x.ndim != 3 or tuple(x.shape[1:]) != (self.n_tokens,
                                                 self.patch_dim):
            raise ValueError(
                f"x must have shape (B, {self.n_tokens}, {self.patch_dim}), "
                f"got {tuple(x.shape)}"
            )
        z = self.embed(x)                                # (B, n, d)
        if self.pos is not None:
            z = z + self.pos
        z = torch.cat([self.cls.expand(len(z), -1, -1), z], 1)  # (B, 1+n, d)
        maps = []
        for i, block in enumerate(self.blocks):
            last = i == len(self.blocks) - 1
            z, A = block(z, cls_weights if last else None)
            maps.append(A)
        out = self.head(self.norm(z[:, 0]))              # (B, n_classes)
        return (out, maps) if attention else out


def train(data: DigitSplit, position: bool = True, seed: int = 0,
          epochs: int = 15, batch_size: int = 64, lr: float = 5e-3,
          threads: int = 1, **model_options) -> TinyViT:
    """Train a :class:`TinyViT` on ``data.X_train``, deterministically.

    Adam with a cosine learning-rate schedule and cross-entropy loss, in
    float64. The weights and the order of the mini-batches come from
    ``torch.manual_seed(seed)`` inside ``torch.random.fork_rng``, the
    work runs on ``threads`` threads with PyTorch's deterministic
    algorithms, and the caller's random state, thread count and
    determinism setting are restored afterwards.

    Parameters
    ----------
    data : DigitSplit
        From :func:`digit_split`.
    position : bool
        Learned position embeddings or none (chapter 5's ablation).
    seed : int
        Seed of the initial weights and the batch order.
    epochs, batch_size : int
        Passes over the training set and images per step.
    lr : float
        Peak learning rate.
    threads : int
        CPU threads used while training.
    **model_options
        Passed to :class:`TinyViT` (``dim``, ``heads``, ``depth`` ...).

    Returns
    -------
    TinyViT
        In evaluation mode, float64. Its attribute ``losses`` holds the mean
        training loss of every epoch.
    """
    if not isinstance(data, DigitSplit):
        raise TypeError(
            f"data must be a DigitSplit from digit_split(), got "
            f"{type(data).__name__}"
        )
    epochs = positive_int(epochs, "epochs")
    batch_size = positive_int(batch_size, "batch_size")
    threads = positive_int(threads, "threads")
    X = torch.from_numpy(np.ascontiguousarray(data.X_train, dtype=np.float64))
    y = torch.from_numpy(np.asarray(data.y_train, dtype=np.int64))
    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    old_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = TinyViT(n_tokens=X.shape[1], patch_dim=X.shape[2],
                            position=position, **model_options).double()
            steps = epochs * math.ceil(len(X) / batch_size)
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
            losses = []
            model.train()
            for _ in range(epochs):
                order = torch.randperm(len(X))
                total = 0.0
                for start in range(0, len(X), batch_size):
                    idx = order[start:start + batch_size]
                    loss = nn.functional.cross_entropy(model(X[idx]), y[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    sched.step()
                    total += loss.item() * len(idx)
                losses.append(total / len(X))
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det, warn_only=old_warn)
    model.eval()
    model.losses = losses
    return model


def _tokens(model: TinyViT, X) -> torch.Tensor:
    X = as_float_array(X, "X", min_ndim=3)
    if X.ndim != 3 or X.shape[1:] != (model.n_tokens, model.patch_dim):
        raise ValueError(
            f"X must have shape (N, {model.n_tokens}, {model.patch_dim}), "
            f"got {X.shape}"
        )
    return torch.from_numpy(np.ascontiguousarray(X, dtype=np.float64))


def logits(model: TinyViT, X) -> np.ndarray:
    """Class logits (N, n_classes) of patch tokens ``X`` (N, n, p²)."""
    with torch.no_grad():
        return model(_tokens(model, X)).numpy()


def predict(model: TinyViT, X) -> np.ndarray:
    """Predicted labels (N,) of patch tokens ``X`` (N, n, p²)."""
    return logits(model, X).argmax(axis=1)


def accuracy(model: TinyViT, X, y) -> float:
    """Share of the images ``X`` (N, n, p²) classified as ``y`` (N,)."""
    return float(np.mean(predict(model, X) == np.asarray(y)))


def shuffle_patches(X, rng: np.random.Generator):
    """Shuffle the patches of each image with its own random permutation.

    Parameters
    ----------
    X : array_like, shape (N, n, p²)
        Patch tokens of ``N`` images.
    rng : numpy.random.Generator
        Source of the permutations.

    Returns
    -------
    X_shuffled : ndarray, shape (N, n, p²)
        ``X_shuffled[i] = X[i, perms[i]]``.
    perms : ndarray of int, shape (N, n)
        The permutation applied to each image.
    """
    generator(rng)
    X = as_float_array(X, "X", min_ndim=3)
    perms = np.stack([rng.permutation(X.shape[1]) for _ in range(len(X))])
    return np.take_along_axis(X, perms[:, :, None], axis=1), perms


def attention_maps(model: TinyViT, X) -> np.ndarray:
    """Every block's attention weights for the images ``X``.

    Returns
    -------
    A : ndarray, shape (depth, N, h, 1+n, 1+n)
        Token 0 is the class token, token ``1 + j`` is patch ``j``.
    """
    with torch.no_grad():
        _, maps = model(_tokens(model, X), attention=True)
    return torch.stack(maps).numpy()


def cls_attention(model: TinyViT, X, layer: int = -1) -> np.ndarray:
    """How much the class token attends to each patch, averaged over heads.

    This is the map usually drawn over a ViT's input as "what the model
    looks at" (chapter 10 puts it to the test).

    Returns
    -------
    a : ndarray, shape (N, n)
        Row ``i``: block ``layer``'s class-token weights on the patches of
        image ``i``, head-averaged (the rest of the row's mass is on the
        class token itself).
    """
    A = attention_maps(model, X)[layer]                  # (N, h, 1+n, 1+n)
    return A[:, :, 0, 1:].mean(axis=1)                   # (N, n)


def cls_values(model: TinyViT, X) -> np.ndarray:
    """The values that the class token averages in the last block.

    Returns
    -------
    V : ndarray, shape (N, h, 1+n, d_k)
        Head ``k``'s output for the class token is ``a @ V[:, k]``, with
        ``a`` its attention weights (token 0 is the class token).
    """
    x = _tokens(model, X)
    with torch.no_grad():
        z = model.embed(x)                               # (N, n, d)
        if model.pos is not None:
            z = z + model.pos
        z = torch.cat([model.cls.expand(len(z), -1, -1), z], 1)
        for block in model.blocks[:-1]:
            z, _ = block(z)
        _, _, v = model.blocks[-1].qkv_heads(z)          # (N, h, 1+n, d_k)
    return v.numpy()


def logits_with_cls_weights(model: TinyViT, X, weights) -> np.ndarray:
    """Logits when the class token's last-block attention is replaced.

    Parameters
    ----------
    X : array_like, shape (N, n, p²)
        Patch tokens.
    weights : array_like, shape (N, h, 1+n)
        The class token's weights over itself and the patches, per head,
        used in place of the ones the softmax computes.

    Returns
    -------
    logits : ndarray, shape (N, n_classes)
    """
    x = _tokens(model, X)
    w = as_float_array(weights, "weights", min_ndim=3)
    heads = model.blocks[-1].heads
    if w.shape != (len(x), heads, model.n_tokens + 1):
        raise ValueError(
            f"weights must have shape (N, h, 1+n) = "
            f"{(len(x), heads, model.n_tokens + 1)}, got {w.shape}"
        )
    with torch.no_grad():
        return model(x, cls_weights=torch.from_numpy(w)).numpy()


def gradient_importance(model: TinyViT, X, target=None) -> np.ndarray:
    """Gradient-based importance of each patch (a saliency map).

    The gradient of the target class's logit with respect to the input
    pixels, as in Simonyan et al. (2014), summarised per patch by its
    Euclidean norm over the patch's pixels.

    Parameters
    ----------
    X : array_like, shape (N, n, p²)
        Patch tokens.
    target : array_like of int, shape (N,), optional
        Class whose logit is differentiated; the predicted class by default.

    Returns
    -------
    g : ndarray, shape (N, n)
        Non-negative importance of each patch of each image.
    """
    x = _tokens(model, X).clone().requires_grad_(True)
    out = model(x)                                       # (N, n_classes)
    if target is None:
        target = out.argmax(dim=1)
    else:
        target = torch.as_tensor(np.asarray(target), dtype=torch.int64)
        if target.shape != (len(x),):
            raise ValueError(
                f"target must hold one class per image, shape ({len(x)},), "
                f"got {tuple(target.shape)}"
            )
    out.gather(1, target[:, None]).sum().backward()
    return x.grad.norm(dim=-1).detach().numpy()           # (N, n)


def rank_correlation(a, b) -> np.ndarray:
    """Spearman's rank correlation of ``a`` and ``b`` along the last axis.

    Parameters
    ----------
    a, b : array_like, shape (..., n)
        Two scores of the same ``n`` items, e.g. attention and gradient
        importance of the patches of each image.

    Returns
    -------
    rho : ndarray, shape (...)
        In [-1, 1]: 1 if both order the items alike, -1 if opposite. Ties
        share their mean rank; a row with all items tied gives NaN.
    """
    a = as_float_array(a, "a")
    b = as_float_array(b, "b")
    if a.shape != b.shape:
        raise ValueError(
            f"a and b must have the same shape, got {a.shape} and {b.shape}"
        )
    if a.shape[-1] < 2:
        raise ValueError(f"need at least 2 items per row, got {a.shape[-1]}")
    from scipy.stats import rankdata     # scipy comes with scikit-learn

    ra = rankdata(a, axis=-1)                            # (..., n)
    rb = rankdata(b, axis=-1)
    ra -= ra.mean(axis=-1, keepdims=True)
    rb -= rb.mean(axis=-1, keepdims=True)
    den = np.sqrt((ra ** 2).sum(-1) * (rb ** 2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ra * rb).sum(-1) / den
