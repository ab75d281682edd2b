"""The book's running example (:ref:`ch-definition` to :ref:`ch-masks`), drawn
from ``default_rng(0)`` in a fixed order.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ._validate import boundary, generator, integer, positive_int
from .data import two_squares
from .patches import center, patchify

__all__ = ["RunningExample", "MhaWeights", "running_example",
           "random_orthogonal"]


@boundary(d=positive_int(), rng=generator())
def random_orthogonal(d, rng):
    """A random (d, d) orthogonal matrix: the Q factor of a Gaussian matrix."""
    R, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return R


class MhaWeights(NamedTuple):
    """The four projections of a multi-head layer, heads side by side."""

    W_q: np.ndarray       # (d, h·d_k) queries
    W_k: np.ndarray       # (d, h·d_k) keys
    W_v: np.ndarray       # (d, h·d_v) values
    W_o: np.ndarray       # (h·d_v, d) output


@dataclass(frozen=True)
class RunningExample:
    """Every array of the running example (see the module docstring)."""

    img: np.ndarray       # (32, 32) image
    X: np.ndarray         # (64, 16) centred patch tokens
    W_q: np.ndarray       # (16, 16) tied query projection 2R
    W_k: np.ndarray       # (16, 16) tied key projection, equal to W_q
    W_v: np.ndarray       # (16, 16) value projection
    mha: MhaWeights       # four-head projections, (16, 16) each
    perm: np.ndarray      # (64,) a permutation of the patches
    rng: np.random.Generator   # the stream, after all of the above
    grid: tuple = (8, 8)  # patches
    patch: int = 4        # pixels
    query: int = 1        # patch (0, 1): the top edge of the first square
    h: int = 4            # heads of mha


@boundary(seed=integer(0))
def running_example(seed=0):
    """Replay the running example's random chain from ``seed``."""
    rng = np.random.default_rng(seed)
    img = two_squares(rng)                              # (32, 32)
    X = center(patchify(img, 4))                        # (64, 16)
    d = X.shape[1]
    W_q = W_k = 2.0 * random_orthogonal(d, rng)   # scores = patch dot products
    W_v = rng.standard_normal((d, d)) / np.sqrt(d)
    mha = MhaWeights(*(rng.standard_normal((d, d)) / np.sqrt(d)
                       for _ in range(4)))
    perm = rng.permutation(X.shape[0])
    return RunningExample(img=img, X=X, W_q=W_q, W_k=W_k, W_v=W_v, mha=mha,
                          perm=perm, rng=rng)
