"""The judges of :ref:`ch-definition`, Definition: hidden cases, judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import functools
import math

import numpy as np
from selfattention.attention import softmax
from selfattention.data import two_squares
from selfattention.example import running_example
from selfattention_exercises.core import (
    Opaque,
    Wrong,
    expect_shape,
    int_pair,
    returned_array,
    returned_arrays,
    type_name,
)
from selfattention_exercises.definition import GRID, PATCH, moved_image

from . import Judge

QUERY = (0, 1)                  # the top edge of the first square
FAR_EDGE = (4 * GRID + 5, 4 * GRID + 6)     # keys (4, 5) and (4, 6)


def _scores(Q, K):
    return Q @ np.swapaxes(K, -1, -2)                    # (..., n_q, n_k)


def _tempered_cases(rng):
    """Three batches: n_q = n_k, n_q ≠ n_k, and temperatures near 0; each
    with a target largest weight per query."""
    cases = []
    for B, n_q, n_k, d_k, d_v, size, low in [(3, 4, 4, 6, 3, 1, 0.5),
                                             (2, 3, 5, 4, 2, 1, 0.5),
                                             (2, 3, 6, 4, 5, 10, 0.01)]:
        d_k += int(rng.integers(0, 3))
        cases.append({
            "Q": size * rng.standard_normal((B, n_q, d_k)),
            "K": size * rng.standard_normal((B, n_k, d_k)),
            "V": rng.standard_normal((B, n_k, d_v)),
            "tau": rng.uniform(low, 10 * low, (B, n_q)),
            # targets between uniform weights and a single key
            "p": rng.uniform(1 / n_k + 0.05, 0.95, (B, n_q))})
    return cases


def _tempered(Q, K, tau, d_k):
    return softmax(_scores(Q, K) / (math.sqrt(d_k) * tau))


def _tempered_judge(out, Q, K, V, tau, p):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Wrong("the check could not read the results of "
                    "my_tempered_attention and temperatures_for",
                    "unreadable")
    _attention_judge(out[0], Q, K, V, tau)
    _temperatures_judge(out[1], Q, K, p)


def _largest_weight(Q, K, tau):
    """Each query's largest weight at temperatures ``tau`` (B, n_q)."""
    return _tempered(Q, K, tau[..., None], Q.shape[-1]).max(axis=-1)


def _temperatures_judge(out, Q, K, p):
    tau = returned_array(out, "temperatures_for")
    expect_shape(tau, "tau", p.shape, "(B, n_q)",
                 "one temperature per query of each batch element")
    if not (np.isfinite(tau).all() and (tau > 0).all()):
        raise Wrong("temperatures_for returned a temperature that is not a "
                    "positive number; every target lies strictly between "
                    "1/n_k and 1, which some positive τ reaches",
                    "tau-not-positive")
    top = _largest_weight(Q, K, tau)
    if np.allclose(top, p, rtol=0, atol=1e-6):
        return None
    d_k = Q.shape[-1]
    if np.allclose(_largest_weight(Q, K, tau / math.sqrt(d_k)), p, rtol=0,
                   atol=1e-6):
        raise Wrong("your temperatures are √d_k times too large: they reach "
                    "the targets for softmax(Q Kᵀ / τ), but the scores are "
                    "divided by √d_k as well as by τ", "target-sqrt-missing")
    if np.allclose(top, p, rtol=0, atol=1e-3):
        raise Wrong(f"the largest weights miss their targets by up to "
                    f"{np.abs(top - p).max():.1e}; the check wants 1e-6: "
                    f"keep narrowing the temperature until it is that close",
                    "target-not-converged")
    if np.allclose(tau, tau[..., :1]) and not np.allclose(p, p[..., :1]):
        raise Wrong("every query of a batch element gets the same "
                    "temperature, but each has its own target and its own "
                    "scores: solve for one τ per query", "target-one-tau")
    i = np.unravel_index(np.argmax(np.abs(top - p)), p.shape)
    raise Wrong(f"query {i[1]} of batch element {i[0]} wants a largest "
                f"weight of {p[i]:.3f}; at your τ = {tau[i]:.3g} it gets "
                f"{top[i]:.3f}. How does that weight move as τ grows?",
                "target-missed")


