"""The recipes' registry: ``make train`` runs them and writes their files.

A *recipe* is a function of no arguments that trains one model from fixed
seeds and returns its weights and curves as a flat ``dict`` of NumPy arrays.
It is registered with :func:`recipe`; ``make train`` (``scripts/train.py``)
runs every recipe, two at a time (:func:`retrain_all`), and :func:`write`
saves ``<name>.npz`` into the models' package
(``selfattention_models/trained/``, where
:func:`selfattention_models.trained.load` finds it) with its SHA-256 in
``MANIFEST.json``; a recipe that reads another's file names it in ``after``,
and starts only once that file is written.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import importlib
import io
import json
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from selfattention_models import trained

__all__ = ["Recipe", "Seconds", "recipe", "recipes", "retrain", "retrain_all",
           "write", "weight_arrays"]

# The modules whose import registers recipes; one line per module.
RECIPE_MODULES: tuple[str, ...] = (
    "selfattention_training.stereo",
    "selfattention_training.scale",
    "selfattention_training.mnist",
    "selfattention_training.digits",
    "selfattention_training.photographs",
)


@dataclass(frozen=True)
class Recipe:
    """A registered recipe: its ``name``, the function that trains, where
    that function lives, how closely a retrain must reproduce the file
    (``rtol``, ``atol``: 0 means bit for bit), the recipes whose files it
    reads (``after``) and the threads it pins PyTorch to (``threads``)."""

    name: str
    train: Callable[[], dict]
    where: str
    rtol: float = 0.0
    atol: float = 0.0
    retrained_by_test: bool = False
    after: tuple[str, ...] = ()
    threads: int = 1


_RECIPES: dict[str, Recipe] = {}


def recipe(name: str, rtol: float = 0.0, atol: float = 0.0,
           retrained_by_test: bool = False, after: tuple[str, ...] = (),
           threads: int = 1):
    """Register the decorated function as the recipe ``name``;
    ``retrained_by_test`` marks a recipe cheap enough for ``make test`` to
    retrain and compare with its file, within ``rtol`` and ``atol``;
    ``after`` names the recipes whose files it reads, which ``make train``
    writes before it starts; ``threads`` says how many threads it trains
    on, and so how many of ``make train``'s slots it takes."""
    if isinstance(after, str):
        raise TypeError(f"after is a tuple of recipe names, got {after!r}")

    def register(fn):
        if name in _RECIPES:
            raise ValueError(f"recipe {name!r} is registered twice")
        _RECIPES[name] = Recipe(name, fn, f"{fn.__module__}:{fn.__name__}",
                                float(rtol), float(atol),
                                bool(retrained_by_test), tuple(after),
                                int(threads))
        return fn
    return register


def recipes() -> dict[str, Recipe]:
    """Every registered recipe by name (importing the modules that hold
    them)."""
    for module in RECIPE_MODULES:
        importlib.import_module(module)
    return dict(sorted(_RECIPES.items()))


def weight_arrays(model) -> dict[str, np.ndarray]:
    """A model's ``state_dict`` as NumPy arrays named ``w/<name>``, the
    form in which the recipes save weights
    (:func:`selfattention_models.trained.load_weight_arrays` reads them
    back)."""
    return {f"w/{k}": v.detach().numpy().copy()
            for k, v in model.state_dict().items()}


def _checked(arrays) -> dict[str, np.ndarray]:
    if not isinstance(arrays, dict) or not arrays:
        raise TypeError("a recipe returns a non-empty dict of arrays")
    out = {}
    for key, value in arrays.items():
        value = np.asarray(value)
        if value.dtype == object:
            raise TypeError(f"{key!r} is not a numeric array")
        out[str(key)] = value
    return out


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    # np.savez writes every member with the fixed date of 1980, so equal
    # arrays give equal bytes, and so equal checksums.
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **dict(sorted(arrays.items())))
    return buffer.getvalue()


def write(name: str, arrays: dict) -> dict:
    """Save ``arrays`` as ``trained/<name>.npz`` and record its checksum in
    the manifest; returns the manifest entry."""
    data = _npz_bytes(_checked(arrays))
    trained.TRAINED_DIR.mkdir(exist_ok=True)
    (trained.TRAINED_DIR / f"{name}.npz").write_bytes(data)
    entry = {"file": f"{name}.npz", "bytes": len(data),
             "sha256": hashlib.sha256(data).hexdigest(),
             "recipe": recipes()[name].where}
    manifest = (json.loads(trained.MANIFEST.read_text())
                if trained.MANIFEST.exists() else {})
    manifest[name] = entry
    trained.MANIFEST.write_text(
        json.dumps(dict(sorted(manifest.items())), indent=2) + "\n")
    return entry


class Seconds(NamedTuple):
    """How long a recipe took: on the clock (``wall``), and on the CPU
    (``cpu``, every thread of its process), which a busy machine does not
    stretch."""

    wall: float
    cpu: float


def retrain(name: str) -> tuple[dict[str, np.ndarray], Seconds]:
    """Run the recipe ``name`` again: its arrays and the seconds it took."""
    start, start_cpu = time.perf_counter(), time.process_time()
    arrays = _checked(recipes()[name].train())
    return arrays, Seconds(time.perf_counter() - start,
                           time.process_time() - start_cpu)


def retrain_all(names, jobs: int = 2, done=None, executor=None) -> None:
    """Retrain the recipes ``names`` in ``jobs`` slots, each recipe in a
    fresh worker process taking as many slots as its ``threads`` (at most
    all of them), so that no thread waits for a core; a recipe starts only
    after every recipe of its ``after`` that is among ``names`` has
    finished and ``done`` has returned for it.

    ``done(name, arrays, seconds)`` runs in this process as each recipe
    finishes (``make train`` writes the file there). Ready recipes start
    widest first (most ``threads``), then those that others wait for,
    then in the order of ``names``; one that needs more slots than are
    free holds back those after it.
    ``executor`` replaces the process pool (the tests pass threads).
    """
    known = recipes()
    names = list(dict.fromkeys(names))
    unknown = sorted(set(names) - set(known))
    unknown += sorted({a for n in names if n in known
                       for a in known[n].after if a not in known})
    if unknown:
        raise KeyError(f"unknown recipe(s) {unknown}")
    waits = {n: {a for a in known[n].after if a in names} for n in names}
    awaited = {a for w in waits.values() for a in w}
    slots = {n: min(max(known[n].threads, 1), jobs) for n in names}
    # Wider recipes first: one that takes every slot then runs at the start,
    # while the pool is empty, instead of holding back the others while a
    # slot it waits for stands idle.
    todo = sorted(names, key=lambda n: (-slots[n], n not in awaited,
                                        names.index(n)))
    if executor is None:
        import multiprocessing

        # A fresh interpreter per recipe: no threads, seeds or memory carried
        # over from another recipe (and no fork of a process holding
        # PyTorch's thread pools).
        executor = concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=multiprocessing.get_context("spawn"),
            max_tasks_per_child=1)
    running: dict = {}
    with executor:
        while todo or running:
            for name in [n for n in todo if not waits[n]]:
                if sum(slots[r] for r in running.values()) + slots[name] \
                        > jobs:
                    break
                running[executor.submit(retrain, name)] = name
                todo.remove(name)
            if not running:
                raise ValueError(f"the recipes {todo} wait for each other "
                                 f"(see their after=)")
            finished, _ = concurrent.futures.wait(
                running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                arrays, seconds = future.result()
                if done is not None:
                    done(name, arrays, seconds)
                for w in waits.values():
                    w.discard(name)
