"""Exercises of chapter 3, Multi-head attention."""

from __future__ import annotations

import numpy as np

from ..attention import (attention, merge_heads, multi_head_attention,
                         split_heads)
from .core import (Exercise, Wrong, call, returned_array, returned_arrays,
                   type_name)

__all__ = ["check_split_merge", "check_multi_head", "check_parameter_count",
           "mha_parameter_count"]


# ------------------------------------------------------------------ 3.1
def _split_cases(rng):
    n, h, w = 5, 3, 2                      # all different: catches transposes
    Z = np.arange(n * h * w, dtype=float).reshape(n, h * w)
    B = rng.standard_normal((2, n, h * w))
    Z2 = rng.standard_normal((n, h * w))
    B2 = rng.standard_normal((2, n, h * w))
    return [{"step": "split", "Z": Z, "h": h},
            {"step": "split", "Z": B, "h": h},
            {"step": "merge", "H": split_heads(Z2, h)},
            {"step": "merge", "H": split_heads(B2, h)}]


def _split_run(my_split_heads, my_merge_heads, step, Z=None, h=None, H=None):
    if step == "split":
        if Z.ndim == 2:
            return call(my_split_heads, Z, h, what="my_split_heads")
        return _batched(my_split_heads, "my_split_heads", Z, h)
    if H.ndim == 3:
        return call(my_merge_heads, H, what="my_merge_heads")
    return _batched(my_merge_heads, "my_merge_heads", H)


def _batched(fn, what: str, *args):
    try:
        return call(fn, *args, what=what)
    except Wrong as err:
        raise Wrong(f"with a batch axis (input of shape {args[0].shape}): "
                    f"{err}") from None


def _split_judge(out, step, Z=None, h=None, H=None):
    if step == "merge":
        return _merge_judge(returned_array(out, "my_merge_heads"), H)
    got = returned_array(out, "my_split_heads")
    ref = split_heads(Z, h)
    if Z.ndim == 3:
        if got.shape != ref.shape or not np.allclose(got, ref):
            raise Wrong(f"with a batch axis, Z of shape {Z.shape} should give "
                        f"{ref.shape}, got {got.shape}: index from the end "
                        f"(axes -2 and -3)")
        return None
    n, w = Z.shape[0], Z.shape[1] // h
    if got.shape != (h, n, w):
        if got.shape == (n, h, w):
            raise Wrong(f"my_split_heads returns shape {got.shape} = (n, h, "
                        f"w); put the head axis first, (h, n, w), so that "
                        f"each head is an (n, w) matrix")
        raise Wrong(f"for Z of shape {Z.shape} and h = {h}, my_split_heads "
                    f"returns shape {got.shape}; expected (h, n, w) = "
                    f"{(h, n, w)}")
    if not np.array_equal(got, ref):
        if np.array_equal(got, Z.reshape(h, n, w)):
            raise Wrong("a plain reshape to (h, n, w) mixes tokens into the "
                        "heads: head 0 must hold columns 0…w−1 of every "
                        "token. Reshape to (n, h, w), then swap the first "
                        "two axes")
        if np.array_equal(got, Z.reshape(n, w, h).transpose(2, 0, 1)):
            raise Wrong("the heads are interleaved (columns i, i+h, …); "
                        "head i takes the contiguous columns i·w … (i+1)·w−1")
        raise Wrong(f"head 0 of token 0 should be {ref[0, 0].tolist()}, got "
                    f"{got[0, 0].tolist()}")
    return None


def _merge_judge(M, H):
    Z = merge_heads(H)
    if H.ndim == 4:
        if M.shape != Z.shape or not np.allclose(M, Z):
            raise Wrong(f"with a batch axis, merging shape {H.shape} should "
                        f"give back {Z.shape}, got {M.shape}")
        return None
    if M.shape != Z.shape:
        raise Wrong(f"my_merge_heads turns shape {H.shape} into {M.shape}; "
                    f"it should give back (n, h·w) = {Z.shape}")
    if not np.allclose(M, Z):
        if np.allclose(M, H.reshape(Z.shape)):
            raise Wrong("my_merge_heads reshapes without moving the head axis "
                        "back: swap the first two axes to (n, h, w) first")
        raise Wrong("my_merge_heads(split_heads(Z)) does not give Z back")
    return None


check_split_merge = Exercise(
    "ex-multihead-split", kind="Implement", points=1,
    answers=("my_split_heads", "my_merge_heads"), cases=_split_cases,
    run=_split_run, judge=_split_judge,
    references=("selfattention.attention.split_heads",
                "selfattention.attention.merge_heads"), seed=31,
    success="head i holds columns i·w … (i+1)·w − 1 of every token, and "
            "merging puts them back.",
    doc="Exercise 3.1: cut the width into heads and glue it back.")


# ------------------------------------------------------------------ 3.2
def _loop_cases(rng):
    n, d, h = 6, 8, 2
    X = rng.standard_normal((n, d))
    W_q, W_k, W_v = (rng.standard_normal((d, d)) for _ in range(3))
    W_o = rng.standard_normal((d, 5))      # d_out = 5 shows a missing W_o
    return [{"X": X, "W_q": W_q, "W_k": W_k, "W_v": W_v, "W_o": W_o, "h": h}]


def _loop_run(my_multi_head, X, W_q, W_k, W_v, W_o, h):
    return call(my_multi_head, X, W_q, W_k, W_v, W_o, h, what="my_multi_head")


