"""Exercises of chapter 11, Misconceptions."""

from __future__ import annotations

import itertools
import math

import numpy as np

from .core import (Exercise, Opaque, Wrong, answered, call, returned_array,
                   type_name)

__all__ = ["check_same_output_row", "check_faithfulness",
           "check_reading_heads", "reading_heads", "digit_patches"]


# ------------------------------------------------------------------ 11.1
def _same_output_cases(rng):
    cases = []
    for n, d_v in ((5, 2), (8, 3), (17, 8), (int(rng.integers(4, 12)), 1)):
        scores = 2.0 * rng.standard_normal(n)
        a = np.exp(scores - scores.max())
        cases.append({"a": a / a.sum(), "V": rng.standard_normal((n, d_v))})
    return cases


def _same_output_run(same_output_row, a, V):
    return call(same_output_row, a, V, what="same_output_row")


def _same_output_judge(b, a, V):
    b = returned_array(b, "same_output_row", "an attention row")
    n = len(a)
    if b.shape != a.shape:
        raise Wrong(f"same_output_row returned shape {b.shape}; an attention "
                    f"row over the n = {n} keys has shape {a.shape}")
    if not np.all(np.isfinite(b)):
        raise Wrong("b holds NaN or infinite weights")
    y = a @ V
    gap = float(np.abs(b @ V - y).max())
    if not math.isclose(b.sum(), 1.0, abs_tol=1e-8):
        if gap <= 1e-8 * (1 + np.abs(y).max()) or np.allclose(
                (b - a) @ V, 0, atol=1e-8):
            raise Wrong(f"the weights of b sum to {b.sum():.4g}: the step "
                        f"u you added keeps u @ V = 0 but not sum(u) = 0. "
                        f"Add a row of ones to the constraints")
        raise Wrong(f"the weights of b sum to {b.sum():.4g}, not one")
    if gap > 1e-8 * (1 + np.abs(y).max()):
        raise Wrong(f"b @ V differs from a @ V by up to {gap:.3g}; move a "
                    f"only along a direction u with u @ V = 0 (for n = {n} "
                    f"keys and d_v = {V.shape[1]})")
    if b.min() < -1e-9:
        raise Wrong(f"b has a negative weight ({b.min():.3g}): you stepped "
                    f"too far. Stop where the first weight reaches zero")
    dropped = (a > 1e-6) & (b <= 1e-9)
    if np.allclose(b, a, atol=1e-9):
        raise Wrong("b is the same row as a; find a different one")
    if not dropped.any():
        raise Wrong(f"b is a valid row with the same output (it moves "
                    f"{0.5 * np.abs(b - a).sum():.3f} of the weight), but "
                    f"every key still has weight: keep going along the same "
                    f"direction until one weight of b reaches zero")
    return None


check_same_output_row = Exercise(
    "ex-misconceptions-same-output", kind="Prove", points=2,
    answers=("same_output_row",), cases=_same_output_cases,
    run=_same_output_run, judge=_same_output_judge, seed=111,
    written="why does such a row exist whenever n > d_v + 1, and what does "
            "that mean for the class token's 17 weights per head of "
            "width 8?",
    written_points=1,
    success="b is a different attention row, with a key dropped, and "
            "b @ V = a @ V.",
    doc="Exercise 11.1: a different attention row with the same output, "
        "constructed from V.")


# ------------------------------------------------------------------ 11.2
def _linear_predict(W, b):
    """A linear classifier of patch tokens: ``(N, n, p) -> (N,)`` labels."""
    W, b = np.asarray(W, dtype=float), np.asarray(b, dtype=float)

    def predict(X):
        X = np.asarray(X, dtype=float)
        return (X.reshape(len(X), -1) @ W + b).argmax(-1)

    return predict


