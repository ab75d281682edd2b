"""Answers and verdict helpers shared by the tests of the exercise checks.

A check reports an answer that calls the library's own version of what the
exercise asks for "for review". The tests often need a right (or a
deliberately wrong) answer built from the library; :func:`own` gives them a
copy of a library function with a code object of its own, placed where the
library has none, which is what a student who retyped the function would
have.

:func:`expect`, :func:`verdict` and :func:`hidden` assert what a check or
the grader decides: a status and a diagnosis code (``Wrong(code=...)``),
never the wording of a message; :func:`run` gives the feedback on a draw of
cases.
"""

import inspect
import types

import numpy as np


def own(fn):
    """A copy of ``fn`` (without its argument checks) that is not ``fn``."""
    bare = inspect.unwrap(fn)
    code = bare.__code__.replace(co_filename="<retyped>")
    return types.FunctionType(code, bare.__globals__,
                              bare.__name__, bare.__defaults__,
                              bare.__closure__)


def expect(fb, status, code=None):
    """``fb`` has ``status`` (and the diagnosis ``code``), and full points
    exactly when it is correct."""
    assert fb.status == status, (fb.code, fb.message)
    assert fb.points == (fb.max_points if status == "correct" else 0)
    assert code is None or isinstance(code, str), "a code, not words"
    if code is not None:
        assert fb.code == code, (fb.code, fb.message)


def verdict(check, answers, status, code=None):
    """The in-notebook check's verdict on ``answers`` (public cases)."""
    expect(check.feedback(*answers), status, code)


def run(check, answer, seed=None):
    """Feedback on the public cases, or on the cases of ``seed``."""
    if seed is None:
        return check.feedback(answer)
    cases = check.draw(np.random.default_rng(seed))
    return check.assess(check.attempt([answer], cases), cases)


def hidden(ex, answers, seeds=range(5), base=1000):
    """Full marks on cases drawn as the grader draws them, for each seed
    (``base + seed``); ``answers`` is one answer or a list of them."""
    answers = answers if isinstance(answers, list) else [answers]
    for seed in seeds:
        cases = ex.draw(np.random.default_rng(base + seed))
        fb = ex.assess(ex.attempt(answers, cases), cases)
        assert fb.status == "correct", (seed, fb.code, fb.message)


def temperatures_for(Q, K, p):
    """A right second answer to chapter 1's first exercise: the temperature
    of each query at which its largest weight is ``p`` (bisection on log τ;
    the largest weight falls as τ grows)."""
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    gap = S.max(axis=-1, keepdims=True) - S
    lo, hi = np.full(p.shape, -30.0), np.full(p.shape, 30.0)
    for _ in range(100):
        mid = (lo + hi) / 2
        top = 1 / np.exp(-gap / np.exp(mid)[..., None]).sum(axis=-1)
        lo, hi = np.where(top > p, mid, lo), np.where(top > p, hi, mid)
    return np.exp((lo + hi) / 2)
