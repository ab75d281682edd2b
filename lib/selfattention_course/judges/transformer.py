"""The judges of :ref:`ch-transformer`, the vision transformer: hidden cases,
judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from selfattention_exercises.core import (
    Wrong,
    expect_shape,
    returned_array,
    returned_arrays,
    type_name,
)
from selfattention_exercises.transformer import SHIFT_MODELS, SHIFTS

from . import Judge


def block_parameters(d, d_mlp):
    """What a pre-LN block holds: 2 LayerNorms, W_QKV, W_O, a 2-layer MLP."""
    return 4 * d * d + 2 * d * d_mlp + 9 * d + d_mlp


def block_macs(n, d, d_mlp):
    """Multiply-adds of one block on n tokens (matrix products only)."""
    return 4 * n * d * d + 2 * n * n * d + 2 * n * d * d_mlp


def _counts_cases(rng):
    cases = [{"n": 17, "d": 32, "h": 4, "d_mlp": 64, "h_other": 2}]
    for _ in range(2):
        h, h_other = (int(x) for x in rng.choice([1, 2, 4, 8], 2,
                                                  replace=False))
        d = 8 * int(rng.integers(1, 13))
        cases.append({"n": int(rng.integers(2, 300)), "d": d, "h": h,
                      "d_mlp": d * int(rng.integers(2, 5)),
                      "h_other": h_other})
    return cases


def _pair_of_numbers(out) -> tuple[float, float]:
    arr = returned_array(out, "block_counts",
                         "a pair (parameters, multiply-adds)")
    if arr.shape != (2,):
        raise Wrong(f"block_counts should return a pair (parameters, "
                    f"multiply-adds), got {arr.size} number(s)", "not-a-pair")
    return float(arr[0]), float(arr[1])


def _counts_judge(out, n, d, h, d_mlp, h_other):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Wrong("block_counts could not be run on two head counts",
                    "unreadable")
    (p, m), (p2, m2) = _pair_of_numbers(out[0]), _pair_of_numbers(out[1])
    P, M = block_parameters(d, d_mlp), block_macs(n, d, d_mlp)
    case = f"for n={n}, d={d}, h={h}, d_mlp={d_mlp}"
    if (p, m) != (p2, m2) and (p == P or p2 == P or m == M or m2 == M):
        raise Wrong(f"your counts change with h ({h} -> {h_other}) {case}; "
                    f"h heads of width d/h hold and cost what one head of "
                    f"width d does", "counts-depend-on-h")
    if p != P:
        missing = {4 * d: ("the two LayerNorms (a scale and a shift of "
                           "width d each)", "layernorms-missing"),
                   5 * d + d_mlp: ("the biases (every Linear layer has "
                                   "one)", "biases-missing"),
                   d * d + d: ("W_O and its bias",
                               "output-projection-missing"),
                   d * d_mlp + d_mlp: ("the MLP's first layer",
                                       "mlp-layer-missing"),
                   d_mlp * d + d: ("the MLP's second layer",
                                   "mlp-layer-missing"),
                   2 * d * d + 2 * d: ("two of the projections W_Q, W_K, "
                                       "W_V", "projections-missing")}
        what, code = missing.get(P - p, (None, None))
        if what:
            raise Wrong(f"{case} the parameter count is {p:g}, it leaves "
                        f"out {what}", code)
        raise Wrong(f"{case} the parameter count is {p:g}, "
                    f"{'more' if p > P else 'fewer'} than the block holds",
                    "not-the-params")
    if m != M:
        if m == 2 * M:
            raise Wrong(f"{case} you counted {m:g}, twice the multiply-adds:"
                        f" a multiply-add is one operation here, not two",
                        "macs-doubled")
        missing = {2 * n * n * d: ("both products with n x n entries (Q "
                                   "Kᵀ and A V)", "products-missing"),
                   n * n * d: ("one of the products with n x n entries",
                               "one-product-counted"),
                   2 * n * d * d_mlp: ("the MLP", "mlp-missing"),
                   n * d * d: ("the output projection W_O",
                               "output-projection-missing"),
                   3 * n * d * d: ("the projections to Q, K and V",
                                   "projections-missing")}
        what, code = missing.get(M - m, (None, None))
        if what:
            raise Wrong(f"{case} the multiply-adds come to {m:g}, which "
                        f"leaves out {what}", code)
        raise Wrong(f"{case} the multiply-adds come to {m:g}, "
                    f"{'more' if m > M else 'fewer'} than the block does",
                    "not-the-macs")


def _stochastic(rng, h, m):
    """h positive (m, m) maps whose rows sum to one."""
    A = rng.random((h, m, m)) ** 3 + 1e-3
    return A / A.sum(-1, keepdims=True)


def _limit_cases(rng):
    """Positive maps of one layer; in one case the head mean follows a
    cycle of the tokens, so that its second eigenvalue is complex."""
    h, m = int(rng.integers(2, 5)), int(rng.integers(4, 10))
    cases = [{"maps": _stochastic(rng, h, m),
              "residual": float(np.round(rng.uniform(0.2, 0.8), 2))}]
    h, m = int(rng.integers(2, 4)), int(rng.integers(5, 9))
    cycle = np.roll(np.eye(m), 1, axis=1)         # token i reads i + 1
    c = rng.uniform(0.6, 0.8, (h, 1, 1))
    cases.append({"maps": c * cycle + (1 - c) * _stochastic(rng, h, m),
                  "residual": float(np.round(rng.uniform(0.1, 0.5), 2))})
    cases.append({"maps": _stochastic(rng, 1, int(rng.integers(3, 7))),
                  "residual": 0.0})
    cases.append({"maps": _stochastic(rng, int(rng.integers(2, 5)), 9),
                  "residual": 0.9})
    return cases


def _layer(maps, residual):
    """Â: the head mean mixed with the identity, rows renormalised."""
    A = residual * np.eye(maps.shape[-1]) + (1 - residual) * maps.mean(0)
    return A / A.sum(-1, keepdims=True)


def _stationary(A):
    """The row π with π A = π and entries summing to one."""
    m = A.shape[-1]
    lhs = np.vstack([A.T - np.eye(m), np.ones((1, m))])
    rhs = np.zeros(m + 1)
    rhs[-1] = 1.0
    return np.linalg.lstsq(lhs, rhs, rcond=None)[0]


def _second(A):
    """The eigenvalue of A that is largest in modulus after the 1."""
    mu = np.linalg.eigvals(A)
    mu = np.delete(mu, np.argmin(np.abs(mu - 1)))
    return mu[np.argmax(np.abs(mu))]


def _limit_judge(out, maps, residual):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Wrong("rollout_limit should return a pair (limit, rate)",
                    "not-a-pair")
    h, m, _ = maps.shape
    A = _layer(maps, residual)
    pi, rho = _stationary(A), float(np.abs(_second(A)))
    where = f"for h = {h}, 1+n = {m}, residual = {residual}"
    limit = returned_array(out[0], "rollout_limit",
                           "an array (the limit) first")
    expect_shape(limit, "the limit", (m,), "(1+n,)",
                 "every row of deep rollout approaches the same row; "
                 "return that one row")
    if not np.allclose(limit, pi, rtol=1e-6, atol=1e-9):
        _wrong_limit(limit, maps, residual, A, where)
    if "complex" in type_name(out[1]):
        raise Wrong(f"{where} your rate is a complex number: the distance "
                    f"shrinks by the modulus of the eigenvalue",
                    "rate-not-modulus")
    rate = returned_array(out[1], "rollout_limit", "a number (the rate) "
                                                   "second")
    if rate.shape != ():
        raise Wrong(f"the rate should be one number, got an array of shape "
                    f"{rate.shape}", "shape")
    rate = float(rate)
    if not np.isclose(rate, rho, rtol=1e-6, atol=1e-12):
        _wrong_rate(rate, rho, maps, residual, A, where)
    return None


def _wrong_limit(limit, maps, residual, A, where):
    m = A.shape[-1]
    if np.allclose(limit, 1 / m, atol=1e-9):
        raise Wrong(f"{where} your limit is the uniform row: Â 1 = 1 says "
                    f"that the rows of Â sum to one (the eigenvector on the "
                    f"right); the rows of Âᴸ approach the eigenvector on "
                    f"the left", "right-eigenvector")
    pi = _stationary(A)
    total = limit.sum()
    if abs(total) > 1e-12 and np.allclose(limit / total, pi, atol=1e-9):
        raise Wrong(f"{where} your limit points the right way but sums to "
                    f"{total:.4g}: it is a row of rollout, a distribution "
                    f"over the tokens", "not-normalised")
    if maps.shape[0] > 1 and np.allclose(
            limit, _stationary(_layer(maps[:1], residual)), atol=1e-9):
        raise Wrong(f"{where} your limit comes from the first head only: "
                    f"rollout averages the heads", "first-head-only")
    R = np.eye(m)
    for depth in range(1, 65):
        R = A @ R
        if np.isclose(R, limit, rtol=0, atol=1e-9).all(axis=1).any():
            raise Wrong(f"{where} your limit is a row of the rollout of "
                        f"{depth} layers; the limit is where the rows go "
                        f"as the depth grows without end", "not-converged")
    raise Wrong(f"{where} your limit is not the row that the rows of Âᴸ "
                f"approach", "not-the-limit")


def _wrong_rate(rate, rho, maps, residual, A, where):
    h = maps.shape[0]
    mean = maps.mean(0)
    lam = _second(mean)
    mu = _second(A)
    guesses = []                      # (value, message, code); first wins
    if abs(mu.real) != abs(mu):
        guesses.append((mu.real, "you took the real part of the second "
                                 "eigenvalue; the distance shrinks by its "
                                 "modulus", "rate-not-modulus"))
    if residual > 0:
        guesses.append((abs(lam), "that is the rate without the residual "
                                  "path: the layer's matrix is Â = αI + "
                                  "(1 − α)·(head mean), and its "
                                  "eigenvalues move with α",
                        "identity-missing"))
        guesses.append((residual + (1 - residual) * abs(lam),
                        "mix first, then take the modulus: |α + (1 − α)λ| "
                        "is not α + (1 − α)|λ| when λ is negative or "
                        "complex", "modulus-before-mixing"))
    if h > 1:
        summed = residual / ((1 - residual) * h + residual)
        guesses.append((float(np.abs(_second(
            summed * np.eye(A.shape[-1]) + (1 - summed) * mean))),
            "the heads are summed, not averaged, before the mix with the "
            "identity", "heads-summed"))
        guesses.append((float(np.abs(_second(_layer(maps[:1], residual)))),
                        "that rate comes from the first head only: rollout "
                        "averages the heads", "first-head-only"))
    guesses.append((1.0, "1 is the eigenvalue of the limit itself; the "
                         "distance to the limit shrinks by the next one",
                    "largest-eigenvalue"))
    for value, message, code in guesses:
        if not np.isclose(value, rho, rtol=1e-6) and \
                np.isclose(rate, value, rtol=1e-6, atol=1e-12):
            raise Wrong(f"{where} your rate is {rate:.6g}: {message}", code)
    if abs(rate - rho) < 0.02:
        raise Wrong(f"{where} your rate {rate:.6g} is close to the rate but "
                    f"not within one part in a million: a finite stack of "
                    f"layers only estimates it; derive it from Â",
                    "rate-estimated")
    raise Wrong(f"{where} your rate is {rate:.6g}, not the factor by which "
                f"the distance to the limit shrinks per layer",
                "not-the-rate")


#: Bounds that hold for the tiny ViT without position embeddings over
#: training seeds (15 epochs): accuracy and each head's distance in pixels.
NO_POSITION_ACCURACY = (0.55, 0.82)
WITH_POSITION_ACCURACY = 0.88
DISTANCE = (3.0, 5.0)


def _no_position_cases(rng):
    # The public draw (seed 108) gives training seed 0, the one the
    # chapter's solution reports. The grader draws none: the exercise's
    # points are the written part's.
    return [{"seed": int(rng.integers(0, 10))}]


def _no_position_judge(out, seed):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Wrong("distance_without_position should return a pair "
                    "(accuracy, distances)", "type")
    accuracy = returned_array(out[0], "distance_without_position",
                              "an accuracy first")
    dist = returned_array(out[1], "distance_without_position",
                          "distances (L, h) second")
    if accuracy.shape != () or not 0 <= accuracy <= 1:
        raise Wrong(f"the accuracy should be one share in [0, 1], got "
                    f"{np.round(accuracy, 3).tolist()}", "not-a-share")
    expect_shape(dist, "the distances", (2, 4), "(L, h)",
                 "one per layer and head of the chapter's model")
    if accuracy >= WITH_POSITION_ACCURACY:
        raise Wrong(f"for seed {seed} the test accuracy is {accuracy:.1%}, "
                    f"as high as with position embeddings: train with "
                    f"position=False", "position-used")
    lo, hi = NO_POSITION_ACCURACY
    if not lo <= accuracy <= hi:
        raise Wrong(f"for seed {seed} the test accuracy is {accuracy:.1%}; "
                    f"without position embeddings the chapter's model "
                    f"trained for 15 epochs reaches {lo:.0%} to {hi:.0%}",
                    "off-the-expected")
    lo, hi = DISTANCE
    if not np.all((lo <= dist) & (dist <= hi)):
        raise Wrong(f"for seed {seed} the distances run from "
                    f"{dist.min():.2f} to {dist.max():.2f} px; measure them "
                    f"in pixels of the 8 x 8 image over the test images (a "
                    f"patch is 2 px; uniform attention gives 4.02 px)",
                    "distances-not-pixels")


#: How many test digits a case of 6.4 moves.
SHIFT_DIGITS = 5
#: The faint noise each digit of a case of 6.4 carries: a value drawn
#: between 0 and this, added to every pixel (the ink runs from 0 to 1).
SHIFT_NOISE = 0.05


def _shift_cases(rng):
    # 5 of the 1,000 test digits, each with noise of its own on every
    # pixel: a table of the test digits measured at home cannot answer
    # them (the models see the noise), and 200 draws still judge in a test.
    images, labels = _test_digits()
    picked = np.sort(rng.choice(len(images), SHIFT_DIGITS, replace=False))
    noisy = images[picked] + rng.uniform(0, SHIFT_NOISE,
                                         (SHIFT_DIGITS,) + images.shape[1:])
    return [{"images": noisy, "labels": labels[picked].astype(np.int64)}]


def _moved(images, s, how="zero"):
    """Images (N, 28, 28) moved by s pixels: right and down with zeros
    filling in (``zero``), or a typical slip: left and up (``back``),
    rolled round (``wrap``), one axis only (``right``, ``down``), or by s
    patches of 4 pixels (``patches``)."""
    H = images.shape[1]
    if how == "wrap":
        return np.roll(images, (s, s), axis=(1, 2))
    if how == "patches":
        s *= 4
    out = np.zeros_like(images)
    if how in ("zero", "patches"):
        out[:, s:, s:] = images[:, :H - s, :H - s]
    elif how == "back":
        out[:, :H - s, :H - s] = images[:, s:, s:]
    elif how == "right":
        out[:, :, s:] = images[:, :, :H - s]
    else:                                         # down
        out[:, s:, :] = images[:, :H - s, :]
    return out


@dataclass(frozen=True)
class _Measured:
    accuracy: np.ndarray        # (S,) share of the digits right
    distance: np.ndarray        # (S, L) px, the heads' mean
    raw: np.ndarray             # (S, L) px, weights not renormalised
    pooled: np.ndarray          # (S, L) px, of the heads' mean map


@functools.lru_cache(maxsize=1)
def _test_digits():
    from selfattention_models import mnist

    split = mnist.mnist_split()
    return split.images_test, split.y_test


@functools.lru_cache(maxsize=len(SHIFT_MODELS))
def _shift_model(name):
    from selfattention_models import mnist

    return mnist.load_vit(name)


def _shift_reference(name, images, labels, how="zero"):
    """The library's own measurement of 6.4 on the digits ``images``
    (N, 28, 28) of classes ``labels``, moved as ``how`` says."""
    images = np.ascontiguousarray(images, dtype=float)
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    return _measured_shift(name, images.tobytes(), labels.tobytes(), how)


@functools.lru_cache(maxsize=16)
def _measured_shift(name, image_bytes, label_bytes, how):
    from selfattention import interpret, patches, vit
    from selfattention.torch_bridge import torch_threads

    labels = np.frombuffer(label_bytes, dtype=np.int64)
    images = np.frombuffer(image_bytes, dtype=float).reshape(
        len(labels), 28, 28)
    S, N = len(SHIFTS), len(labels)
    moved = np.concatenate([_moved(images, s, how) for s in SHIFTS])
    with torch_threads(1):              # no waiting at barriers
        logits, maps = vit.forward(_shift_model(name),
                                   patches.patchify(moved, 4))
    right = logits.argmax(1).reshape(S, N) == labels
    P = maps[:, :, :, 1:, 1:]                     # (S·N, L, h, n, n)
    D = interpret.patch_distances((7, 7), 4)      # (n, n) px
    weighted = np.einsum("...qk,qk->...q", P, D)  # (S·N, L, h, n)

    def per_shift(x):                             # (S·N, L, h, n) -> (S, L)
        return x.reshape(S, N, *x.shape[1:]).mean(axis=(1, 3, 4))
    pooled = P.mean(axis=2, keepdims=True)        # (S·N, L, 1, n, n)
    return _Measured(right.mean(1), per_shift(weighted / P.sum(-1)),
                     per_shift(weighted),
                     per_shift(np.einsum("...qk,qk->...q", pooled, D)
                               / pooled.sum(-1)))


#: The slips whose numbers 6.4's judge recognises: how the digits were
#: moved, the code and what to say.
SHIFT_SLIPS = (
    ("back", "shifted-the-wrong-way", "your numbers are those of digits "
     "moved left and up; move them right and down (row r + s, column "
     "c + s of the moved digit is row r, column c of the original)"),
    ("wrap", "wrapped-around", "your numbers are those of digits rolled "
     "round, the pixels that leave on the right and bottom coming back on "
     "the left and top; fill the uncovered rows and columns with zeros"),
    ("right", "one-axis-only", "your numbers are those of digits moved "
     "right only; move them down by s pixels as well"),
    ("down", "one-axis-only", "your numbers are those of digits moved down "
     "only; move them right by s pixels as well"),
    ("patches", "shifted-by-patches", "your numbers are those of digits "
     "moved by s patches (4s pixels); move them by s pixels"),
)


def _shift_judge(out, images, labels):
    if not (isinstance(out, tuple) and len(out) == len(SHIFT_MODELS)):
        raise Wrong("shift_test could not be run on both models", "type")
    for name, answer in zip(SHIFT_MODELS, out):
        accuracy, distance = returned_arrays(
            answer, 2, "shift_test should return a pair (accuracy, "
                       "distances)")
        S = len(SHIFTS)
        expect_shape(accuracy, "the accuracy", (S,), "(S,)",
                     "one share of the digits per shift s = 0, ..., 4")
        if distance.shape == (S, 4, 4):
            raise Wrong("the distances have shape (S, L, h) = (5, 4, 4): "
                        "give each layer's distance, the mean over its "
                        "heads, (S, L) = (5, 4)", "shape")
        expect_shape(distance, "the distances", (S, 4), "(S, L)",
                     "one per shift and layer, the mean over its heads")
        if not np.all((0 <= accuracy) & (accuracy <= 1)):
            raise Wrong(f"the accuracy should be a share of the digits in "
                        f"[0, 1], got {np.round(accuracy, 3).tolist()}",
                        "not-a-share")
        ref = _shift_reference(name, images, labels)
        if _close(accuracy, distance, ref):
            continue
        _wrong_shift(name, images, labels, accuracy, distance, ref)


#: How far a share of the digits may lie from the judge's: the shares are
#: multiples of 1/5, and one computed in float32 (a torch mean of the
#: hits) is 0.6 only to within 2.4e-8.
SHIFT_ACCURACY_ATOL = 1e-6


def _close(accuracy, distance, ref, scale=1.0):
    return (np.allclose(accuracy, ref.accuracy, rtol=0,
                        atol=SHIFT_ACCURACY_ATOL)
            and np.allclose(distance, scale * ref.distance, rtol=1e-6,
                            atol=1e-9))


def _wrong_shift(name, images, labels, accuracy, distance, ref):
    where = (f"for {name} on the digits of classes "
             f"{[int(k) for k in labels]}")
    same_accuracy = np.allclose(accuracy, ref.accuracy, rtol=0,
                                atol=SHIFT_ACCURACY_ATOL)
    same_distance = np.allclose(distance, ref.distance, rtol=1e-6,
                                atol=1e-9)
    if same_distance and np.allclose(accuracy, ref.accuracy[0], rtol=0,
                                     atol=SHIFT_ACCURACY_ATOL):
        raise Wrong(f"{where} your accuracy is {ref.accuracy[0]:.1%} at "
                    f"every shift, that of the digits as they are: score "
                    f"the moved digits", "accuracy-unshifted")
    if same_accuracy:                             # the distances' slips
        for wrong, message, code in (
                (ref.distance / 4, "your distances are in patches; give "
                 "them in pixels (a patch is 4 px)", "distances-in-patches"),
                (ref.raw, "your distances weigh the patches with weights "
                 "that do not sum to one (the rest of each row goes to the "
                 "class token): renormalise each query's weights on the "
                 "patches, as interpret.mean_attention_distance does",
                 "not-renormalised"),
                (ref.pooled, "your distances are those of each layer's map "
                 "averaged over the heads; measure each head's distance "
                 "(interpret.mean_attention_distance) and then take the "
                 "mean over the heads", "heads-averaged-first"),
                (ref.distance[:1], "your distances are those of the digits "
                 "as they are, at every shift: measure the moved digits",
                 "distances-unshifted")):
            if np.allclose(distance, wrong, rtol=1e-6, atol=1e-9):
                raise Wrong(f"{where} {message}", code)
    for how, code, message in SHIFT_SLIPS:
        if _close(accuracy, distance,
                  _shift_reference(name, images, labels, how)):
            raise Wrong(f"{where} {message}", code)
    s = int(np.argmax(~np.isclose(accuracy, ref.accuracy, rtol=0,
                                  atol=SHIFT_ACCURACY_ATOL)
                      | ~np.isclose(distance, ref.distance, rtol=1e-6,
                                    atol=1e-9).all(axis=1)))
    raise Wrong(f"{where} at s = {SHIFTS[s]} px your accuracy is "
                f"{accuracy[s]:.1%} and your distances "
                f"{np.round(distance[s], 2).tolist()} px; the digits moved "
                f"right and down with zeros filling in do not give these",
                "not-the-measurement")


JUDGES = {
    "ex-transformer-counts": Judge(cases=_counts_cases, judge=_counts_judge),
    "ex-transformer-rollout-limit": Judge(
        cases=_limit_cases, judge=_limit_judge),
    "ex-transformer-no-position": Judge(
        cases=_no_position_cases, judge=_no_position_judge),
    "ex-transformer-shift": Judge(cases=_shift_cases, judge=_shift_judge),
}