def _faithfulness_cases(rng):
    N, n, p, classes = 500, 16, 4, 4
    X = rng.uniform(0.2, 1.0, (N, n, p))
    X[rng.random((N, n)) < 0.5] = 0.0                    # blank patches
    W = rng.standard_normal((n * p, classes))
    b = np.zeros(classes)
    y = _linear_predict(W, b)(X)                         # clean: all right
    seeds = rng.choice(2 ** 31, size=4, replace=False)
    return [{"X": X, "y": y, "W": W, "b": b,
             "scores": rng.standard_normal((N, n)), "k": int(k),
             "seeds": [int(s) for s in seeds]}
            for k in rng.choice([1, 2, 3], size=2, replace=False)]


def _faithfulness_run(faithfulness, X, y, W, b, scores, k, seeds):
    predict = _linear_predict(W, b)
    return tuple(call(faithfulness, predict, X.copy(), y, scores, k, s,
                      what="faithfulness") for s in seeds + seeds[:1])


def _removed_accuracy(predict, X, y, chosen):
    """Accuracy after blanking ``chosen`` (N, k) patches of each image."""
    X = X.copy()
    X[np.arange(len(X))[:, None], chosen] = 0.0
    return float(np.mean(predict(X) == y))


def _random_accuracy(predict, X, y, k, ink_only):
    """Mean and standard deviation of the accuracy after blanking ``k``
    patches drawn at random (every k-subset equally likely), exactly."""
    p = np.empty(len(X))
    for i, x in enumerate(X):
        pool = np.flatnonzero(np.abs(x).sum(-1) > 0) if ink_only \
            else np.arange(len(x))
        subsets = np.array(list(itertools.combinations(pool, min(k, len(
            pool)))), dtype=int).reshape(-1, min(k, len(pool)))
        copies = np.repeat(x[None], len(subsets), axis=0)
        copies[np.arange(len(subsets))[:, None], subsets] = 0.0
        p[i] = np.mean(predict(copies) == y[i])
    return p.mean(), math.sqrt(np.sum(p * (1 - p))) / len(p)


def _pair(out, what):
    try:
        if isinstance(out, (str, Opaque)) or len(out) != 2:
            raise TypeError
        pair = tuple(float(v) for v in out)
    except (TypeError, ValueError):
        raise Wrong(f"{what} should return a pair (ranked, control) of "
                    f"accuracies, got {type_name(out)}") from None
    if not all(0 <= v <= 1 for v in pair):
        raise Wrong(f"{what} returned {pair}; accuracies are fractions "
                    f"between 0 and 1")
    return pair


def _faithfulness_judge(outs, X, y, W, b, scores, k, seeds):
    if not isinstance(outs, (tuple, list)) or len(outs) != len(seeds) + 1:
        raise Wrong("faithfulness could not be run on every seed")
    pairs = [_pair(o, "faithfulness") for o in outs]
    predict = _linear_predict(W, b)
    order = np.argsort(-scores, axis=1, kind="stable")
    ranked = _removed_accuracy(predict, X, y, order[:, :k])
    N = len(X)
    if any(abs(r - ranked) > 0.5 / N for r, _ in pairs):
        got = pairs[0][0]
        if abs(got - _removed_accuracy(predict, X, y, order[:, -k:])) \
                <= 0.5 / N:
            raise Wrong(f"k = {k}: you blanked the k lowest-scoring "
                        f"patches; blank the k highest")
        if k > 1 and abs(got - _removed_accuracy(
                predict, X, y, order[:, :k - 1])) <= 0.5 / N:
            raise Wrong(f"k = {k}: your ranked accuracy is that of k - 1 "
                        f"removed patches")
        raise Wrong(f"k = {k}: blanking the {k} highest-scoring patches "
                    f"leaves a different accuracy than the one you return "
                    f"({got:.3f}); set every value of those patches to 0")
    controls = np.array([c for _, c in pairs])
    if abs(controls[-1] - controls[0]) > 0.5 / N:
        raise Wrong("the same seed gave two different controls: draw the "
                    "random patches from np.random.default_rng(seed)")
    controls = controls[:-1]
    mean_ink, sd_ink = _random_accuracy(predict, X, y, k, ink_only=True)
    mean_any, sd_any = _random_accuracy(predict, X, y, k, ink_only=False)
    sd_mean = sd_ink / math.sqrt(len(controls))
    far = np.abs(controls - mean_ink) > 5 * sd_ink + 0.5 / N
    if abs(controls.mean() - mean_ink) <= 4 * sd_mean + 0.5 / N \
            and not far.any():
        if np.ptp(controls) == 0 and sd_ink * N >= 5:
            raise Wrong("the control gives the same accuracy for every "
                        "seed: its patches must be drawn with the seed")
        return None
    if abs(controls.mean() - mean_any) <= 4 * sd_any / math.sqrt(
            len(controls)) + 0.5 / N:
        raise Wrong(f"k = {k}: your control's accuracy, "
                    f"{controls.mean():.3f} on average, is what blanking "
                    f"random patches of any kind gives; many of them are "
                    f"blank already. Draw among the ink patches")
    raise Wrong(f"k = {k}: your control's accuracy, {controls.mean():.3f} "
                f"on average over {len(controls)} seeds, is too far from "
                f"what k random ink patches give; draw k of each image's "
                f"ink patches uniformly (all of them if it has fewer)")