def _attention_judge(out, Q, K, V, tau):
    Y, A = returned_arrays(out, 2, "my_tempered_attention should return a "
                           "pair (Y, A): outputs and weights")
    (B, n_q, d_k), n_k, d_v = Q.shape, K.shape[1], V.shape[2]
    expect_shape(A, "A", (B, n_q, n_k), "(B, n_q, n_k)",
                 "one map per query of each batch element")
    expect_shape(Y, "Y", (B, n_q, d_v), "(B, n_q, d_v)")
    if not (np.isfinite(A).all() and np.isfinite(Y).all()):
        big = np.abs(_scores(Q, K) / (math.sqrt(d_k) * tau[..., None])).max()
        raise Wrong(f"NaN or inf in the output: with τ as small as "
                    f"{tau.min():.3f} the scores reach {big:.0f} and exp() "
                    f"overflows. Subtract each row's maximum before exp",
                    "overflow")
    A_ref = _tempered(Q, K, tau[..., None], d_k)
    if np.allclose(A, A_ref):
        if not np.allclose(Y, A_ref @ V):
            raise Wrong("A is right but Y is not: Y = A V, one product per "
                        "batch element", "output-not-AV")
        return None
    if n_q == n_k and np.allclose(A, _tempered(Q, K, tau[..., None, :], d_k)):
        raise Wrong("τ divides the columns (keys), not the rows: τ_i belongs "
                    "to query i, so broadcast it as tau[..., :, None]",
                    "tau-on-keys")
    near_misses = [
        (softmax(_scores(Q, K) * tau[..., None] / math.sqrt(d_k)),
         "you multiplied the scores by τ; a temperature divides them",
         "tau-multiplies"),
        (_tempered(Q, K, 1.0, d_k),
         "the temperatures are ignored: divide query i's scores by τ_i",
         "tau-ignored"),
        (_tempered(Q, K, tau[..., None] / math.sqrt(d_k), d_k),
         "the √d_k is missing: divide the scores by √d_k · τ_i",
         "sqrt-missing"),
    ]
    for wrong, message, code in near_misses:
        if np.allclose(A, wrong):
            raise Wrong(message, code)
    if np.allclose(A.sum(axis=-2), 1) and not np.allclose(A.sum(axis=-1), 1):
        raise Wrong("the columns of A sum to one: the softmax runs over the "
                    "keys, the last axis", "columns-sum-to-one")
    raise Wrong("A differs from softmax(Q Kᵀ / (√d_k τ_i)) row by row; "
                "compare one batch element and one query by hand",
                "not-tempered")


def _limits_cases(rng):
    """Integer queries and keys, so that tied scores tie exactly."""
    cases = []
    for _ in range(2):
        n_q, n_k = int(rng.integers(3, 6)), int(rng.integers(5, 9))
        d_k, d_v = int(rng.integers(2, 4)), int(rng.integers(2, 4))
        Q = rng.integers(-2, 3, (n_q, d_k)).astype(float)
        K = rng.integers(-2, 3, (n_k, d_k)).astype(float)
        Q[0, 0] = 1.0                                    # query 0 is not zero
        best = int(np.argmax(K @ Q[0]))
        K[(best + 1) % n_k] = K[best]       # query 0's best key, twice
        cases.append({"Q": Q, "K": K, "V": rng.standard_normal((n_k, d_v))})
    return cases


def _cold(Q, K, V, pick_one=False):
    S = _scores(Q, K)
    top = S == S.max(axis=-1, keepdims=True)             # exact: integers
    if pick_one:
        top = np.eye(S.shape[-1], dtype=bool)[np.argmax(S, axis=-1)]
    return (top / top.sum(axis=-1, keepdims=True)) @ V


