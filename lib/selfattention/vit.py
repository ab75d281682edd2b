"""A tiny vision transformer for scikit-learn's digits (chapters 5 and 11).

Each 8 × 8 digit is cut into 2 × 2-pixel patches, 16 tokens of 4 pixels. A
linear layer embeds every patch, optional learned position embeddings are
added, a class token is prepended, and one or more pre-norm transformer
blocks follow; the class token's final state is classified. The model is
small enough to train on a CPU in about a second, which lets chapter 5
compare it with and without position embeddings, on test images whose
patches are in place or shuffled, and chapter 11 compare its attention
weights with a gradient-based importance.

Everything is float64 and :func:`train` is deterministic: it seeds its own
generator, fixes the number of threads and restores PyTorch's global state
afterwards, so two calls with the same arguments return identical weights.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import ConstantInputWarning, spearmanr
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from ._validate import (boundary, floats, generator, instance, integer, ints,
                        number, optional, positive, positive_int)
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


# ------------------------------------------------------------------ checks
def _a_fraction(args) -> None:
    if not args["test_fraction"] < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got "
                         f"{args['test_fraction']!r}")


def _heads_divide(args) -> None:
    if args["dim"] % args["heads"]:
        raise ValueError(f"heads={args['heads']} must divide "
                         f"dim={args['dim']} (each head has width dim/heads)")


def _fits_model(args) -> None:
    model, X = args["model"], args["X"]
    if X.shape[1:] != (model.n_tokens, model.patch_dim):
        raise ValueError(f"X must have shape (N, {model.n_tokens}, "
                         f"{model.patch_dim}), got {X.shape}")


def _one_per_image(name: str):
    def check(args) -> None:
        y, N = args[name], len(args["X"])
        if y is not None and y.shape != (N,):
            raise ValueError(f"{name} must hold one class per image, shape "
                             f"({N},), got {y.shape}")

    return check


def _cls_weights_fit(args) -> None:
    model, X, w = args["model"], args["X"], args["weights"]
    want = (len(X), model.blocks[-1].heads, model.n_tokens + 1)
    if w.shape != want:
        raise ValueError(f"weights must have shape (N, h, 1+n) = {want}, "
                         f"got {w.shape}")


def _same_items(args) -> None:
    a, b = args["a"], args["b"]
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} "
                         f"and {b.shape}")
    if a.shape[-1] < 2:
        raise ValueError(f"a and b must hold at least 2 items per row, got "
                         f"shape {a.shape}")


# ------------------------------------------------------------------ data
@boundary(test_fraction=number(0, strict=True), seed=integer(0),
          checks=(_a_fraction,))
def digit_split(test_fraction=0.25, seed=0):
    """Load the 1,797 digits, patchify them and split them reproducibly.

    scikit-learn's ``train_test_split``, stratified by label, with
    ``random_state=seed``: the same split on every machine. Both parts keep
    the order of the data set.

    ``test_fraction`` of the images, in (0, 1), is held out for testing,
    the same share of each digit up to rounding; ``seed`` (>= 0) seeds the
    split. Returns a :class:`DigitSplit`.
    """
    digits = load_digits()
    images, labels = digits.images / 16.0, digits.target  # (N, 8, 8), (N,)
    train, test = train_test_split(np.arange(len(labels)),
                                   test_size=float(test_fraction),
                                   stratify=labels, random_state=seed)
    train, test = np.sort(train), np.sort(test)
    X = patchify(images, 2)                              # (N, 16, 4)
    return DigitSplit(X_train=X[train], y_train=labels[train],
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
    n_tokens, patch_dim : int
        Patches per image and pixels per patch (16 and 4 for the digits).
    dim, heads, depth, hidden, n_classes : int
        Token width ``d``, heads ``h`` (dividing ``d``), transformer blocks,
        width of each block's MLP, classes.
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
    the last block (chapter 11 swaps in a different map this way).
    """

    @boundary(n_tokens=positive_int(), patch_dim=positive_int(),
              dim=positive_int(), heads=positive_int(), depth=positive_int(),
              hidden=positive_int(), n_classes=positive_int(),
              position=instance(bool), pos_std=number(0),
              checks=(_heads_divide,))
    def __init__(self, n_tokens=16, patch_dim=4, dim=32, heads=4, depth=1,
                 hidden=64, n_classes=10, position=True, pos_std=0.5):
        super().__init__()
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


@contextlib.contextmanager
def _deterministic(threads):
    """Deterministic PyTorch on ``threads`` threads with a forked random
    state; the caller's state, threads and determinism come back after."""
    old = (torch.get_num_threads(),
           torch.are_deterministic_algorithms_enabled(),
           torch.is_deterministic_algorithms_warn_only_enabled())
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(old[0])
        torch.use_deterministic_algorithms(old[1], warn_only=old[2])


# ``runs_user_code``: the model options reach TinyViT's own checks.
@boundary(data=instance(DigitSplit, "a DigitSplit from digit_split()"),
          position=instance(bool), seed=integer(0), epochs=positive_int(),
          batch_size=positive_int(), lr=positive(), threads=positive_int(),
          runs_user_code=True)
