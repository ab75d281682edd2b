"""The ``make train`` recipe ``scale-training``: the model of
:mod:`selfattention_models.scale` trained with each divisor of the scores
from a few seeds, measured along the way.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from selfattention import patches
from selfattention_models.mnist import mnist_digits
from selfattention_models.scale import D_K, PATCH, ScaleModel, entropy

from .recipes import recipe

__all__ = ["VARIANTS", "SEEDS", "divisor", "digit_tokens", "split",
           "train_variant", "scale_training_recipe"]

VARIANTS = ("1/√d_k", "1", "1/d_k")     # what multiplies Q Kᵀ
SEEDS = (0, 1, 2)
STEPS = 400                      # Adam steps of 64 digits (6.4 epochs)
BATCH = 64
EVERY = 25                       # steps between two measurements
PROBE = 1000                     # test digits measured along the way
SHOWN = 6                        # test digits whose maps are kept


def divisor(variant: str, d_k: int = D_K) -> float:
    """The number the scores ``Q Kᵀ`` are divided by in ``variant``."""
    return {"1/√d_k": math.sqrt(d_k), "1": 1.0, "1/d_k": float(d_k)}[variant]


def digit_tokens(images):
    """Images (N, 28, 28) as 16 patch tokens (N, 16, 49) of 7 × 7 pixels,
    numbered row-major."""
    return patches.patchify(np.asarray(images), PATCH)


def _rows():
    from sklearn.model_selection import train_test_split

    labels = mnist_digits()[1]
    return train_test_split(np.arange(len(labels)), test_size=1000,
                            stratify=labels, random_state=0)


def _test_rows():
    return _rows()[1]


def split():
    """The 5,000 MNIST digits as a stratified split, 4,000 to train and
    1,000 to test (``sklearn.model_selection.train_test_split``, seed 0):
    ``(X_train, y_train, X_test, y_test)``, tokens (N, 16, 49) in [0, 1]."""
    images, labels = mnist_digits()
    i_train, i_test = _rows()
    X = digit_tokens(images)
    return X[i_train], labels[i_train], X[i_test], labels[i_test]


def _measure(model, X, y):
    with torch.no_grad():
        logits, maps = model(X)                            # maps (N, 2, n, n)
        S = [head.last_scores for head in model.heads]     # (N, n, n) each
    A = maps.double().numpy()
    return {"test_loss": nn.functional.cross_entropy(logits, y).item(),
            "test_accuracy": (logits.argmax(1) == y).double().mean().item(),
            "entropy": entropy(A).mean(axis=(0, 2)),       # (2,) per layer
            "max_weight": A.max(axis=-1).mean(axis=(0, 2)),
            "score_spread": np.array([s.double().std(-1).mean().item()
                                      for s in S]),
            "cls_maps": A[:SHOWN, :, 0, 1:]}               # (SHOWN, 2, n)


def train_variant(variant: str, seed: int, steps: int = STEPS,
                  split_arrays=None) -> dict:
    """Train :class:`ScaleModel` with the scores divided as ``variant``
    says: initial weights from ``torch.manual_seed(seed)``, batches of
    ``BATCH`` training digits in an order drawn by
    ``np.random.default_rng(seed)``, Adam with learning rate 1e-3, float32.
    The weights and the batches depend on the seed, never on the variant.

    Returns a dict of arrays: per step, ``train_loss`` (the batch's loss
    before the step's update) and ``grad_qk`` (the norm of its gradient with
    respect to every ``W_Q`` and ``W_K``); every ``EVERY`` steps from step 0
    (``measured_at``), on the ``PROBE`` test digits, ``test_loss``,
    ``test_accuracy``, and per layer ``entropy`` (nats, mean over rows),
    ``max_weight`` (the largest weight of a row, mean over rows),
    ``score_spread`` (the standard deviation of a row of divided scores,
    mean over rows) and ``cls_maps``, the class token's weights on the 16
    patches of the first ``SHOWN`` test digits.
    """
    X_train, y_train, X_test, y_test = split_arrays or split()
    Xtr = torch.tensor(X_train, dtype=torch.float32)
    ytr = torch.tensor(y_train)
    Xte = torch.tensor(X_test[:PROBE], dtype=torch.float32)
    yte = torch.tensor(y_test[:PROBE])
    torch.manual_seed(seed)
    model = ScaleModel(divisor(variant))
    rng = np.random.default_rng(seed)
    epochs = -(-steps * BATCH // len(Xtr))
    order = np.concatenate([rng.permutation(len(Xtr)) for _ in range(epochs)])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    qk = [w for head in model.heads for w in (head.W_Q, head.W_K)]
    per_step = {"train_loss": [], "grad_qk": []}
    measured = []
    for step in range(steps + 1):
        if step % EVERY == 0:
            model.eval()
            measured.append(_measure(model, Xte, yte))
            model.train()
        if step == steps:
            break
        batch = order[step * BATCH:(step + 1) * BATCH]
        logits, _ = model(Xtr[batch])
        loss = nn.functional.cross_entropy(logits, ytr[batch])
        opt.zero_grad()
        loss.backward()
        per_step["train_loss"].append(loss.item())
        per_step["grad_qk"].append(
            torch.sqrt(sum((w.grad.double() ** 2).sum() for w in qk)).item())
        opt.step()
    curves = {k: np.array(v) for k, v in per_step.items()}
    for key in measured[0]:
        curves[key] = np.array([m[key] for m in measured])
    curves["measured_at"] = np.arange(0, steps + 1, EVERY)
    return curves


@recipe("scale-training")
def scale_training_recipe() -> dict:
    """For :ref:`ch-scaling`: every variant of :data:`VARIANTS` from every
    seed of :data:`SEEDS` (``make train``, about 2 minutes on one thread).

    Arrays: ``train_loss`` and ``grad_qk`` (variants, seeds, STEPS);
    ``test_loss``, ``test_accuracy`` (variants, seeds, measurements);
    ``entropy``, ``max_weight``, ``score_spread`` (variants, seeds,
    measurements, 2 layers); ``cls_maps`` (variants, seeds, measurements,
    SHOWN, 2 layers, 16); ``measured_at`` (measurements,); ``shown``, the
    rows of ``mnist_digits()`` of the digits in ``cls_maps``, and
    ``shown_images`` (SHOWN, 28, 28), those digits;
    ``d_k`` and ``divisor`` (variants,).
    """
    from threadpoolctl import threadpool_limits

    split_arrays = split()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            runs = [[train_variant(v, seed, split_arrays=split_arrays)
                     for seed in SEEDS] for v in VARIANTS]
    finally:
        torch.set_num_threads(threads)
    arrays = {key: np.stack([np.stack([run[key] for run in row])
                             for row in runs])
              for key in runs[0][0] if key != "measured_at"}
    for key in ("train_loss", "grad_qk", "test_loss", "test_accuracy",
                "entropy", "max_weight", "score_spread", "cls_maps"):
        arrays[key] = arrays[key].astype(np.float32)
    arrays["measured_at"] = runs[0][0]["measured_at"]
    arrays["shown"] = _test_rows()[:SHOWN]
    arrays["shown_images"] = mnist_digits()[0][arrays["shown"]].astype(
        np.float32)
    arrays["d_k"] = np.array(D_K)
    arrays["divisor"] = np.array([divisor(v) for v in VARIANTS])
    return arrays