def _limits_judge(out, Q, K, V):
    cold, hot = returned_arrays(out, 2, "my_limits should return a pair "
                                "(Y_cold, Y_hot), the outputs as τ → 0 and "
                                "as τ → ∞")
    n_q, d_v = Q.shape[0], V.shape[1]
    want_cold, want_hot = _cold(Q, K, V), np.tile(V.mean(axis=0), (n_q, 1))
    if hot.shape == (d_v,):
        raise Wrong("Y_hot has one row; give one row per query, (n_q, d_v), "
                    "even if they are all equal", "hot-one-row")
    expect_shape(cold, "Y_cold", (n_q, d_v), "(n_q, d_v)")
    expect_shape(hot, "Y_hot", (n_q, d_v), "(n_q, d_v)")
    if np.allclose(cold, want_hot) and np.allclose(hot, want_cold):
        raise Wrong("the pair is swapped: Y_cold is the limit τ → 0 (sharp "
                    "weights), Y_hot the limit τ → ∞ (flat weights)",
                    "pair-swapped")
    if not np.allclose(hot, want_hot):
        raise Wrong("Y_hot is not the limit τ → ∞: the weights flatten to "
                    "1/n_k for every key, whatever the query",
                    "hot-not-the-limit")
    if np.allclose(cold, want_cold):
        return None
    if np.allclose(cold, _cold(Q, K, V, pick_one=True)):
        S = _scores(Q, K)
        i = int(np.argmax((S == S.max(axis=1, keepdims=True)).sum(axis=1)))
        tied = np.flatnonzero(S[i] == S[i].max()).tolist()
        raise Wrong(f"query {i} has keys {tied} tied for its largest score; "
                    f"tied keys keep equal weights at every τ, so the limit "
                    f"averages their values instead of taking one",
                    "ties-not-averaged")
    raise Wrong("Y_cold is not the limit τ → 0: only the keys with the "
                "largest score of a row keep any weight", "cold-not-the-limit")


@functools.lru_cache(maxsize=None)
def _cross_maps(down: int, right: int) -> np.ndarray:
    """(64, 64) cross-attention of the image over its moved copy."""
    from selfattention.patches import center, patchify

    ex = running_example()
    img1, img2 = moved_image((down, right))
    X1, X2 = center(patchify(img1, PATCH)), center(patchify(img2, PATCH))
    return softmax((X1 @ ex.W_q) @ (X2 @ ex.W_k).T / math.sqrt(X1.shape[1]))


def _clear_queries() -> list[tuple[int, int]]:
    """Patches whose strongest key beats the second by 0.005 or more."""
    top2 = np.sort(_cross_maps(0, 0), axis=1)[:, -2:]
    return [divmod(i, GRID) for i in np.flatnonzero(top2[:, 1] - top2[:, 0]
                                                    >= 0.005)]


def _moved_cases(rng):
    queries = _clear_queries()
    picks = rng.choice(len(queries), size=3, replace=False)
    return [{"query": tuple(int(v) for v in queries[i]),
             "shift": tuple(int(v) for v in rng.integers(1, GRID, 2))}
            for i in picks]


def _moved_judge(out, query, shift):
    r, c = int_pair(out, "predict_moved should return a pair (row, col)")
    q = query[0] * GRID + query[1]
    best = divmod(int(np.argmax(_cross_maps(*shift)[q])), GRID)
    if (r, c) == best:
        return None
    home = divmod(int(np.argmax(_cross_maps(0, 0)[q])), GRID)
    if (r, c) == home:
        raise Wrong(f"for query {query} and shift {shift}: {home} is where "
                    f"the query attends in its own image; in the moved copy "
                    f"that content sits elsewhere", "home-patch")
    if (r, c) == ((home[0] - shift[0]) % GRID, (home[1] - shift[1]) % GRID):
        raise Wrong(f"for shift {shift} you moved the target up and left; "
                    f"np.roll moves the content down and right",
                    "roll-backwards")
    if (r, c) == (home[0] + shift[0], home[1] + shift[1]):
        raise Wrong(f"for query {query} and shift {shift} the patch {(r, c)} "
                    f"is off the 8 × 8 grid: np.roll is cyclic, so content "
                    f"that leaves one side comes back on the other",
                    "roll-not-cyclic")
    raise Wrong(f"for query {query} and shift {shift}, patch {(r, c)} is not "
                f"the one the query attends to most", "not-the-strongest")


