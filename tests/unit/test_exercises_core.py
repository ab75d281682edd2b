"""What every exercise shares: plain data, the tripwire, the helpers."""

import sys
import threading

import numpy as np
import pytest

from selfattention.attention import attention, softmax
from selfattention_exercises.core import (NotDone, Opaque, Wrong, answered,
                                          expect_shape, int_pair,
                                          returned_array, returned_arrays,
                                          to_plain)
from selfattention_exercises.tripwire import Tripwire, signatures


# ------------------------------------------------------------ plain data
def test_plain_values_stay_plain():
    value = (1, 2.5, True, None, "s", [np.int64(3), np.float32(0.5)],
             np.arange(6).reshape(2, 3), np.array(["a", "b"]),
             np.array([True]))
    plain = to_plain(value)
    assert plain[:5] == (1, 2.5, True, None, "s")
    assert plain[5] == [3, 0.5] and type(plain[5][0]) is int
    assert isinstance(plain[6], np.ndarray) and plain[6].dtype.kind == "i"
    assert plain[7].dtype.kind == "U" and plain[8].dtype == bool
    assert to_plain(...) is None


class Tricky(tuple):
    def __iter__(self):
        raise AssertionError("to_plain must not call methods of a value")


@pytest.mark.parametrize("value, name", [
    ({"a": 1}, "dict"), ({1, 2}, "set"), (Tricky((1, 2)), "Tricky"),
    (np.array([object()]), "ndarray of object"), (1 + 2j, "complex"),
    (np.ones(3).view(np.matrix), "matrix"), (b"x", "bytes"),
    (lambda: 1, "function"), ("x" * 20_000, "str (too long)"),
    ([[[[[[[[[1]]]]]]]]], "list (too large)"),
])
def test_anything_else_becomes_opaque(value, name):
    out = to_plain(value)
    while isinstance(out, list):
        out = out[0]
    assert out == Opaque(name)


def test_huge_ints_become_floats():
    assert to_plain(10 ** 30) == 1e30
    assert to_plain(-(10 ** 400)) == -np.inf


# ------------------------------------------------------------ tripwire
def test_tripwire_sees_calls_by_any_route():
    targets = {"softmax": softmax}
    S = np.ones((2, 3))
    for route in (lambda: softmax(S), lambda: softmax.__wrapped__(S),
                  lambda: attention(S, S, S)):         # called inside
        with Tripwire(targets) as wire:
            route()
        assert wire.called == ["softmax"] and not wire.tampered
    with Tripwire(targets) as wire:
        t = threading.Thread(target=softmax, args=(S,))
        t.start()
        t.join()
    assert wire.called == ["softmax"]


def test_tripwire_ignores_other_functions_and_restores_the_profiler():
    before = sys.getprofile()
    with Tripwire({"softmax": softmax}) as wire:
        np.exp(np.ones(3)).sum()
    assert wire.called == [] and sys.getprofile() is before


def test_tripwire_notices_profiling_switched_off():
    with Tripwire({"softmax": softmax}) as wire:
        sys.setprofile(None)
        softmax(np.ones(3))
    assert wire.tampered and wire.called == []
    with Tripwire({"softmax": softmax}) as wire:
        threading.setprofile(None)
    assert wire.tampered


def test_classes_and_modules_are_seen_through_their_code():
    """A class has no code of its own, nor has a module: the tripwire
    watches their methods and functions (not code they share with other
    classes, such as every namedtuple's ``_replace``)."""
    import collections

    import torch
    import torch.autograd.forward_ad as forward_ad

    targets = {"mha": torch.nn.MultiheadAttention,
               "forward_ad": forward_ad}
    with Tripwire(targets) as wire:
        torch.nn.MultiheadAttention(4, 1)
    assert wire.called == ["mha"]
    with Tripwire(targets) as wire:
        with forward_ad.dual_level():
            pass
    assert wire.called == ["forward_ad"]
    with Tripwire(targets) as wire:
        collections.namedtuple("P", "x")(1)._replace(x=2)
        torch.ones(2).sum()
    assert wire.called == []


def test_builtins_can_be_references():
    with Tripwire({"sorted": sorted}) as wire:
        sorted([2, 1])
    assert wire.called == ["sorted"]


def test_a_builtin_not_resolved_is_known_by_its_signature():
    """A graded kernel resolves only references already imported; the
    grader's signature of a builtin still names it."""
    places = signatures({"sorted": sorted, "max": max})
    with Tripwire({}, places) as wire:
        sorted([2, 1])
        min(1, 2)
        [].append(1)
    assert wire.called == ["sorted"]


