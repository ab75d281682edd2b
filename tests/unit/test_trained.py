"""The trained models: every file matches its checksum and its recipe (in
``selfattention_training``), travels with the installed package, loads into
its model, and ``make test`` retrains one recipe of each training function
marked for it (``make sweep`` the others) and finds the same arrays."""

import fnmatch
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from setuptools.config.pyprojecttoml import read_configuration

from selfattention_models import trained
from selfattention_training import recipes

RECIPES = recipes.recipes()
MANIFEST = json.loads(trained.MANIFEST.read_text())


def test_every_recipe_has_a_file_and_every_file_a_recipe():
    assert set(RECIPES) == set(MANIFEST)
    for name, entry in MANIFEST.items():
        assert entry["recipe"] == RECIPES[name].where
        assert trained.load(name)          # checksum verified on load


def test_the_installed_package_carries_every_trained_file():
    """``pip install .`` (Colab, Binder) copies the package data that
    pyproject.toml names: every file of ``trained/`` must match it."""
    root = Path(__file__).resolve().parents[2]
    config = read_configuration(root / "pyproject.toml")["tool"]["setuptools"]
    assert "selfattention_models" in config["packages"]
    patterns = config["package-data"]["selfattention_models"]
    package = trained.TRAINED_DIR.parent
    files = [path.relative_to(package).as_posix()
             for path in trained.TRAINED_DIR.iterdir()]
    assert len(files) == len(MANIFEST) + 1              # and MANIFEST.json
    left_out = [f for f in files
                if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert left_out == []


def test_weight_arrays_load_into_their_model_and_others_are_refused():
    model = torch.nn.Linear(3, 2)
    arrays = {f"w/{k}": v.detach().numpy() * 2 + 1
              for k, v in model.state_dict().items()}
    loaded = trained.load_weight_arrays(torch.nn.Linear(3, 2),
                                        {**arrays, "loss": np.ones(4)})
    assert not loaded.training
    for key, value in loaded.state_dict().items():
        assert value.dtype == torch.float64
        assert np.array_equal(value.numpy(), arrays[f"w/{key}"])
    with pytest.raises(RuntimeError):            # a weight left out
        trained.load_weight_arrays(torch.nn.Linear(3, 2),
                                   {"w/weight": arrays["w/weight"]})
    with pytest.raises(RuntimeError):            # another model's shapes
        trained.load_weight_arrays(torch.nn.Linear(4, 2), arrays)


def test_files_stay_small():
    total = sum(entry["bytes"] for entry in MANIFEST.values())
    assert total < 8 * 2**20, f"trained files take {total} bytes"


def test_a_changed_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)
    monkeypatch.setattr(trained, "MANIFEST", tmp_path / "MANIFEST.json")
    name = next(iter(RECIPES))
    recipes.write(name, {"w": np.arange(6.0).reshape(2, 3)})
    assert np.array_equal(trained.load(name)["w"],
                          np.arange(6.0).reshape(2, 3))
    path = tmp_path / f"{name}.npz"
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        trained.load(name)
    with pytest.raises(KeyError):
        trained.load("no-such-model")


def test_equal_arrays_give_equal_bytes():
    arrays = {"b": np.ones(3, np.float32), "a": np.zeros((2, 2))}
    assert recipes._npz_bytes(arrays) == recipes._npz_bytes(dict(arrays))


def test_some_recipe_is_retrained_by_the_tests():
    assert any(r.retrained_by_test for r in RECIPES.values())


RETRAINED = sorted(n for n, r in RECIPES.items() if r.retrained_by_test)
#: The retrains make test runs: one recipe per training function (its
#: cheapest); make sweep runs the others.
SAMPLE = ("vit-digits-10-no-position", "vit-mnist-tiny", "photos-mim-tiny",
          "clutter-vit-tiny", "clutter-detr-tiny")


def test_the_sample_retrains_every_training_function():
    assert set(SAMPLE) <= set(RETRAINED)
    assert {RECIPES[n].where for n in SAMPLE} == {
        RECIPES[n].where for n in RETRAINED}


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    n if n in SAMPLE else pytest.param(n, marks=pytest.mark.sweep)
    for n in RETRAINED])
