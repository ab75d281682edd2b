"""The tiny ViT of scikit-learn's 8 × 8 digits as ``make train`` trained it
(:ref:`ch-position`, :ref:`ch-transformer`, :ref:`ch-misconceptions`): the
digits it learns from, split by label, the recipes' arguments and the loader
of their weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selfattention._validate import boundary, integer, number, one_of
from selfattention.patches import patchify
from selfattention.vit import TinyViT

from . import trained
from .trained import load_weight_arrays

__all__ = ["DigitSplit", "digit_split", "TRAINED_DIGITS",
           "trained_digits_vit"]


@dataclass(frozen=True)
class DigitSplit:
    """Digits as tokens (N, 16, 4) in [0, 1], labels (N,), test images
    (N, 8, 8), the patch ``grid`` and the patch side ``patch`` in pixels."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    images_test: np.ndarray
    grid: tuple = (4, 4)
    patch: int = 2


@boundary(test_fraction=number(0, 1, strict=True), seed=integer(0))
def digit_split(test_fraction=0.25, seed=0):
    """The 1,797 digits as patch tokens, split reproducibly by label."""
    # scikit-learn takes about 3 s to import: only when a split is made.
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    images, labels = digits.images / 16.0, digits.target  # (N, 8, 8), (N,)
    train, test = train_test_split(np.arange(len(labels)),
                                   test_size=float(test_fraction),
                                   stratify=labels, random_state=seed)
    train, test = np.sort(train), np.sort(test)
    X = patchify(images, 2)                              # (N, 16, 4)
    return DigitSplit(X[train], labels[train], X[test], labels[test],
                      images[test])


# The models that chapters 5, 6 and 11 show, each trained once by ``make
# train``: recipe name -> the arguments of
# :func:`selfattention_training.digits.train` (seed 0). float64 on one thread
# from fixed seeds repeats bit for bit on one machine; another CPU's kernels
# round float64 products differently, which atol allows.
TRAINED_DIGITS = {
    "vit-digits": {},                                # chapters 6 and 11
    "vit-digits-10": {"epochs": 10},                 # chapter 5
    "vit-digits-10-no-position": {"epochs": 10, "position": False},
}


@boundary(name=one_of(*TRAINED_DIGITS))
def trained_digits_vit(name="vit-digits"):
    """The :class:`~selfattention.vit.TinyViT` that ``make train`` trained as
    ``name`` (a key of ``TRAINED_DIGITS``), from its checked file, in
    evaluation mode, with ``losses`` as
    :func:`selfattention_training.digits.train` sets it."""
    arrays = trained.load(name)
    position = TRAINED_DIGITS[name].get("position", True)
    model = load_weight_arrays(TinyViT(position=position), arrays)
    model.losses = arrays["losses"].tolist()      # train's default sizes
    return model