@functools.lru_cache(maxsize=None)
def _expected_weights(noise: float) -> tuple:
    """Mean and spread of (far, self) over 2,000 images at this noise."""
    base = two_squares(np.random.default_rng(0), noise=0.0)     # (32, 32)
    imgs = base + noise * np.random.default_rng(2024).standard_normal(
        (2000, 32, 32))
    X = imgs.reshape(-1, GRID, PATCH, GRID, PATCH).swapaxes(2, 3)
    X = X.reshape(-1, GRID * GRID, PATCH * PATCH)          # (2000, 64, 16)
    X = X - X.mean(axis=-1, keepdims=True)
    q = QUERY[0] * GRID + QUERY[1]
    w = softmax(np.einsum("nd,nkd->nk", X[:, q], X))      # (2000, 64)
    w = np.stack([w[:, list(FAR_EDGE)].sum(axis=1), w[:, q]], axis=1)
    return tuple(w.mean(axis=0)), tuple(w.std(axis=0))


def _weights_cases(rng):
    return [{"low": round(float(rng.uniform(0.0, 0.1)), 3),
             "high": round(float(rng.uniform(0.4, 0.6)), 3),
             "seed": int(rng.integers(0, 2 ** 31))}]


def _pair(out, noise):
    try:
        if isinstance(out, (str, Opaque)):
            raise TypeError
        far, own = (float(v) for v in out)
    except (TypeError, ValueError):
        raise Wrong(f"edge_weights should return two numbers (far, self), "
                    f"got {type_name(out)} at noise {noise}",
                    "not-two-numbers") from None
    if not (0 <= far <= 1 and 0 <= own <= 1 and far + own <= 1 + 1e-9):
        raise Wrong(f"at noise {noise} you return ({far:.3g}, {own:.3g}); "
                    f"both are attention weights of one row: between 0 and 1 "
                    f"and summing to at most 1", "not-weights")
    return far, own


def _weights_judge(out, low, high, seed):
    if not (isinstance(out, tuple) and len(out) == 4):
        raise Wrong("the check could not read the results of edge_weights",
                    "unreadable")
    (f_low, s_low), (f_high, s_high), again, other = [
        _pair(o, n) for o, n in zip(out, (low, high, low, high))]
    if again != (f_low, s_low):
        raise Wrong(f"two calls with noise {low} and seed {seed} give "
                    f"different numbers: draw every random number from "
                    f"np.random.default_rng(seed)", "not-seeded")
    if other == (f_high, s_high):
        raise Wrong(f"seeds {seed} and {seed + 1} give the same numbers at "
                    f"noise {high}: the images must come from the seed",
                    "seed-ignored")
    for noise, got in [(low, (f_low, s_low)), (high, (f_high, s_high))]:
        (far, own), (sd_far, sd_own) = _expected_weights(noise)
        if np.allclose(got, (own, far), atol=0.02) and abs(far - own) > 0.1:
            raise Wrong(f"at noise {noise} the pair looks swapped: return "
                        f"(far edge, self) in that order", "pair-swapped")
        tol = [0.02 + 4 * sd / math.sqrt(200) for sd in (sd_far, sd_own)]
        if abs(got[0] - far) > tol[0] or abs(got[1] - own) > tol[1]:
            raise Wrong(
                f"at noise {noise} you measure far {got[0]:.3f} and self "
                f"{got[1]:.3f}, further from the mean over many images than "
                f"200 images allow. Use the chapter's scores (x_i · x_j of "
                f"the centred patches), keys (4, 5) + (4, 6) for the far "
                f"edge, and average over at least 200 images",
                        "off-the-expected")
    return None


JUDGES = {
    "ex-definition-tempered": Judge(
        cases=_tempered_cases, judge=_tempered_judge),
    "ex-definition-limits": Judge(cases=_limits_cases, judge=_limits_judge),
    "ex-definition-moved": Judge(cases=_moved_cases, judge=_moved_judge),
    "ex-definition-noise": Judge(cases=_weights_cases, judge=_weights_judge),
}
