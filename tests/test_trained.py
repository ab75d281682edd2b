"""The trained models: every file matches its checksum and its recipe, and
``make test`` retrains the recipes marked for it and finds the same arrays."""

import json

import numpy as np
import pytest

from selfattention import trained

RECIPES = trained.recipes()
MANIFEST = json.loads(trained.MANIFEST.read_text())


def test_every_recipe_has_a_file_and_every_file_a_recipe():
    assert set(RECIPES) == set(MANIFEST)
    for name, entry in MANIFEST.items():
        assert entry["recipe"] == RECIPES[name].where
        assert trained.load(name)          # checksum verified on load


def test_files_stay_small():
    total = sum(entry["bytes"] for entry in MANIFEST.values())
    assert total < 8 * 2**20, f"trained files take {total} bytes"


def test_a_changed_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)
    monkeypatch.setattr(trained, "MANIFEST", tmp_path / "MANIFEST.json")
    name = next(iter(RECIPES))
    trained.write(name, {"w": np.arange(6.0).reshape(2, 3)})
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
    assert trained._npz_bytes(arrays) == trained._npz_bytes(dict(arrays))


def test_some_recipe_is_retrained_by_the_tests():
    assert any(r.retrained_by_test for r in RECIPES.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n, r in RECIPES.items()
                                        if r.retrained_by_test))
def test_a_retrain_reproduces_the_committed_file(name):
    recipe = RECIPES[name]
    stored = trained.load(name)
    again, _ = trained.retrain(name)
    assert set(again) == set(stored)
    for key in stored:
        assert again[key].shape == stored[key].shape, key
        assert again[key].dtype == stored[key].dtype, key
        np.testing.assert_allclose(again[key], stored[key], rtol=recipe.rtol,
                                   atol=recipe.atol, err_msg=key)


def test_torch_threads_are_put_back_even_after_an_error():
    import torch

    before = torch.get_num_threads()
    with trained.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(KeyError), trained.torch_threads(1):
        raise KeyError("x")
    assert torch.get_num_threads() == before
