"""The judges of :ref:`ch-misconceptions`, Misconceptions: hidden cases, judges
and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from selfattention_exercises.core import (
    Opaque,
    Wrong,
    answered,
    returned_array,
    type_name,
)
from selfattention_exercises.misconceptions import (
    _linear_predict,
    _small_vit,
    digit_patches,
    reading_heads,
)

from . import Judge


def _same_output_cases(rng):
    cases = []
    for n, d_v in ((5, 2), (8, 3), (17, 8), (int(rng.integers(4, 12)), 1)):
        scores = 2.0 * rng.standard_normal(n)
        a = np.exp(scores - scores.max())
        cases.append({"a": a / a.sum(), "V": rng.standard_normal((n, d_v))})
    return cases


def _same_output_judge(b, a, V):
    b = returned_array(b, "same_output_row", "an attention row")
    n = len(a)
    if b.shape != a.shape:
        raise Wrong(f"same_output_row returned shape {b.shape}; an attention "
                    f"row over the n = {n} keys has shape {a.shape}", "shape")
    if not np.all(np.isfinite(b)):
        raise Wrong("b holds NaN or infinite weights", "not-finite")
    y = a @ V
    gap = float(np.abs(b @ V - y).max())
    if not math.isclose(b.sum(), 1.0, abs_tol=1e-8):
        if gap <= 1e-8 * (1 + np.abs(y).max()) or np.allclose(
                (b - a) @ V, 0, atol=1e-8):
            raise Wrong(f"the weights of b sum to {b.sum():.4g}: the step "
                        f"u you added keeps u @ V = 0 but not sum(u) = 0. "
                        f"Add a row of ones to the constraints",
                        "sum-not-constrained")
        raise Wrong(f"the weights of b sum to {b.sum():.4g}, not one",
                    "not-weights")
    if gap > 1e-8 * (1 + np.abs(y).max()):
        raise Wrong(f"b @ V differs from a @ V by up to {gap:.3g}; move a "
                    f"only along a direction u with u @ V = 0 (for n = {n} "
                    f"keys and d_v = {V.shape[1]})", "output-changes")
    if b.min() < -1e-9:
        raise Wrong(f"b has a negative weight ({b.min():.3g}): you stepped "
                    f"too far. Stop where the first weight reaches zero",
                    "negative-weight")
    # A key is dropped when its weight fell to (next to) nothing, relative
    # to its own: a softmax weight may itself be as small as 1e-7.
    dropped = (a > 0) & (b <= 1e-6 * a)
    if np.allclose(b, a, atol=1e-9):
        raise Wrong("b is the same row as a; find a different one", "same-row")
    if not dropped.any():
        raise Wrong(f"b is a valid row with the same output (it moves "
                    f"{0.5 * np.abs(b - a).sum():.3f} of the weight), but "
                    f"every key still has weight: keep going along the same "
                    f"direction until one weight of b reaches zero",
                    "no-zero-weight")
    return None


def _faithfulness_cases(rng):
    N, n, p, classes = 1000, 16, 4, 4
    strength = rng.uniform(0.05, 1.0, (N, n, 1))         # faint to bold
    X = rng.uniform(0.5, 1.0, (N, n, p)) * strength
    X[rng.random((N, n)) < 0.45] = 0.0                   # blank patches
    W = rng.standard_normal((n * p, classes))
    y = _linear_predict(W)(X)                            # clean: all right
    seeds = rng.choice(2 ** 31, size=8, replace=False)
    return [{"X": X, "y": y, "W": W, "scores": rng.standard_normal((N, n)),
             "k": int(k), "seeds": [int(s) for s in seeds]}
            for k in (1, 2)]


def _removed_accuracy(predict, X, y, chosen):
    """Accuracy after blanking ``chosen`` (N, k) patches of each image."""
    X = X.copy()
    X[np.arange(len(X))[:, None], chosen] = 0.0
    return float(np.mean(predict(X) == y))


def _draw_probabilities(ink, subsets, how):
    """Probability of drawing each k-subset of patches (rows of
    ``subsets``): uniformly, or one patch after another with probability
    proportional to its ink."""
    if how != "weighted":
        return np.full(len(subsets), 1 / len(subsets))
    w = ink / ink.sum()
    total = np.zeros(len(subsets))
    for order in itertools.permutations(range(subsets.shape[1])):
        seq = subsets[:, order]                          # one draw order
        prob, left = np.ones(len(subsets)), np.ones(len(subsets))
        for t in range(seq.shape[1]):
            prob *= w[seq[:, t]] / left
            left = left - w[seq[:, t]]
        total += prob
    return total


def _random_accuracy(predict, X, y, k, how):
    """Mean and standard deviation of the accuracy after blanking ``k``
    random patches of each image, exactly: ``how`` is "weighted" (ink
    patches, drawn in proportion to their ink), "uniform" (ink patches,
    uniformly) or "any" (any patch, uniformly)."""
    p = np.empty(len(X))
    for i, x in enumerate(X):
        ink = np.abs(x).sum(-1)                          # (n,)
        pool = np.arange(len(x)) if how == "any" else np.flatnonzero(ink)
        size = min(k, len(pool))
        if size == 0:                                    # nothing to blank
            p[i] = float(predict(x[None])[0] == y[i])
            continue
        subsets = np.array(list(itertools.combinations(pool, size)))
        copies = np.repeat(x[None], len(subsets), axis=0)
        copies[np.arange(len(subsets))[:, None], subsets] = 0.0
        p[i] = _draw_probabilities(ink, subsets, how) @ (
            predict(copies) == y[i])
    return p.mean(), math.sqrt(np.sum(p * (1 - p))) / len(p)


def _pair(out, what):
    try:
        if isinstance(out, (str, Opaque)) or len(out) != 2:
            raise TypeError
        pair = tuple(float(v) for v in out)
    except (TypeError, ValueError):
        raise Wrong(f"{what} should return a pair (ranked, control) of "
                    f"accuracies, got {type_name(out)}", "type") from None
    if not all(0 <= v <= 1 for v in pair):
        raise Wrong(f"{what} returned {pair}; accuracies are fractions "
                    f"between 0 and 1", "not-a-share")
    return pair


def _check_ranked(got, predict, X, y, scores, k):
    order = np.argsort(-scores, axis=1, kind="stable")
    close = 0.5 / len(X)
    if abs(got - _removed_accuracy(predict, X, y, order[:, :k])) <= close:
        return
    if abs(got - _removed_accuracy(predict, X, y, order[:, -k:])) <= close:
        raise Wrong(f"k = {k}: you blanked the k lowest-scoring patches; "
                    f"blank the k highest", "lowest-blanked")
    if k > 1 and abs(got - _removed_accuracy(
            predict, X, y, order[:, :k - 1])) <= close:
        raise Wrong(f"k = {k}: your ranked accuracy is that of k - 1 "
                    f"removed patches", "one-fewer-blanked")
    raise Wrong(f"k = {k}: blanking the {k} highest-scoring patches leaves "
                f"a different accuracy than the one you return ({got:.3f}); "
                f"set every value of those patches to 0", "not-the-ranked")


def _faithfulness_judge(outs, X, y, W, scores, k, seeds):
    if not isinstance(outs, (tuple, list)) or len(outs) != len(seeds) + 1:
        raise Wrong("faithfulness could not be run on every seed",
                    "unreadable")
    pairs = [_pair(o, "faithfulness") for o in outs]
    predict = _linear_predict(W)
    for ranked, _ in pairs:
        _check_ranked(ranked, predict, X, y, scores, k)
    N, S = len(X), len(seeds)
    controls = np.array([c for _, c in pairs])
    if abs(controls[-1] - controls[0]) > 0.5 / N:
        raise Wrong("the same seed gave two different controls: draw the "
                    "random patches from np.random.default_rng(seed)",
                    "not-seeded")
    controls = controls[:-1]
    expected = {how: _random_accuracy(predict, X, y, k, how)
                for how in ("weighted", "uniform", "any")}

    def near(how):        # the mean over seeds, within 4 of its sd
        mean, sd = expected[how]
        return abs(controls.mean() - mean) <= 4 * sd / math.sqrt(S) + 0.5 / N

    mean, sd = expected["weighted"]
    if np.ptp(controls) == 0 and sd * N >= 5:
        raise Wrong("the control gives the same accuracy for every seed: "
                    "its patches must be drawn with the seed", "seed-ignored")
    if near("weighted") and np.all(np.abs(controls - mean)
                                   <= 5 * sd + 0.5 / N):
        return None
    got = f"{controls.mean():.3f} on average over {S} seeds"
    if near("uniform"):
        raise Wrong(f"k = {k}: your control's accuracy, {got}, is what "
                    f"drawing ink patches uniformly gives; draw each patch "
                    f"with a probability proportional to its ink",
                    "control-uniform")
    if near("any"):
        raise Wrong(f"k = {k}: your control's accuracy, {got}, is what "
                    f"blanking random patches of any kind gives; many of "
                    f"them are blank already. Draw among the ink patches",
                    "control-any-patch")
    raise Wrong(f"k = {k}: your control's accuracy, {got}, is too far from "
                f"what k ink patches drawn in proportion to their ink give "
                f"(all of them if an image has fewer)", "not-the-control")


def _gradient_cases(rng):
    cases = []
    for N, steps in ((8, 3), (5, 1), (6, int(rng.integers(2, 9)))):
        X = rng.uniform(0.0, 1.0, (N, 16, 4))
        X[rng.random((N, 16)) < 0.3] = 0.0                # blank patches
        cases.append({"X": X, "seed": int(rng.integers(2 ** 31)),
                      "steps": steps})
    return cases


def integrated_gradients(X, seed, steps, alphas="midpoint", target="x",
                         times_input=True, average=True):
    """Integrated gradients of the case's model from the blank image, per
    patch, (N, n); the keywords make the slips the check names:
    ``alphas`` "right" (k / steps) or "left" ((k - 1) / steps),
    ``target`` "path" (the class predicted at each point of the path),
    ``times_input=False``, ``average=False`` (gradients summed)."""
    import torch

    model = _small_vit(seed)
    with torch.no_grad():
        fixed = model(torch.from_numpy(X))[0].argmax(1)
    k = np.arange(1, steps + 1)
    alpha = {"midpoint": (k - 0.5), "right": k, "left": k - 1}[alphas] / steps
    total = np.zeros_like(X)
    for a in alpha:
        x = torch.from_numpy(a * X).requires_grad_(True)
        logits, _ = model(x)
        t = logits.argmax(1) if target == "path" else fixed
        logits.gather(1, t[:, None]).sum().backward()
        total += x.grad.numpy()
    g = total / steps if average else total
    return (X * g).sum(-1) if times_input else g.sum(-1)


def _gradient_judge(out, X, seed, steps):
    out = returned_array(out, "my_integrated_gradients", "an array (N, n)")
    N, n, d_in = X.shape
    if out.shape == (N, n, d_in):
        raise Wrong("you return one number per value; sum over each "
                    "patch's values, one number per patch", "not-summed")
    if out.shape != (N, n):
        raise Wrong(f"my_integrated_gradients returned shape {out.shape}; "
                    f"expected (N, n) = {(N, n)}, one number per patch",
                    "shape")
    want = integrated_gradients(X, seed, steps)
    if np.allclose(out, want, rtol=1e-6, atol=1e-9):
        return None
    where = f"with {steps} step{'s' * (steps > 1)}"
    import torch

    model = _small_vit(seed)
    x = torch.from_numpy(X).requires_grad_(True)
    logits, _ = model(x)
    logits.gather(1, logits.argmax(1)[:, None]).sum().backward()
    if np.allclose(out, (X * x.grad.numpy()).sum(-1), rtol=1e-6, atol=1e-9):
        raise Wrong(f"{where}: this is input × gradient at x; average the "
                    f"gradient along the path from the blank image to x",
                    "not-integrated")
    slips = [
        ({"alphas": "right"}, "right-endpoints", "the midpoint rule takes "
         "α = (k - 1/2) / steps, not k / steps"),
        ({"alphas": "left"}, "left-endpoints", "the midpoint rule takes "
         "α = (k - 1/2) / steps, not (k - 1) / steps (α = 0 is the blank "
         "image)"),
        ({"target": "path"}, "class-moves", "differentiate the logit of the "
         "class predicted at x at every point of the path, not of the "
         "class predicted there"),
        ({"times_input": False}, "input-missing", "multiply the averaged "
         "gradient by x - x' = x before summing"),
        ({"average": False}, "not-averaged", "the integral over α in "
         "[0, 1] is the mean of the gradients, not their sum"),
    ]
    for kwargs, code, message in slips:
        if np.allclose(out, integrated_gradients(X, seed, steps, **kwargs),
                       rtol=1e-6, atol=1e-9):
            raise Wrong(f"{where}: {message}", code)
    raise Wrong(f"{where} the values differ from integrated gradients by up "
                f"to {np.abs(out - want).max():.3g}",
                "not-integrated-gradients")


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
                    f"{type_name(signs)}", "not-two-signs") from None
    if any(s not in (1, -1) for s in got):
        raise Wrong(f"each sign is +1 or -1, got {got}", "not-a-sign")
    heads = reading_heads(digit_patches())
    want = tuple(_median_rho_sign(a, np.abs(ixg))
                 for a, ixg in (heads["ink"], heads["empty"]))
    if got != want:
        raise Wrong("at least one of the two signs is not what the digits "
                    "give; compute both correlations and explain the one "
                    "you missed", "signs-wrong")
    return None


JUDGES = {
    "ex-misconceptions-same-output": Judge(
        cases=_same_output_cases, judge=_same_output_judge),
    "ex-misconceptions-faithfulness": Judge(
        cases=_faithfulness_cases, judge=_faithfulness_judge),
    "ex-misconceptions-gradient": Judge(
        cases=_gradient_cases, judge=_gradient_judge),
    "ex-misconceptions-signs": Judge(judge=_signs_judge),
}
