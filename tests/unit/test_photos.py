"""Photographs from installed packages, split by photograph, cropped from a
seed; scenes of digits pasted on them, with exact masks and boxes; and
uploaded files decoded as the packaged photographs are, or refused."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from selfattention_models import photos, scenes
from selfattention_models.mnist import mnist_digits
from support import encoded, hostile_files

FEW = ("astronaut", "coins", "text")          # small, quick to load


@pytest.mark.slow
def test_every_photograph_loads_as_grey_levels_at_one_zoom():
    for name in photos.NAMES:
        img = photos.photograph(name)
        assert img.ndim == 2 and img.dtype == np.float64
        assert 0.0 <= img.min() and img.max() <= 1.0 and img.std() > 0.02
        assert not img.flags.writeable
        small = photos.photograph(name, 64)
        assert min(small.shape) == 64
        ratio = small.shape[1] / small.shape[0]
        assert abs(ratio - img.shape[1] / img.shape[0]) < 0.02


def test_the_catalogue_names_a_licence_and_a_loader_for_each_photograph():
    assert len(set(photos.NAMES)) == len(photos.CATALOGUE) >= 20
    for p in photos.CATALOGUE:
        assert p.licence and p.source
        assert p.loader.split(".")[0] in ("skimage", "sklearn")


def test_a_split_puts_each_photograph_on_one_side():
    for seed in range(5):
        train, test = photos.split_photographs(held_out=4, seed=seed)
        assert len(test) == 4 and not set(train) & set(test)
        assert set(train) | set(test) == set(photos.NAMES)
    assert photos.split_photographs(seed=1) == photos.split_photographs(seed=1)
    draws = {photos.split_photographs(seed=s)[1] for s in range(5)}
    assert len(draws) > 1


@pytest.mark.parametrize("held_out", [3, 7])
def test_a_split_that_leaves_no_training_photograph_is_refused(held_out):
    with pytest.raises(ValueError, match="^held_out"):
        photos.split_photographs(held_out=held_out, names=FEW + FEW[:1])
    photos.split_photographs(held_out=2, names=FEW)


def test_each_crop_is_a_window_of_the_photograph_it_names():
    rng = np.random.default_rng(3)
    crops, source = photos.random_crops(rng, FEW, 6, 24, short_side=48)
    assert crops.shape == (6, 24, 24) and source.shape == (6,)
    for crop, k in zip(crops, source):
        windows = sliding_window_view(photos.photograph(FEW[k], 48),
                                      (24, 24))
        assert np.any(np.all(windows == crop, axis=(-2, -1)))
    again, _ = photos.random_crops(np.random.default_rng(3), FEW, 6, 24,
                                   short_side=48)
    assert np.array_equal(again, crops)


def test_a_crop_larger_than_the_photographs_is_refused():
    with pytest.raises(ValueError, match="^size"):
        photos.random_crops(np.random.default_rng(0), FEW, 2, 65,
                            short_side=64)
    with pytest.raises(ValueError, match="^names"):
        photos.random_crops(np.random.default_rng(0), [], 2, 8)


def test_the_digit_split_is_disjoint_and_stratified():
    train, test = scenes.split_digits(0.2, seed=0)
    labels = mnist_digits()[1]
    assert len(train) + len(test) == len(labels)
    assert not np.intersect1d(train, test).size
    assert np.array_equal(np.bincount(labels[test]), np.full(10, 100))


def _scenes(rng, **kw):
    args = dict(n=40, photos=FEW, digits=np.arange(5000), size=48,
                n_digits=(1, 3), digit_size=(14, 18), short_side=64)
    return scenes.digit_scenes(rng, **{**args, **kw})


def test_each_digit_has_a_tight_box_around_its_mask_and_none_overlap():
    s = _scenes(np.random.default_rng(0))
    assert s.images.shape == (40, 48, 48) and s.segments.shape == (40, 48, 48)
    assert 0.0 <= s.images.min() and s.images.max() <= 1.0
    assert set(np.unique(s.counts)) <= {1, 2, 3}
    for i, count in enumerate(s.counts):
        assert np.all(s.labels[i, count:] == -1)
        assert np.all(s.labels[i, :count] >= 0)
        assert set(np.unique(s.segments[i])) <= set(range(count + 1))
        for j in range(count):
            top, left, bottom, right = s.boxes[i, j]
            rows, cols = np.nonzero(s.mask(i, j))
            assert (rows.min(), cols.min(), rows.max() + 1,
                    cols.max() + 1) == (top, left, bottom, right)
            # The ink is painted to contrast: all light or all dark.
            ink = s.images[i][s.mask(i, j)]
            assert np.all(ink >= 0.5) or np.all(ink <= 0.5)


def test_scenes_use_only_the_digits_and_photographs_given():
    threes = np.flatnonzero(mnist_digits()[1] == 3)
    s = _scenes(np.random.default_rng(1), digits=threes, photos=FEW[1:])
    assert set(s.labels[s.labels >= 0]) == {3}
    assert set(s.photos) <= {0, 1}
    again = _scenes(np.random.default_rng(1), digits=threes, photos=FEW[1:])
    assert np.array_equal(again.images, s.images)


@pytest.mark.parametrize("bad, arg", [
    (dict(n_digits=(3, 1)), "n_digits"),
    (dict(digit_size=(12, 16)), "digit_size"),
    (dict(n_digits=(1, 4), digit_size=(14, 18)), "n_digits"),
    (dict(digits=np.array([0, 5000])), "digits"),
    (dict(digits=np.array([], np.int64)), "digits"),
    (dict(size=65), "size"),
])
def test_scenes_that_cannot_be_made_are_refused(bad, arg):
    with pytest.raises(ValueError, match=f"^{arg}"):
        _scenes(np.random.default_rng(0), **bad)


def test_the_default_split_passes_the_strict_check_of_a_library_call():
    from selfattention import _validate

    # The library's own calls are checked strictly under the tests: the
    # default names must be the form the maths receives.
    _validate._state.depth = getattr(_validate._state, "depth", 0) + 1
    try:
        by_default = photos.split_photographs()
    finally:
        _validate._state.depth -= 1
    assert by_default == photos.split_photographs(names=list(photos.NAMES))
    assert set(by_default[0]) | set(by_default[1]) == set(photos.NAMES)


# ------------------------------------------------------ uploads
@pytest.mark.parametrize("name", ["camera", "astronaut"])
def test_an_uploaded_photograph_is_what_the_package_gives(name):
    from selfattention_models.photos import _load

    got = photos.photo_from_bytes(encoded(_load(name)), 384, 32)
    np.testing.assert_allclose(got, photos.photograph(name, 384), atol=1e-12)


def test_transparency_lies_over_white_and_16_bits_read_as_8():
    rng = np.random.default_rng(7)
    grey = (rng.random((60, 90)) * 255).astype(np.uint8)
    eight = photos.photo_from_bytes(encoded(grey), 64, 32)
    sixteen = photos.photo_from_bytes(
        encoded(grey.astype(np.uint16) * 257), 64, 32)   # 255 -> 65535
    np.testing.assert_allclose(sixteen, eight, atol=1e-12)
    rgba = np.dstack([np.repeat(grey[..., None], 3, 2),
                      np.full_like(grey, 255)])
    rgba[:, :45, 3] = 0                                    # left half clear
    seen = photos.photo_from_bytes(encoded(rgba), 60, 32)  # not resized
    np.testing.assert_allclose(seen[:, :45], 1.0, atol=1e-12)
    opaque = photos.photo_from_bytes(encoded(grey), 60, 32)
    np.testing.assert_allclose(seen[:, 45:], opaque[:, 45:], atol=1e-12)


@pytest.mark.parametrize("kind", list(hostile_files()))
def test_a_file_it_cannot_use_is_refused_with_a_value_error(kind):
    with pytest.raises(ValueError):
        photos.photo_from_bytes(hostile_files()[kind], 384, 32)
