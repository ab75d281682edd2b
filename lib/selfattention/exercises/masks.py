"""Exercises of chapter 4, Masks."""

from __future__ import annotations

import numpy as np

from ..attention import attention, softmax
from ..masks import causal_mask
from .core import (Exercise, Opaque, Wrong, call, expect_shape,
                   returned_arrays, type_name)

__all__ = ["check_causal_mask", "check_masked_attention", "check_mha_mask"]


def _array(out, what: str) -> np.ndarray:
    if isinstance(out, (str, Opaque)) or out is None:
        raise Wrong(f"{what} should return an array, got {type_name(out)}")
    try:
        return np.asarray(out)
    except ValueError:
        raise Wrong(f"{what} should return an array, got a ragged "
                    f"{type_name(out)}") from None


# ------------------------------------------------------------------ 4.1
def _causal_cases(rng):
    return [{"n": n} for n in (5, 1, 8, int(rng.integers(2, 13)))]


def _causal_run(my_causal_mask, n):
    return call(my_causal_mask, n, what="my_causal_mask")


def _causal_judge(m, n):
    m = _array(m, f"my_causal_mask({n})")
    ref = causal_mask(n)
    if m.shape != (n, n):
        raise Wrong(f"my_causal_mask({n}) has shape {m.shape}, expected "
                    f"(n, n) = {(n, n)}: one row per query, one column "
                    f"per key")
    if m.dtype != bool:
        _wrong_dtype(m, ref, f"my_causal_mask({n})")
    if n > 1 and np.array_equal(m, ref.T):
        raise Wrong("query i may use keys j ≥ i, the future: a causal "
                    "mask allows the past, j ≤ i, the lower triangle "
                    "(np.tril)")
    if n > 1 and np.array_equal(m, ~ref):
        raise Wrong("True marks the blocked keys (that is "
                    "nn.MultiheadAttention's convention); in this book "
                    "True means 'may attend'")
    if np.array_equal(m, ref & ~np.eye(n, dtype=bool)):
        raise Wrong("the diagonal is False: a token may attend to itself "
                    "(j = i); without it the first token has no key at "
                    "all")
    if not np.array_equal(m, ref):
        i, j = np.argwhere(m != ref)[0]
        raise Wrong(f"for n = {n}, entry [{i}, {j}] is {bool(m[i, j])}; "
                    f"query i may use key j exactly when j ≤ i")
    return None


def _wrong_dtype(m, ref, what):
    if np.issubdtype(m.dtype, np.floating) and np.array_equal(
            np.isneginf(m), ~ref):
        raise Wrong(f"{what} is an additive mask of 0 and -inf (dtype "
                    f"{m.dtype}); the exercise asks for a boolean one, "
                    f"True = may attend")
    if m.dtype.kind in "biuf" and np.array_equal(m != 0, ref):
        raise Wrong(f"{what} has the right pattern but dtype {m.dtype}; make "
                    f"it boolean, e.g. np.tril(np.ones((n, n), dtype=bool))")
    raise Wrong(f"{what} should be a boolean array (True = may attend), got "
                f"dtype {m.dtype}")


check_causal_mask = Exercise(
    "ex-masks-causal", kind="Implement", points=1,
    answers=("my_causal_mask",), cases=_causal_cases, run=_causal_run,
    judge=_causal_judge, references=("selfattention.masks.causal_mask",),
    seed=40,
    success="boolean, lower-triangular with the diagonal, for every n "
            "tried.",
    doc="Exercise 4.1: a boolean (n, n) mask in which query i may use keys "
        "j ≤ i.")


# ------------------------------------------------------------------ 4.2
def _masked_cases(rng):
    """Four sizes that differ; no empty row in the mask or its inverse."""
    n_q, n_k, d_k, d_v = 4, 6, 3, 2
    Q = 2 * rng.standard_normal((n_q, d_k))
    K = 2 * rng.standard_normal((n_k, d_k))
    V = rng.standard_normal((n_k, d_v))
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):                      # 2 or 3 allowed keys per query
        mask[i, rng.permutation(n_k)[: 2 + i % 2]] = True
    return [{"Q": Q, "K": K, "V": V, "mask": mask}]


def _masked_run(my_masked_attention, Q, K, V, mask):
    with np.errstate(all="ignore"):
        return call(my_masked_attention, Q, K, V, mask,
                    what="my_masked_attention")


def _masked_judge(out, Q, K, V, mask):
    Y, A = returned_arrays(out, 2, "my_masked_attention should return a "
                           "pair (Y, A): outputs and weights")
    n_q, n_k, d_v = Q.shape[0], K.shape[0], V.shape[1]
    expect_shape(A, "A", (n_q, n_k), "(n_q, n_k)")
    expect_shape(Y, "Y", (n_q, d_v), "(n_q, d_v)")
    if not np.all(np.isfinite(A)):
        raise Wrong("A contains NaN or inf; mask the scores with "
                    "np.where(mask, S, -np.inf) and use a softmax that "
                    "subtracts each row's maximum")
    S = Q @ K.T / np.sqrt(K.shape[1])
    Y_ref, A_ref = attention(Q, K, V, mask)
    full = softmax(S)
    if np.allclose(A, full * mask):
        sums = ", ".join(f"{s:.2f}" for s in A.sum(axis=-1))
        raise Wrong(f"you applied the mask after the softmax: the forbidden "
                    f"weights are zero but the rows sum to {sums}, not one. "
                    f"Set the forbidden scores to -inf before the softmax so "
                    f"the remaining weights renormalize")
    if np.allclose(A, full):
        raise Wrong("the mask has no effect: forbidden keys still receive "
                    "weight. Replace their scores by -inf before the softmax")
    if np.allclose(A, attention(Q, K, V, ~mask)[1]):
        raise Wrong("you blocked the allowed keys and allowed the blocked "
                    "ones: in this book True means 'may attend'")
    if np.allclose(A, softmax(S * mask)):
        raise Wrong("forbidden scores were set to 0, not -inf: exp(0) = 1, "
                    "so they still receive weight. Use np.where(mask, S, "
                    "-np.inf)")
    if np.allclose(A, softmax(np.where(mask, Q @ K.T, -np.inf))):
        raise Wrong("the mask is right but the scores are not divided by "
                    "√d_k")
    if np.abs(A[~mask]).max() > 0 and np.allclose(A, A_ref, atol=1e-6):
        raise Wrong("the forbidden weights are small but not exactly zero; "
                    "a finite penalty leaks a little weight. Use -np.inf")
    if not np.allclose(A.sum(axis=-1), 1):
        raise Wrong("the rows of A do not sum to one; apply the softmax over "
                    "the keys (the last axis)")
    if not np.allclose(A, A_ref):
        raise Wrong("A differs from softmax of the scaled scores with the "
                    "forbidden ones set to -inf")
    if not np.allclose(Y, Y_ref):
        raise Wrong("A is right but Y is not: Y = A @ V")
    return None


