"""The judges of :ref:`ch-scaling`, Scaling by √d_k: hidden cases, judges and
the reference helpers they use (see
:mod:`selfattention_course.judges`)."""

from __future__ import annotations

import functools
import math

import numpy as np
from selfattention.attention import softmax
from selfattention_exercises.core import (
    NotDone,
    Opaque,
    Wrong,
    expect_shape,
    returned_array,
    type_name,
)
from selfattention_exercises.scaling import (
    WIDE_GRADIENT,
    WIDE_ROW,
    wide_gradient_case,
    wide_row,
)
from selfattention.patches import digit_patch_tokens
from selfattention.scaling import jacobian_norm as _built_norm

from . import Judge


def _as_number(value, what: str) -> float:
    try:
        if isinstance(value, (str, Opaque)) or value is None:
            raise TypeError
        out = float(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise Wrong(f"{what} should be one number, got "
                    f"{type_name(value)}", "not-a-number") from None
    if not math.isfinite(out):
        raise Wrong(f"{what} returned {out}; expected a finite number",
                    "not-finite")
    return out


def _scale_cases(rng):
    fixed = [(16, 1.0, 0.0), (64, 2.0, 1.0), (9, 0.5, -0.5),
             (256, 3.0, 0.2)]
    drawn = [(int(rng.integers(2, 1025)), float(rng.uniform(0.2, 4.0)),
              float(rng.uniform(-2.0, 2.0))) for _ in range(2)]
    return [{"d_k": d_k, "sigma": sigma, "mu": mu}
            for d_k, sigma, mu in fixed + drawn]


def _scale_factors(d_k, sigma, mu):
    """(c_all, c_row): Var(q·k) = d_k σ² (σ² + 2μ²) over all pairs; one
    query's scores spread by E_q Var_k(q·k | q) = d_k σ² (σ² + μ²)."""
    return (1 / math.sqrt(d_k * sigma ** 2 * (sigma ** 2 + 2 * mu ** 2)),
            1 / math.sqrt(d_k * sigma ** 2 * (sigma ** 2 + mu ** 2)))


def _scale_judge(got, d_k, sigma, mu):
    if isinstance(got, (str, Opaque)) or not hasattr(got, "__len__") \
            or len(got) != 2:
        raise Wrong(f"my_scales should return a pair (c_all, c_row), got "
                    f"{type_name(got)}", "not-a-pair")
    c_all = _as_number(got[0], "c_all of my_scales")
    c_row = _as_number(got[1], "c_row of my_scales")
    want_all, want_row = _scale_factors(d_k, sigma, mu)
    where = f"for d_k = {d_k}, σ = {sigma:.4g}, μ = {mu:.4g}"

    def near(x, y):
        return math.isclose(x, y, rel_tol=1e-9)

    if near(c_all, want_all) and near(c_row, want_row):
        return None
    if near(c_all, want_row) and near(c_row, want_all) and mu != 0:
        raise Wrong(f"{where}: the two factors are swapped: the spread over "
                    f"all pairs is the larger one", "swapped")
    no_mean = 1 / (sigma ** 2 * math.sqrt(d_k))
    if mu != 0 and (near(c_all, no_mean) or near(c_row, no_mean)):
        raise Wrong(f"{where}: your factor ignores the mean μ. With a mean, "
                    f"q_i k_i has E[(q_i k_i)²] = (σ² + μ²)² and mean μ²",
                    "mean-ignored")
    for c, want, name in ((c_all, want_all, "c_all"),
                          (c_row, want_row, "c_row")):
        if near(c, want):
            continue
        if near(c, want ** 2):
            raise Wrong(f"{where}: {name} divides by a variance; to get unit "
                        f"variance divide by its square root",
                        "divides-by-variance")
        if near(c, 1 / want):
            raise Wrong(f"{where}: {name} is the standard deviation itself; "
                        f"the factor is its inverse", "not-inverted")
    if near(c_all, 1 / (math.sqrt(d_k) * (sigma ** 2 + mu ** 2))):
        raise Wrong(f"{where}: c_all takes E[(q_i k_i)²] = (σ² + μ²)² as the "
                    f"variance of one product; subtract its squared mean μ⁴",
                    "second-moment")
    if mu != 0 and near(c_all, want_row):
        raise Wrong(f"{where}: c_all is the factor of one query's row. Over "
                    f"all pairs the scores also differ from query to query: "
                    f"each row is shifted by its own mean μ Σ q_i",
                    "row-for-all")
    if mu != 0 and near(c_row, want_all):
        raise Wrong(f"{where}: c_row is the factor over all pairs. For one "
                    f"query, μ Σ q_i is the same for every key and does not "
                    f"spread its scores", "all-for-row")
    for c, want, name in ((c_all, want_all, "c_all"),
                          (c_row, want_row, "c_row")):
        if near(c, want):
            continue
        sd = c / want
        if abs(sd - 1) < 0.01:
            raise Wrong(f"{where}: {name} = {c:.6g} gives standard deviation "
                        f"{sd:.6g}, close to 1 but not 1: a factor measured "
                        f"on samples is off by their noise, derive it from "
                        f"d_k, σ and μ", "not-unit-variance")
        raise Wrong(f"{where}: {name} = {c:.4g} gives the scores standard "
                    f"deviation {sd:.3g}, not 1", "not-unit-variance")
    return None


def _norm_cases(rng):
    """Small rows (uniform, one-hot, saturated), then one row too wide for
    its Jacobian to be built: "without building it" holds by cost."""
    n = int(rng.integers(5, 9))
    rows = softmax(3 * rng.standard_normal((4, 3, n)))
    rows[0, 0] = 1 / n                                   # a uniform row
    rows[0, 1] = np.eye(n)[int(rng.integers(n))]         # a one-hot row
    return [{"P": rows},
            {"P": softmax(40 * rng.standard_normal((200, n)))},  # saturated
            {"n": WIDE_ROW, "seed": int(rng.integers(0, 2 ** 31))}]


def jacobian_norm(P):
    """‖diag(p) − p pᵀ‖_F of each row, in closed form (the library's
    version builds the matrices, which the wide row does not allow)."""
    if P.shape[-1] <= 64:
        return _built_norm(P)
    sq = (P ** 2).sum(axis=-1)
    return np.sqrt(np.clip(sq - 2 * (P ** 3).sum(axis=-1) + sq ** 2, 0, None))


def _norm_judge(got, P=None, n=None, seed=None):
    if P is None:
        P = wide_row(n, seed)
    got = returned_array(got, "my_jacobian_norm")
    ref = jacobian_norm(P)
    if got.shape == () and P.ndim > 1:
        raise Wrong(f"you return one number for weights of shape {P.shape}; "
                    f"return one norm per row, shape {ref.shape} (average "
                    f"afterwards if you need to)", "one-number")
    if got.shape != ref.shape:
        raise Wrong(f"for weights of shape {P.shape} you return shape "
                    f"{got.shape}; expected one norm per row, {ref.shape}",
                    "shape")
    if np.isnan(got).any():
        row = tuple(int(i) for i in np.unravel_index(
            int(np.argmax(np.isnan(got))), got.shape))
        raise Wrong(f"NaN for row {row}, whose largest weight is "
                    f"{P[row].max():.6f}: for a nearly one-hot row the sum "
                    f"under the square root is 0 up to rounding, and can come "
                    f"out slightly negative. Clip it at 0 first", "nan")
    if np.allclose(got, ref, rtol=1e-6, atol=1e-7):    # √ of rounding
        return None
    if np.allclose(got, ref ** 2):
        raise Wrong("these are the squared norms; take the square root",
                    "squared")
    diag_only = np.sqrt((P ** 2 * (1 - P) ** 2).sum(-1))
    if np.allclose(got, diag_only):
        raise Wrong("only the diagonal entries p_i(1 − p_i) are counted; the "
                    "off-diagonal −p_i p_j add Σ_i≠j p_i² p_j²",
                    "diagonal-only")
    raise Wrong("the norms differ from ‖diag(p) − p pᵀ‖_F; expand "
                "Σ_ij (p_i δ_ij − p_i p_j)² into sums of powers of p",
                "not-the-norm")


def _gradient_cases(rng):
    """Soft and saturated rows, then a wide case: the chain rule answers it
    in a fraction of a second, differences of the loss (8192 passes, each
    as costly as the answer) not within the time limit."""
    cases = []
    for size in (1.0, 4.0):                      # soft rows, saturated rows
        n_q, n_k = int(rng.integers(3, 5)), int(rng.integers(5, 8))
        d_k, d_v = int(rng.integers(8, 11)), int(rng.integers(2, 4))
        cases.append({"Q": size * rng.standard_normal((n_q, d_k)),
                      "K": rng.standard_normal((n_k, d_k)),
                      "V": rng.standard_normal((n_k, d_v)),
                      "G": rng.standard_normal((n_q, d_v))})
    cases.append({"seed": int(rng.integers(0, 2 ** 31)),
                  "sizes": WIDE_GRADIENT})
    return cases


def _query_gradient(Q, K, V, G, jacobian=True, root=True):
    """∂L/∂Q for L = Σ G ⊙ softmax(Q Kᵀ / √d_k) V (and near misses)."""
    c = 1 / math.sqrt(K.shape[1]) if root else 1.0
    A = softmax(Q @ K.T / math.sqrt(K.shape[1]))          # (n_q, n_k)
    dA = G @ V.T                                          # (n_q, n_k)
    dS = A * (dA - (A * dA).sum(axis=1, keepdims=True)) if jacobian else \
        A * dA
    return dS @ K * c                                     # (n_q, d_k)


def _gradient_judge(got, Q=None, K=None, V=None, G=None, seed=None,
                    sizes=None):
    if Q is None:
        Q, K, V, G = wide_gradient_case(seed, *sizes)
    got = returned_array(got, "my_query_gradient")
    if got.shape == K.shape and K.shape != Q.shape:
        raise Wrong(f"you return shape {got.shape}, the shape of K; the "
                    f"gradient of the queries has the shape of Q, {Q.shape}",
                    "shape-of-keys")
    expect_shape(got, "∂L/∂Q", Q.shape, "(n_q, d_k)", "the shape of Q")
    want = _query_gradient(Q, K, V, G)
    if np.allclose(got, want):
        return None
    near_misses = [
        (-want, "the sign is flipped", "sign-flipped"),
        (_query_gradient(Q, K, V, G, root=False),
         "the scores are Q Kᵀ / √d_k, so ∂S/∂Q carries a factor 1/√d_k "
         "that is missing", "sqrt-missing"),
        (_query_gradient(Q, K, V, G, jacobian=False),
         "you kept only diag(p) of the softmax Jacobian: raising one score "
         "also lowers the other weights of its row; subtract p_i Σ_j p_j "
         "(∂L/∂p_j) row by row", "jacobian-diagonal-only"),
        (G @ V.T @ K / math.sqrt(K.shape[1]),
         "the gradient skips the softmax: ∂L/∂A must pass through its "
         "Jacobian diag(p) − p pᵀ before reaching the scores",
         "softmax-skipped"),
    ]
    for wrong, message, code in near_misses:
        if np.allclose(got, wrong):
            raise Wrong(message, code)
    raise Wrong("∂L/∂Q differs from the chain rule through Y = A V, the "
                "softmax and S = Q Kᵀ / √d_k; compare one entry with a "
                "finite difference of L", "not-the-gradient")


def _saturation_cases(rng):
    widths = [4, 16, 64, 256, 1024]
    first = int(rng.integers(0, 2))
    d_ks = (widths[first], widths[first + 2], widths[int(rng.integers(3, 5))])
    return [{"d_ks": d_ks, "n": int(rng.choice([8, 12, 16, 24])),
             "seed": int(rng.integers(0, 2 ** 31))}]


def _table(out, d_ks, n):
    got = returned_array(out, "saturation")
    if got.shape != (len(d_ks), 2):
        raise Wrong(f"for {len(d_ks)} key widths saturation should return "
                    f"shape ({len(d_ks)}, 2), one row (raw, scaled) per d_k, "
                    f"got shape {got.shape}", "shape")
    if not ((got >= 1 / n - 1e-9) & (got <= 1 + 1e-9)).all():
        raise Wrong(f"a mean largest weight of a row of {n} keys lies "
                    f"between 1/{n} and 1; you return {got.min():.3g} to "
                    f"{got.max():.3g}", "not-weights")
    return got


def _saturation_judge(out, d_ks, n, seed):
    if not (isinstance(out, tuple) and len(out) == 3):
        raise Wrong("the check could not read the results of saturation",
                    "unreadable")
    got, again, other = (_table(o, d_ks, n) for o in out)
    if not np.array_equal(got, again):
        raise Wrong(f"two runs with seed {seed} differ: draw every random "
                    f"number from np.random.default_rng(seed)", "not-seeded")
    if np.array_equal(got, other):
        raise Wrong(f"seeds {seed} and {seed + 1} give the same table: the "
                    f"random projections must come from the seed",
                    "seed-ignored")
    raw, scaled = got[:, 0], got[:, 1]
    if (raw < scaled - 1e-9).all():
        raise Wrong("the raw column is below the scaled one at every d_k: "
                    "the columns look swapped (raw first, then scaled)",
                    "columns-swapped")
    if (raw < scaled - 1e-9).any():
        raise Wrong("at some d_k the raw rows are flatter than the scaled "
                    "ones; multiplying a row of scores by √d_k ≥ 1 can only "
                    "raise its largest weight, so compute both columns from "
                    "the same scores", "not-same-scores")
    if np.ptp(scaled) > 0.08:
        raise Wrong(f"the scaled column moves from {scaled.min():.2f} to "
                    f"{scaled.max():.2f} across d_k = {list(d_ks)}; with "
                    f"unit-variance components it stays put. Divide by √d_k "
                    f"of each width, and keep the inputs' scale fixed",
                    "scaled-column-moves")
    if scaled.max() > 0.6:
        raise Wrong(f"the scaled rows are already sharp ({scaled.max():.2f}):"
                    f" are your query and key components of variance 1?",
                    "variance-not-one")
    if raw[-1] - raw[0] < 0.15 or (np.diff(raw) < -0.03).any():
        raise Wrong(f"the raw column {np.round(raw, 2).tolist()} should "
                    f"climb with d_k: raw scores spread as √d_k",
                    "raw-not-climbing")
    return None


@functools.lru_cache(maxsize=None)
def _expected_max_weight(d_k: int) -> float:
    """Mean largest raw weight of the digits experiment at width ``d_k``.

    The scores are ``T Gq Gkᵀ Tᵀ`` with weights of standard deviation 1/2;
    only the 4 × 4 matrix ``M = Gq Gkᵀ`` matters. ``Gq Gqᵀ = A Aᵀ / 4``
    for ``A`` the Bartlett factor of a Wishart matrix with ``d_k`` degrees
    of freedom, and given ``Gq`` the columns of ``M`` are normal with
    covariance ``Gq Gqᵀ / 4``, so ``M = A Z / 4``: 40 sets of 300 images
    drawn exactly, at a cost that does not grow with ``d_k``.
    """
    T = digit_patch_tokens()                              # (300, 16, 4)
    N, p = T.shape[0], T.shape[2]
    rng = np.random.default_rng(2)
    low = np.tril_indices(p, -1)
    means = []
    for _ in range(40):
        A = np.zeros((N, p, p))
        A[:, range(p), range(p)] = np.sqrt(
            rng.chisquare(d_k - np.arange(p), size=(N, p)))
        A[:, low[0], low[1]] = rng.standard_normal((N, len(low[0])))
        M = A @ rng.standard_normal((N, p, p)) / 4        # (N, 4, 4)
        S = T @ M @ np.swapaxes(T, 1, 2)                  # (N, 16, 16)
        means.append(softmax(S).max(axis=-1).mean())
    return float(np.mean(means))


def _predict_cases(rng):
    return [{"d_k": int(rng.choice([2048, 4096])),
             "seed": int(rng.integers(0, 2 ** 31))}]


def _predict_judge(out, d_k, seed):
    prediction, measured = out
    if prediction is None:
        raise NotDone("`prediction` is still empty; set it to your number "
                      "before you run anything")
    prediction = _as_number(prediction, "your prediction")
    floor = _expected_max_weight(1024) - 0.02
    if not floor <= prediction <= 1:
        raise Wrong(f"your prediction {prediction:.3g} is outside "
                    f"[{floor:.2f}, 1]: a weight is at most 1, and doubling "
                    f"every raw score (d_k = 1024 -> 4096) cannot lower the "
                    f"largest weight of a row, about 0.81 at d_k = 1024",
                    "prediction-out-of-range")
    measured = _as_number(measured, "max_weight_at")
    want = _expected_max_weight(d_k)
    if abs(measured - 0.18) < 0.03:
        raise Wrong(f"at d_k = {d_k} you measure {measured:.3f}, the level "
                    f"of the scaled rows; measure softmax(S), not "
                    f"softmax(S / √d_k)", "measured-scaled")
    if abs(measured - want) > 0.03:
        raise Wrong(f"at d_k = {d_k} you measure {measured:.3f}, further "
                    f"from the mean over many runs than one run of 300 "
                    f"images allows: follow the chapter's recipe (weights of "
                    f"standard deviation 1/2, fresh for each image, raw "
                    f"scores)", "off-the-expected")
    return None


JUDGES = {
    "ex-scaling-mean": Judge(cases=_scale_cases, judge=_scale_judge),
    "ex-scaling-norm": Judge(
        cases=_norm_cases, judge=_norm_judge, wide=1,
        slow=f"the hidden cases hold a row of {WIDE_ROW:,} weights, whose "
             f"n × n Jacobian no answer can build or sum in time; the "
             f"closed form takes a few sums over the row"),
    "ex-scaling-gradient": Judge(
        cases=_gradient_cases, judge=_gradient_judge, wide=1,
        slow=f"the hidden cases hold queries of d_k = {WIDE_GRADIENT[2]}; "
             f"the chain rule answers them in a fraction of a second, "
             f"differences of the loss (a pass per component) not in "
             f"time"),
    "ex-scaling-saturation": Judge(
        cases=_saturation_cases, judge=_saturation_judge),
    "ex-scaling-predict": Judge(cases=_predict_cases, judge=_predict_judge),
}
