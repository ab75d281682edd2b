"""Exercises of :ref:`ch-misconceptions`, Misconceptions."""

from __future__ import annotations

import numpy as np

from .core import Exercise, call

__all__ = ["check_same_output_row", "check_faithfulness",
           "check_integrated_gradients", "check_reading_heads", "reading_heads",
           "digit_patches"]


# ------------------------------------------------------------------ 11.1
def _same_output_run(same_output_row, a, V):
    return call(same_output_row, a, V, what="same_output_row")


check_same_output_row = Exercise(
    "ex-misconceptions-same-output", kind="Prove", points=2,
    answers=("same_output_row",),
    run=_same_output_run, seed=111,
    # a linear program's vertex is such a row, found without the step
    references=("scipy.optimize",),
    written="why does such a row exist whenever n > d_v + 1, and what does "
            "that mean for the class token's 17 weights per head of "
            "width 8?",
    written_points=2,
    success="b is a different attention row, with a key dropped, and "
            "b @ V = a @ V.",
    doc="Exercise 12.1: a different attention row with the same output, "
        "constructed from V.")


# ------------------------------------------------------------------ 11.2
def _linear_predict(W):
    """A linear classifier of patch tokens: ``(N, n, p) -> (N,)`` labels."""
    W = np.asarray(W, dtype=float)

    def predict(X):
        X = np.asarray(X, dtype=float)
        return (X.reshape(len(X), -1) @ W).argmax(-1)

    return predict


def _faithfulness_run(faithfulness, X, y, W, scores, k, seeds):
    predict = _linear_predict(W)
    return tuple(call(faithfulness, predict, X.copy(), y, scores, k, s,
                      what="faithfulness") for s in seeds + seeds[:1])


check_faithfulness = Exercise(
    "ex-misconceptions-faithfulness", kind="Experiment", points=2,
    answers=("faithfulness",),
    run=_faithfulness_run, seed=112,
    written="on the tiny ViT, does blanking the layer-2 map's top patches "
            "hurt more than your control, and what can blanking not "
            "measure?",
    written_points=3,
    success="the ranked removal is exact and the control matches ink "
            "patches drawn in proportion to their ink, on every seed.",
    doc="Exercise 12.2: accuracy after blanking the top-k patches and k "
        "ink patches drawn in proportion to their ink, for any classifier "
        "and seed.")


# ------------------------------------------------------------------ 11.3
def _small_vit(seed):
    """An untrained two-layer TinyViT of width 16, the same for a seed."""
    import torch
    from selfattention.vit import TinyViT

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyViT(n=16, d_in=4, d=16, h=2, depth=2, d_mlp=16)
    return model.double().eval()


def _gradient_run(my_integrated_gradients, X, seed, steps):
    out = call(my_integrated_gradients, _small_vit(seed), X, steps,
               what="my_integrated_gradients")
    if hasattr(out, "detach") and hasattr(out, "numpy"):
        out = out.detach().numpy()                        # a torch tensor
    return out


check_integrated_gradients = Exercise(
    "ex-misconceptions-gradient", kind="Implement", points=1,
    answers=("my_integrated_gradients",),
    run=_gradient_run, seed=113,
    written="show that the attributions sum to f(x) - f(0) up to the "
            "quadrature error, measure the gap on the tiny ViT for 1 to 32 "
            "steps, and the rate at which it falls, against input × "
            "gradient's; why does a blank patch get exactly 0, and "
            "what does that mean for the head that reads empty space?",
    written_points=3,
    success="the predicted logit's gradient averaged along the path from "
            "the blank image, times the input, summed over each patch.",
    doc="Exercise 12.3: integrated gradients from a blank baseline, per "
        "patch, for any TinyViT.")


# ------------------------------------------------------------------ 11.4
def digit_patches():
    """All 1,797 digits as tokens of 2 × 2-pixel patches, (N, 16, 4).

    Pixels are scaled to [0, 1]; token ``4·r + c`` is the patch at row
    ``r``, column ``c`` of the 4 × 4 grid.
    """
    from sklearn.datasets import load_digits

    images = load_digits().images / 16.0                 # (N, 8, 8)
    N = len(images)
    g = images.reshape(N, 4, 2, 4, 2).transpose(0, 1, 3, 2, 4)
    return g.reshape(N, 16, 4)                           # (N, 16, 4)


def reading_heads(X, beta=2.0):
    """The two one-query heads of :ref:`ex-misconceptions-signs` on patch
    tokens.

    Each head scores a patch by its ink ``s_j = ±β·sum(x_j)`` (``+``: the
    head that reads ink, ``-``: the head that reads empty space), takes
    ``a = softmax(s)`` and outputs ``logit = sum_j a_j·mean(x_j)``.

    Parameters
    ----------
    X : ndarray, shape (N, n, p)
        Patch tokens.
    beta : float
        How sharply each head prefers its patches.

    Returns
    -------
    dict
        ``{"ink": (a, ixg), "empty": (a, ixg)}``: weights ``a`` (N, n) and
        input × gradient of the logit per patch ``ixg`` (N, n).
    """
    X = np.asarray(X, dtype=float)
    u = np.full(X.shape[-1], 1.0 / X.shape[-1])
    r = X @ u                                            # (N, n) readout
    heads = {}
    for name, sign in (("ink", 1.0), ("empty", -1.0)):
        s = sign * beta * X.sum(-1)                      # (N, n) scores
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        y = (a * r).sum(-1, keepdims=True)               # (N, 1) logit
        grad = a[..., None] * u + (sign * beta * a * (r - y))[..., None]
        heads[name] = (a, (X * grad).sum(-1))            # (N, n) each
    return heads


check_reading_heads = Exercise(
    # A prediction that cannot be shown to come before the measurement
    # (the notebook's own check confirms a guess in a few tries): the
    # points go to the written part, which the instructor reads.
    "ex-misconceptions-signs", kind="Predict", points=0,
    answers=("predicted_signs",),
    written="why do the two signs differ, and is the head that reads empty "
            "space unimportant?",
    written_points=3,
    success="both signs are right.",
    doc="Exercise 12.4: the sign of the rank correlation between attention "
        "and the size of input × gradient, for a head that reads ink and one "
        "that reads empty space.")