check_faithfulness = Exercise(
    "ex-misconceptions-faithfulness", kind="Experiment", points=3,
    answers=("faithfulness",), cases=_faithfulness_cases,
    run=_faithfulness_run, judge=_faithfulness_judge, seed=112,
    written="on the tiny ViT, how far is the layer-2 map from your "
            "control and from occlusion, and what does blanking fail to "
            "measure?",
    written_points=2,
    success="the ranked removal is exact and the control matches random "
            "ink patches on every seed.",
    doc="Exercise 11.2: accuracy after blanking the top-k patches and k "
        "random ink patches, for any classifier and seed.")


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
    """The two one-query heads of exercise 11.4 on patch tokens.

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


def _median_rho_sign(a, b):
    from scipy.stats import rankdata

    ra, rb = rankdata(a, axis=-1), rankdata(b, axis=-1)
    ra -= ra.mean(-1, keepdims=True)
    rb -= rb.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (ra * rb).sum(-1) / np.sqrt((ra ** 2).sum(-1)
                                          * (rb ** 2).sum(-1))
    return int(np.sign(np.nanmedian(rho)))


def _signs_judge(signs):
    answered(signs, "a pair of signs (ink head, empty head), each +1 or -1",
             "predicted_signs")
    try:
        if isinstance(signs, (str, Opaque)) or len(signs) != 2:
            raise TypeError
        got = tuple(int(s) for s in signs)
        if any(s != float(t) for s, t in zip(got, signs)):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise Wrong(f"predicted_signs should be two signs, +1 or -1, got "
                    f"{type_name(signs)}") from None
    if any(s not in (1, -1) for s in got):
        raise Wrong(f"each sign is +1 or -1, got {got}")
    heads = reading_heads(digit_patches())
    want = tuple(_median_rho_sign(a, np.abs(ixg))
                 for a, ixg in (heads["ink"], heads["empty"]))
    if got != want:
        raise Wrong("at least one of the two signs is not what the digits "
                    "give; compute both correlations and explain the one "
                    "you missed")
    return None


check_reading_heads = Exercise(
    "ex-misconceptions-signs", kind="Predict", points=1,
    answers=("predicted_signs",), judge=_signs_judge,
    written="why do the two signs differ, and is the head that reads empty "
            "space unimportant?",
    written_points=1,
    success="both signs are right.",
    doc="Exercise 11.4: the sign of the rank correlation between attention "
        "and |input × gradient| for a head that reads ink and one that "
        "reads empty space.")