# ------------------------------------------------------------ helpers
@pytest.mark.parametrize("starter", [None, ...])
def test_answered_reports_the_starter_as_not_done(starter):
    with pytest.raises(NotDone) as err:
        answered(starter, "a pair (row, col)", "pos")
    assert str(err.value) == "`pos` is still empty; set it to a pair (row, col)"
    assert answered(0, "a number") == 0          # a falsy answer is an answer


def test_int_pair():
    assert int_pair(["3", 4.0], "x") == (3, 4)
    for bad in (5, (1, 2, 3), ("a", 1), None, "ab", Opaque("dict")):
        with pytest.raises(Wrong) as err:
            int_pair(bad, "answer should be a pair (a, b)")
        assert str(err.value).startswith("answer should be a pair (a, b), "
                                         "got ")


def test_returned_array():
    assert returned_array([[1, 2]], "f").dtype == np.float64
    for bad, name in (({"a": 1}, "dict"), (Opaque("dict"), "dict"),
                      ("s", "str")):
        with pytest.raises(Wrong) as err:
            returned_array(bad, "f", "an array of weights")
        assert str(err.value) == f"f should return an array of weights, " \
                                 f"got {name}"


def test_returned_arrays():
    Y, A = returned_arrays(([1, 2], [[1]]), 2, "msg")
    assert Y.dtype == A.dtype == np.float64 and A.shape == (1, 1)
    (a,) = returned_arrays(([1, 2],), 1, "msg", dtype=None)
    assert a.dtype.kind == "i"
    for bad in ([1, 2], (1, 2, 3), np.ones(2)):
        with pytest.raises(Wrong, match="^msg$"):
            returned_arrays(bad, 2, "msg")
    with pytest.raises(Wrong, match="^msg; one item"):
        returned_arrays((np.ones(2), Opaque("dict")), 2, "msg")


def test_expect_shape():
    expect_shape(np.ones((2, 3)), "A", (2, 3), "(n, m)")
    with pytest.raises(Wrong) as err:
        expect_shape(np.ones((3, 2)), "A", (2, 3), "(n, m)", "one row each")
    assert str(err.value) == ("A has shape (3, 2), expected (n, m) = (2, 3): "
                              "one row each")
    with pytest.raises(Wrong) as err:
        expect_shape(np.ones(2), "Y", (2, 3), "(n, d)")
    assert str(err.value) == "Y has shape (2,), expected (n, d) = (2, 3)"


# The checks that use the helpers keep their messages.


def test_an_answer_that_borrows_the_checks_own_code_is_for_review():
    import numpy as np

    from selfattention_exercises import cost, multihead
    from selfattention_exercises.tripwire import Tripwire

    # A helper the checks keep (the partial softmax of ex-cost-merge's
    # cases), called by the answer: the judges themselves are the
    # grader's, out of the answer's reach.
    assert "_state" not in cost.__all__
    S, V = np.zeros((2, 3)), np.ones((3, 2))
    with Tripwire({}) as wire:
        cost._state(S, V, np.ones((2, 3), bool))
    assert wire.called == ["selfattention_exercises.cost._state"]
    # A tool the chapter offers (in the module's __all__) is not flagged.
    assert "retrieval_task" in multihead.__all__
    with Tripwire({}) as wire:
        multihead.retrieval_task(np.random.default_rng(0), 8)
    assert wire.called == []


class _Watched(type):
    """A class whose every attribute lookup is recorded in ``looked``."""

    looked: list[str] = []

    def __getattribute__(cls, attr):
        _Watched.looked.append(attr)
        return type.__getattribute__(cls, attr)


def test_the_hook_looks_up_nothing_the_notebook_defined(monkeypatch):
    """Code run inside the profiling hook is not profiled, so the hook
    reads no name from a builtin bound to an object of the notebook's own
    class (its type would compute it) and no ``__all__`` from a module the
    notebook put in sys.modules. (Changes to Python's own modules are
    beyond a tripwire: appendices/instructors/guarantees.md.)"""
    from selfattention_exercises import cost

    class Loud(list, metaclass=_Watched):
        pass

    class Module:
        def __getattribute__(self, attr):
            _Watched.looked.append(attr)
            raise AttributeError(attr)

    monkeypatch.setitem(sys.modules, cost.__name__, Module())
    S, V = np.zeros((2, 3)), np.ones((3, 2))
    loud = Loud()
    _Watched.looked.clear()
    with Tripwire({}, signatures({"sorted": sorted})) as wire:
        loud.append(0)
        cost._state(S, V, np.ones((2, 3), bool))
    assert _Watched.looked == []
    assert wire.called == ["selfattention_exercises.cost._state"]