def _loop_judge(out, X, W_q, W_k, W_v, W_o, h):
    Y, A = returned_arrays(out, 2, "my_multi_head should return a pair "
                           "(Y, A): outputs and the stacked attention maps")
    n, d = X.shape
    Y_ref, A_ref = multi_head_attention(X, W_q, W_k, W_v, W_o, h)
    if A.shape != A_ref.shape:
        raise Wrong(f"A has shape {A.shape}; stack one (n, n) map per head: "
                    f"{A_ref.shape}")
    d_k = d // h
    cols = [slice(i * d_k, (i + 1) * d_k) for i in range(h)]
    unscaled = np.stack([attention(X @ W_q[:, c], X @ W_k[:, c], X @ W_v[:, c],
                                   scale=1.0)[1] for c in cols])
    full = np.stack([attention(X @ W_q[:, c], X @ W_k[:, c], X @ W_v[:, c],
                               scale=1 / np.sqrt(d))[1] for c in cols])
    inter = [slice(i, None, h) for i in range(h)]
    interleaved = np.stack([attention(X @ W_q[:, c], X @ W_k[:, c],
                                      X @ W_v[:, c])[1] for c in inter])
    if not np.allclose(A, A_ref):
        if np.allclose(A, full):
            raise Wrong(f"each head's scores are divided by √d = √{d}; a head "
                        f"has width d_k = d/h = {d_k}, so divide by "
                        f"√{d_k}")
        if np.allclose(A, unscaled):
            raise Wrong("the scores are not scaled: divide each head's "
                        "scores by √d_k")
        if np.allclose(A, interleaved):
            raise Wrong("head i should use the contiguous columns "
                        "i·d_k … (i+1)·d_k − 1, not every h-th column")
        raise Wrong("the attention maps differ from the reference; head i "
                    "uses columns i·d_k … (i+1)·d_k − 1 of W_q, W_k and W_v")
    if Y.shape != Y_ref.shape:
        if Y.shape == (n, d):
            raise Wrong(f"Y has shape {Y.shape}: the concatenated heads still "
                        f"need the output projection, @ W_o")
        raise Wrong(f"Y has shape {Y.shape}, expected {Y_ref.shape}")
    if not np.allclose(Y, Y_ref):
        heads = [attention(X @ W_q[:, c], X @ W_k[:, c], X @ W_v[:, c])[0]
                 for c in cols]
        if np.allclose(Y, np.concatenate(heads[::-1], axis=1) @ W_o):
            raise Wrong("the heads are concatenated in reverse order")
        raise Wrong("the maps are right but Y is not: concatenate the head "
                    "outputs side by side (axis 1), then multiply by W_o")
    return None


check_multi_head = Exercise(
    "ex-multihead-loop", kind="Implement", points=1,
    answers=("my_multi_head",), cases=_loop_cases, run=_loop_run,
    judge=_loop_judge,
    references=("selfattention.attention.multi_head_attention",), seed=32,
    success="one attention per head on its own columns, scaled by √(d/h), "
            "concatenated and projected by W_o.",
    doc="Exercise 3.2: multi-head attention as a loop over heads.")


# ------------------------------------------------------------------ 3.3
def mha_parameter_count(d: int, h: int, bias: bool = True) -> int:
    """Parameters of ``torch.nn.MultiheadAttention(d, h, bias=bias)``.

    Four ``d × d`` projections, ``4d²`` weights whatever ``h`` is, plus one
    bias vector of length ``d`` for each projection if ``bias`` (chapter 3).
    """
    return 4 * d * d + (4 * d if bias else 0)


def _params_cases(rng):
    fixed = [(512, 8, True), (512, 8, False), (64, 4, True), (96, 3, False),
             (96, 1, True), (96, 32, True)]
    drawn = []
    for _ in range(2):
        h = int(rng.integers(2, 17))
        drawn.append((h * int(rng.integers(2, 65)), h, bool(rng.random() < .5)))
    return [{"d": d, "h": h, "bias": bias} for d, h, bias in fixed + drawn]


def _params_run(my_parameter_count, d, h, bias):
    return call(my_parameter_count, d, h, bias, what="my_parameter_count")


def _params_judge(got, d, h, bias):
    try:
        if isinstance(got, str) or not np.isfinite(float(got)):
            raise TypeError
        got = int(got)
    except (TypeError, ValueError, OverflowError):
        raise Wrong(f"my_parameter_count should return an integer, got "
                    f"{type_name(got)}") from None
    want = mha_parameter_count(d, h, bias)
    if got == want:
        return None
    where = f"for d = {d}, h = {h}, bias = {bias}"
    d_k = d // h
    if got in (3 * d * d, 3 * d * d + (3 * d if bias else 0)):
        raise Wrong(f"{where} you count {got}: the output projection W_o "
                    f"is missing (another d × d)")
    if got == want * h or got == 4 * d * d_k + (4 * d if bias else 0):
        raise Wrong(f"{where} you count {got}: the h heads share out the "
                    f"width, each d × d/h, so the total does not depend "
                    f"on h")
    if bias and got == 4 * d * d:
        raise Wrong(f"{where} the biases are missing: one vector of "
                    f"length d per projection")
    if bias and got == 4 * d * d + 3 * d:
        raise Wrong(f"{where} the output projection's bias (length d) "
                    f"is missing")
    if not bias and got == 4 * d * d + 4 * d:
        raise Wrong(f"{where} there are no biases when bias=False")
    raise Wrong(f"{where} you count {got}, expected {want}")


check_parameter_count = Exercise(
    "ex-multihead-params", kind="Derive", points=1,
    answers=("my_parameter_count",), cases=_params_cases, run=_params_run,
    judge=_params_judge,
    references=("selfattention.exercises.multihead.mha_parameter_count",),
    seed=33,
    success="4d² weights whatever h is, plus 4d biases.",
    doc="Exercise 3.3: parameters of nn.MultiheadAttention(d, h, bias=...).")