def test_a_retrain_reproduces_the_committed_file(name):
    recipe = RECIPES[name]
    stored = trained.load(name)
    again, _ = recipes.retrain(name)
    assert set(again) == set(stored)
    for key in stored:
        assert again[key].shape == stored[key].shape, key
        assert again[key].dtype == stored[key].dtype, key
        np.testing.assert_allclose(again[key], stored[key], rtol=recipe.rtol,
                                   atol=recipe.atol, err_msg=key)


def test_every_recipe_reads_only_recipes_that_exist():
    for name, entry in RECIPES.items():
        assert set(entry.after) <= set(RECIPES) - {name}, name
    assert RECIPES["vit-mnist-ablation"].after == ("vit-mnist",)
    assert RECIPES["vit-mnist-misconceptions"].after == ("vit-mnist",)
    assert RECIPES["clutter-vit-misconceptions"].after == ("clutter-vit",)
    assert RECIPES["stereo-matcher"].after == ("stereo-encoder",)
    assert RECIPES["vit-mnist"].threads == 2


def _fake_recipes(monkeypatch, events, after, threads=None):
    """Recipes that log when they start and end, and sleep a little."""
    import time

    fakes = {}
    for name, seconds in (("a", 0.2), ("b", 0.0), ("c", 0.05), ("d", 0.0)):
        def train(name=name, seconds=seconds):
            events.append(("start", name))
            time.sleep(seconds)
            events.append(("end", name))
            return {"x": np.zeros(1)}
        fakes[name] = recipes.Recipe(name, train, "fake",
                                     after=after.get(name, ()),
                                     threads=(threads or {}).get(name, 1))
    monkeypatch.setattr(recipes, "recipes", lambda: dict(fakes))


def test_a_recipe_starts_only_after_the_files_it_reads_are_written(
        monkeypatch):
    """Two at a time, and b (which reads a) starts only after a's file
    was written, though b comes first and a takes longest; c and d, which
    read nothing, do not wait for a."""
    from concurrent.futures import ThreadPoolExecutor

    events = []
    _fake_recipes(monkeypatch, events, {"b": ("a",)})

    def done(name, arrays, seconds):
        events.append(("written", name))

    recipes.retrain_all(["b", "a", "c", "d"], 2, done,
                        ThreadPoolExecutor(2))
    assert events.index(("written", "a")) < events.index(("start", "b"))
    assert events.index(("written", "c")) < events.index(("written", "a"))
    assert {e for e in events if e[0] == "written"} == {
        ("written", n) for n in "abcd"}


def test_recipes_that_wait_for_each_other_are_refused(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    _fake_recipes(monkeypatch, [], {"a": ("b",), "b": ("a",)})
    with pytest.raises(ValueError, match="wait for each other"):
        recipes.retrain_all(["a", "b"], 2, None, ThreadPoolExecutor(2))
    with pytest.raises(KeyError):
        recipes.retrain_all(["a", "zz"], 2, None, ThreadPoolExecutor(2))


def test_a_recipe_on_two_threads_runs_alone(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    events = []
    _fake_recipes(monkeypatch, events, {}, {"c": 2})
    recipes.retrain_all(["a", "b", "c", "d"], 2, None,
                        ThreadPoolExecutor(2))
    start, end = events.index(("start", "c")), events.index(("end", "c"))
    assert end == start + 1, events


def test_a_recipe_on_two_threads_starts_while_the_pool_is_empty(monkeypatch):
    """c takes both slots and comes last among names: it starts first, so
    that no slot stands idle while it waits for the other to free."""
    from concurrent.futures import ThreadPoolExecutor

    events = []
    _fake_recipes(monkeypatch, events, {}, {"c": 2})
    recipes.retrain_all(["a", "b", "d", "c"], 2, None,
                        ThreadPoolExecutor(2))
    assert events[:2] == [("start", "c"), ("end", "c")], events