check_masked_attention = Exercise(
    "ex-masks-apply", kind="Implement", points=1,
    answers=("my_masked_attention",), cases=_masked_cases, run=_masked_run,
    judge=_masked_judge,
    references=("selfattention.attention.attention",
                "selfattention.attention.multi_head_attention"), seed=41,
    success="forbidden weights are exactly zero and every row still sums "
            "to one.",
    doc="Exercise 4.2: attention with the mask applied before the softmax.")


# ------------------------------------------------------------------ 4.3
def _mha_cases(rng):
    from ..example import running_example
    from ..masks import window_mask

    ex = running_example()
    n = ex.X.shape[0]
    given = window_mask(ex.grid, 4) & causal_mask(n)   # not symmetric
    drawn = (rng.random((n, n)) < 0.3) | np.eye(n, dtype=bool)
    return [{"mask": given}, {"mask": drawn}]


def _mha_run(to_mha, mask):
    """What ``to_mha`` returned: (type name, dtype name, values or None)."""
    m = call(to_mha, mask, what="to_mha")
    if isinstance(m, np.ndarray):
        return ("ndarray", str(m.dtype), None)
    import torch

    if not isinstance(m, torch.Tensor):
        return (type(m).__name__, "", None)
    if m.dtype != torch.bool or tuple(m.shape) != mask.shape:
        return ("Tensor", str(m.dtype), tuple(m.shape))
    return ("Tensor", str(m.dtype), m.detach().cpu().numpy())


def _mha_judge(out, mask):
    if not (isinstance(out, tuple) and len(out) == 3):
        raise Wrong(f"to_mha should return a torch.Tensor, got "
                    f"{type_name(out)}")
    kind, dtype, values = out
    if kind == "ndarray":
        raise Wrong("to_mha returned a NumPy array; nn.MultiheadAttention "
                    "wants a torch tensor (torch.from_numpy)")
    if kind != "Tensor":
        raise Wrong(f"to_mha should return a torch.Tensor, got {kind}")
    if isinstance(values, tuple):
        if values != mask.shape:
            raise Wrong(f"the tensor has shape {values}, expected "
                        f"{mask.shape}, the shape of the mask you were given")
        raise Wrong(f"the tensor has dtype {dtype}; give a boolean mask "
                    f"(dtype torch.bool)")
    got = np.asarray(values)
    if got.shape != mask.shape or got.dtype != bool:
        raise Wrong("the tensor could not be read back as a boolean mask")
    if np.array_equal(got, mask):
        raise Wrong("this is our convention unchanged: nn.MultiheadAttention "
                    "reads True as 'blocked', so every query would attend "
                    "exactly where it should not. Invert the mask with ~")
    if np.array_equal(got, ~mask.T):
        raise Wrong("the mask is inverted but transposed: rows are queries, "
                    "columns are keys")
    if not np.array_equal(got, ~mask):
        i, j = np.argwhere(got != ~mask)[0]
        raise Wrong(f"entry [{i}, {j}] should be {bool(~mask[i, j])}: True "
                    f"exactly where our mask is False")
    _mha_agrees(got, mask)
    return None


def _mha_agrees(blocked, mask):
    """Run the running example's heads in PyTorch with ``blocked``."""
    import torch

    from ..attention import multi_head_attention
    from ..example import running_example
    from ..torch_bridge import multihead_from_weights

    ex = running_example()
    mha = multihead_from_weights(*ex.mha, ex.h)
    x = torch.from_numpy(ex.X)[None]                         # (1, 64, 16)
    with torch.no_grad():
        Y_t, _ = mha(x, x, x, attn_mask=torch.from_numpy(blocked),
                     need_weights=False)
    Y, _ = multi_head_attention(ex.X, *ex.mha, ex.h, mask=mask)
    if not np.allclose(Y_t[0].numpy(), Y, rtol=0, atol=1e-10):
        raise Wrong("the mask looks right but nn.MultiheadAttention does not "
                    "match the NumPy code")


check_mha_mask = Exercise(
    "ex-masks-mha", kind="Implement", points=1,
    answers=("to_mha",), cases=_mha_cases, run=_mha_run, judge=_mha_judge,
    references=("selfattention.torch_bridge.mask_for_mha",
                "selfattention.torch_bridge.mask_for_sdpa"), seed=43,
    success="nn.MultiheadAttention with your mask matches the NumPy code.",
    doc="Exercise 4.3: our mask (True = may attend) for "
        "nn.MultiheadAttention.")
