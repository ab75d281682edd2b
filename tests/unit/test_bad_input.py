"""Every public function of the library (the readers' package, the trained
models' and the training's) refuses every kind of bad argument.

The cases are not written here: they come from the constraints each function
declares with ``@boundary`` (``fn.constraints``), each of which names values
it accepts and values it refuses (``selfattention._validate``). For every
declared argument in turn, the test calls the function with that argument
bad and every other declared one good, and expects the error the constraint
names (``TypeError`` for a wrong type, ``ValueError`` for a wrong value)
with a message that starts with the argument's name. The refused value is
caught at the boundary, so the function's maths never runs.
"""

import importlib
import inspect
import pkgutil
import re

import pytest

import selfattention
import selfattention_models
import selfattention_training

PACKAGES = (selfattention, selfattention_models, selfattention_training)


def _modules():
    for package in PACKAGES:
        for info in pkgutil.walk_packages(package.__path__,
                                          package.__name__ + "."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                yield importlib.import_module(info.name)


def _declared(obj):
    """``obj`` or its ``__init__`` when it declares constraints, else None."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    return target if getattr(target, "constraints", None) else None


def _public_functions():
    seen = set()
    for module in _modules():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            fn = _declared(obj)
            if fn is not None and id(fn) not in seen:
                seen.add(id(fn))
                yield f"{module.__name__}.{name}", obj, fn


FUNCTIONS = list(_public_functions())
CASES = [(label, obj, fn, arg) for label, obj, fn in FUNCTIONS
         for arg in fn.constraints]


def _good_arguments(fn) -> dict:
    """A good value for each declared argument; ``None`` for the other
    required ones (the maths never runs in these tests)."""
    args = {}
    for name, param in inspect.signature(fn).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL,
                                            param.VAR_KEYWORD):
            continue
        if name in fn.constraints:
            args[name] = fn.constraints[name].valid()
        elif param.default is param.empty:
            args[name] = None
    return args


def test_the_library_declares_constraints_in_every_area():
    modules = {label.rsplit(".", 2)[-2] for label, _, _ in FUNCTIONS}
    assert {"attention", "masks", "windows", "blockwise", "cost",
            "position", "patches", "interactive", "mnist", "photo_vit",
            "scenes", "digits", "scale"} <= modules
    assert len(CASES) > 150


def problems(obj, fn, arg) -> list[str]:
    """What goes wrong when ``obj`` is called with each bad value of
    ``arg`` that its constraint names (empty if every one is refused as
    declared)."""
    constraint = fn.constraints[arg]
    if constraint.valid is None:
        return [f"{arg} has no good value"]
    constraint(constraint.valid(), arg)              # the good value is good
    bad_values = constraint.invalid()
    if not bad_values:
        return [f"the constraint on {arg} refuses nothing"]
    found = []
    for bad, error in bad_values:
        args = _good_arguments(fn)
        args[arg] = bad
        try:
            obj(**args)
        except error as err:
            if not re.match(rf"{re.escape(arg)}\b", str(err)):
                found.append(f"{arg}={bad!r}: the message does not start "
                             f"with {arg}: {err}")
        else:
            found.append(f"{arg}={bad!r} was accepted")
    return found


@pytest.mark.parametrize("label, obj, fn, arg", CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_a_bad_argument_is_refused_and_named(label, obj, fn, arg):
    assert problems(obj, fn, arg) == []


def test_the_test_catches_a_function_that_lets_bad_values_through():
    from selfattention._validate import Constraint, boundary, positive_int

    lax = Constraint(lambda value, name: value, "anything",
                     valid=lambda: 1, invalid=lambda: [(0, ValueError)])

    @boundary(n=lax, k=positive_int())
    def f(n, k=1):
        return n + k

    assert problems(f, f, "n") == ["n=0 was accepted"]
    assert problems(f, f, "k") == []