def train(data, position=True, seed=0, epochs=15, batch_size=64, lr=5e-3,
          threads=1, **model_options):
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
    seed, epochs, batch_size, threads : int
        Seed of the weights and the batch order, passes over the training
        set, images per step, CPU threads used.
    lr : float
        Peak learning rate.
    **model_options
        Passed to :class:`TinyViT` (``dim``, ``heads``, ``depth`` ...).

    Returns
    -------
    TinyViT
        In evaluation mode, float64. Its attribute ``losses`` holds the mean
        training loss of every epoch.

    Raises
    ------
    TypeError, ValueError
        If ``data`` is not a :class:`DigitSplit`, a count is not a positive
        integer, ``lr`` is not positive, or the model options are invalid.
    """
    X = torch.from_numpy(np.ascontiguousarray(data.X_train, dtype=np.float64))
    y = torch.from_numpy(np.asarray(data.y_train, dtype=np.int64))
    with _deterministic(threads):
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
    model.eval()
    model.losses = losses
    return model


def _tokens(X) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(X, dtype=np.float64))


_MODEL = instance(TinyViT)


@boundary(model=_MODEL, X=floats(ndim=3), checks=(_fits_model,))
def logits(model, X):
    """Class logits (N, n_classes) of patch tokens ``X`` (N, n, p²)."""
    with torch.no_grad():
        return model(_tokens(X)).numpy()


@boundary(model=_MODEL, X=floats(ndim=3), checks=(_fits_model,))
def predict(model, X):
    """Predicted labels (N,) of patch tokens ``X`` (N, n, p²)."""
    return logits(model, X).argmax(axis=1)


@boundary(model=_MODEL, X=floats(ndim=3), y=ints(ndim=1),
          checks=(_fits_model, _one_per_image("y")))
def accuracy(model, X, y):
    """Share of the images ``X`` (N, n, p²) classified as ``y`` (N,)."""
    return float(np.mean(predict(model, X) == y))


@boundary(X=floats(ndim=3), rng=generator())
def shuffle_patches(X, rng):
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

    Raises
    ------
    TypeError
        If ``rng`` is not a ``numpy.random.Generator``.
    """
    perms = np.stack([rng.permutation(X.shape[1]) for _ in range(len(X))])
    return np.take_along_axis(X, perms[:, :, None], axis=1), perms


@boundary(model=_MODEL, X=floats(ndim=3), checks=(_fits_model,))
def attention_maps(model, X):
    """Every block's attention weights for the images ``X``.

    Returns
    -------
    A : ndarray, shape (depth, N, h, 1+n, 1+n)
        Token 0 is the class token, token ``1 + j`` is patch ``j``.
    """
    with torch.no_grad():
        _, maps = model(_tokens(X), attention=True)
    return torch.stack(maps).numpy()


@boundary(model=_MODEL, X=floats(ndim=3), layer=integer(),
          checks=(_fits_model,))
def cls_attention(model, X, layer=-1):
    """How much the class token attends to each patch, averaged over heads.

    This is the map usually drawn over a ViT's input as "what the model
    looks at" (chapter 11 puts it to the test).

    Returns
    -------
    a : ndarray, shape (N, n)
        Row ``i``: block ``layer``'s class-token weights on the patches of
        image ``i``, head-averaged (the rest of the row's mass is on the
        class token itself).
    """
    A = attention_maps(model, X)[layer]                  # (N, h, 1+n, 1+n)
    return A[:, :, 0, 1:].mean(axis=1)                   # (N, n)


@boundary(model=_MODEL, X=floats(ndim=3), checks=(_fits_model,))
def cls_values(model, X):
    """The values that the class token averages in the last block.

    Returns
    -------
    V : ndarray, shape (N, h, 1+n, d_k)
        Head ``k``'s output for the class token is ``a @ V[:, k]``, with
        ``a`` its attention weights (token 0 is the class token).
    """
    with torch.no_grad():
        z = model.embed(_tokens(X))                      # (N, n, d)
        if model.pos is not None:
            z = z + model.pos
        z = torch.cat([model.cls.expand(len(z), -1, -1), z], 1)
        for block in model.blocks[:-1]:
            z, _ = block(z)
        _, _, v = model.blocks[-1].qkv_heads(z)          # (N, h, 1+n, d_k)
    return v.numpy()


@boundary(model=_MODEL, X=floats(ndim=3), weights=floats(ndim=3),
          checks=(_fits_model, _cls_weights_fit))
def logits_with_cls_weights(model, X, weights):
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
    with torch.no_grad():
        return model(_tokens(X), cls_weights=_tokens(weights)).numpy()


@boundary(model=_MODEL, X=floats(ndim=3), target=optional(ints(ndim=1)),
          checks=(_fits_model, _one_per_image("target")))
def gradient_importance(model, X, target=None):
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
    x = _tokens(X).clone().requires_grad_(True)
    out = model(x)                                       # (N, n_classes)
    if target is None:
        target = out.argmax(dim=1)
    else:
        target = torch.as_tensor(target, dtype=torch.int64)
    out.gather(1, target[:, None]).sum().backward()
    return x.grad.norm(dim=-1).detach().numpy()           # (N, n)


@boundary(a=floats(min_ndim=1), b=floats(min_ndim=1), checks=(_same_items,))
def rank_correlation(a, b):
    """Spearman's rank correlation of ``a`` and ``b`` along the last axis.

    ``scipy.stats.spearmanr`` applied to each pair of rows.

    Parameters
    ----------
    a, b : array_like, shape (..., n)
        Two scores of the same ``n`` items, e.g. attention and gradient
        importance of the patches of each image; ``n >= 2``.

    Returns
    -------
    rho : float or ndarray, shape (...)
        In [-1, 1]: 1 if both order the items alike, -1 if opposite. Ties
        share their mean rank; a row with all items tied gives NaN.
    """
    n = a.shape[-1]
    with warnings.catch_warnings():          # a row of ties: NaN, said above
        warnings.simplefilter("ignore", ConstantInputWarning)
        rho = [spearmanr(x, y).statistic
               for x, y in zip(a.reshape(-1, n), b.reshape(-1, n))]
    return np.reshape(rho, a.shape[:-1])[()]