@pytest.mark.slow                    # fresh interpreters that import torch
def test_references_resolve_from_two_threads_at_once():
    # The grader resolves references from its job threads; a first
    # `import torch` in two threads at once raises inside torch. A fresh
    # interpreter, so that torch is not imported yet.
    import subprocess
    import sys

    code = """
import threading
from selfattention_exercises import tripwire
from selfattention_course.assign import find_exercises
names = sorted({n for _, _, ex in find_exercises().values()
                for n in ex.references})
errors = []
def resolve(name):
    try:
        tripwire._resolve(name)
    except (ImportError, AttributeError):
        pass
    except Exception as err:
        errors.append(repr(err))
threads = [threading.Thread(target=resolve, args=(n,)) for n in names]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


#: Answers to exercise 1.1 for a fresh interpreter: an honest one, and two
#: that import PyTorch as they run to call one of the exercise's references.
TORCH_ANSWERS = """
import json, sys
import numpy as np
from selfattention_exercises import definition as checks
ex = checks.check_tempered_attention
cases = ex.public_cases()[:1]

def honest(Q, K, V, tau):
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]) / tau[..., None]
    W = np.exp(S - S.max(axis=-1, keepdims=True))
    return W / W.sum(axis=-1, keepdims=True) @ V

def fused(Q, K, V, tau):
    import torch
    q, k, v = (torch.as_tensor(x / tau[..., None] if i == 0 else x)
               for i, x in enumerate((Q, K, V)))
    F = torch.nn.functional
    return F.scaled_dot_product_attention(q, k, v, scale=1.0).numpy()

def module(Q, K, V, tau):
    import torch
    torch.nn.MultiheadAttention(Q.shape[-1], 1)
    return honest(Q, K, V, tau)

def targets(Q, K, p):          # the exercise's second answer
    return np.ones_like(p)

places = json.loads(sys.stdin.read())
places = None if places is None else [tuple(p) for p in places]
found = [ex.attempt([honest, targets], cases, places)["called"],
         "torch" in sys.modules]
found += [ex.attempt([f, targets], cases, places)["called"]
          for f in (fused, module)]
print(json.dumps(found))
"""


@pytest.mark.slow                    # a fresh interpreter that imports torch
@pytest.mark.parametrize("by", ["grader", "notebook"])
def test_a_kernel_watches_torch_without_importing_it(by):
    """attempt imports nothing to arm the tripwire (chapter 1's exercise
    lists six PyTorch references): in a graded kernel the grader's
    signatures name them; in a student's own check an answer that imported
    PyTorch as it ran is run again, watched. Either way it is caught."""
    import json
    import subprocess

    from selfattention_exercises import definition as checks
    places = checks.check_tempered_attention.signatures() \
        if by == "grader" else None
    done = subprocess.run([sys.executable, "-c", TORCH_ANSWERS],
                          input=json.dumps(places), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        [], False,
        ["torch.nn.functional.scaled_dot_product_attention"],
        ["torch.nn.MultiheadAttention"]]


def test_a_crash_in_the_kernel_keeps_its_diagnosis_in_the_gradebook():
    """The kernel sends the diagnosis of a run that stopped ("raised" for
    an answer that crashed); a field that is not a code's form, which a
    notebook could forge, becomes "run-failed"."""
    from selfattention_exercises import definition as checks
    ex = checks.check_tempered_attention
    cases = ex.public_cases()

    def crashes(*args):
        raise KeyError("boom")

    result = ex.attempt([crashes, crashes], cases)
    assert result["outcomes"][-1]["code"] == "raised"
    assert ex.assess(result, cases).code == "raised"
    for forged in ("correct\n", "=HYPERLINK(1)", 3, "x" * 41, None):
        result["outcomes"][-1]["code"] = forged
        fb = ex.assess(result, cases)
        assert (fb.status, fb.points, fb.code) == ("wrong", 0, "run-failed")


def test_a_module_reference_covers_what_it_re_exports_from_private_parts(
        tmp_path, monkeypatch):
    """A package that defines a function in ``pkg._impl`` and re-exports it
    as ``pkg.f`` (as NumPy and SciPy do): the tripwire on ``pkg`` sees a
    call of ``f``, and still not of a function ``pkg`` merely imports."""
    import importlib
    import math

    pkg = tmp_path / "reexporting_pkg"
    pkg.mkdir()
    (pkg / "_impl.py").write_text("def f(x):\n    return x + 1\n")
    (pkg / "__init__.py").write_text(
        "from ._impl import f\nfrom math import hypot\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("reexporting_pkg")
    with Tripwire({"reexporting_pkg": module}) as wire:
        module.hypot(3, 4)
        math.hypot(3, 4)
    assert wire.called == []
    with Tripwire({"reexporting_pkg": module}) as wire:
        module.f(1)
    assert wire.called == ["reexporting_pkg"]
