"""The tiny ViT of scikit-learn's 8 × 8 digits as ``make train`` trained it
(:ref:`ch-position`, :ref:`ch-transformer`, :ref:`ch-misconceptions`): the
recipes' arguments and the loader of their weights.
"""

from __future__ import annotations

from selfattention._validate import boundary, one_of
from selfattention.vit import TinyViT

from . import trained
from .trained import load_weight_arrays

__all__ = ["TRAINED_DIGITS", "trained_digits_vit"]

# The models that chapters 5, 6 and 11 show, each trained once by ``make
# train``: recipe name -> the arguments of :func:`selfattention.vit.train`
# (seed 0). float64 on one thread from fixed seeds repeats bit for bit on one
# machine; another CPU's kernels round float64 products differently, which
# atol allows.
TRAINED_DIGITS = {
    "vit-digits": {},                                # chapters 6 and 11
    "vit-digits-10": {"epochs": 10},                 # chapter 5
    "vit-digits-10-no-position": {"epochs": 10, "position": False},
}


@boundary(name=one_of(*TRAINED_DIGITS))
def trained_digits_vit(name="vit-digits"):
    """The :class:`~selfattention.vit.TinyViT` that ``make train`` trained as
    ``name`` (a key of ``TRAINED_DIGITS``), from its checked file, in
    evaluation mode, with ``losses`` as :func:`selfattention.vit.train` sets
    it."""
    arrays = trained.load(name)
    position = TRAINED_DIGITS[name].get("position", True)
    model = load_weight_arrays(TinyViT(position=position), arrays)
    model.losses = arrays["losses"].tolist()      # train's default sizes
    return model
