"""Photographs that scikit-image and scikit-learn ship in their wheels, as grey
levels, split by photograph, and random crops; :data:`CATALOGUE` gives each
one's source and licence. :func:`photo_from_bytes` makes an uploaded file a
photograph as these are.
"""

import io
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from selfattention._validate import (boundary, generator, integer, one_of,
                                     optional, positive_int, require,
                                     sequence)

__all__ = ["Photograph", "CATALOGUE", "NAMES", "photograph",
           "split_photographs", "random_crops", "photo_from_bytes",
           "MAX_BYTES", "MAX_PIXELS", "MAX_ASPECT"]


@dataclass(frozen=True)
class Photograph:
    """One photograph: where it comes from and on what terms."""

    name: str        # the name this module knows it by
    loader: str      # the package function that returns it
    source: str      # who made it, as the package states
    licence: str     # as the package states it


_SKIMAGE = "skimage.data."
#: Every photograph this module can load, with its source and licence.
CATALOGUE = (
    Photograph("astronaut", _SKIMAGE + "astronaut",
               "NASA, Eileen Collins", "public domain"),
    Photograph("brick", _SKIMAGE + "brick", "CC0Textures", "CC0"),
    Photograph("camera", _SKIMAGE + "camera", "Lav Varshney", "CC0"),
    Photograph("cat", _SKIMAGE + "cat", "Stefan van der Walt", "CC0"),
    Photograph("cell", _SKIMAGE + "cell",
               "quantitative phase image (qpformat)", "CC0"),
    Photograph("clock", _SKIMAGE + "clock", "Stefan van der Walt",
               "public domain"),
    Photograph("coffee", _SKIMAGE + "coffee", "Rachel Michetti", "CC0"),
    Photograph("coins", _SKIMAGE + "coins", "Brooklyn Museum",
               "no known copyright restrictions"),
    Photograph("grass", _SKIMAGE + "grass", "linolafett (DeviantArt)",
               "CC0"),
    Photograph("gravel", _SKIMAGE + "gravel", "CC0Textures", "CC0"),
    Photograph("hubble_deep_field", _SKIMAGE + "hubble_deep_field",
               "NASA, HubbleSite", "public domain"),
    Photograph("immunohistochemistry", _SKIMAGE + "immunohistochemistry",
               "Center for Microscopy and Molecular Imaging",
               "no known copyright restrictions"),
    Photograph("microaneurysms", _SKIMAGE + "microaneurysms",
               "Andreas Maier", "CC0"),
    Photograph("moon", _SKIMAGE + "moon", "scikit-image's sample data",
               "not stated by scikit-image 0.26"),
    Photograph("page", _SKIMAGE + "page", "scikit-image's sample data",
               "not stated by scikit-image 0.26"),
    Photograph("retina", _SKIMAGE + "retina",
               "Mikael Häggström (Wikimedia Commons)", "CC0"),
    Photograph("rocket", _SKIMAGE + "rocket", "SpaceX", "public domain"),
    Photograph("text", _SKIMAGE + "text", "Wikipedia (Corner.png)",
               "public domain"),
    Photograph("motorcycle", _SKIMAGE + "stereo_motorcycle",
               "Scharstein et al., Middlebury 2014 (left view)",
               "not stated by scikit-image 0.26"),
    Photograph("china", "sklearn.datasets.load_sample_images",
               "danielbuechele (Flickr)", "CC BY 2.0"),
    Photograph("flower", "sklearn.datasets.load_sample_images",
               "vultilion (Flickr)", "CC BY 2.0"),
)
#: The photographs' names, in catalogue order.
NAMES = tuple(p.name for p in CATALOGUE)


def _load(name):
    """The photograph as its package returns it (uint8, grey or RGB)."""
    if name in ("china", "flower"):
        from sklearn.datasets import load_sample_images
        images = load_sample_images()
        files = [f.rsplit("/", 1)[-1] for f in images.filenames]
        return images.images[files.index(name + ".jpg")]
    import skimage.data
    if name == "motorcycle":
        return skimage.data.stereo_motorcycle()[0]
    return getattr(skimage.data, name)()


@lru_cache(maxsize=None)
def _grey(name, short_side):
    from skimage.color import rgb2gray
    img = _load(name)
    img = rgb2gray(img) if img.ndim == 3 else img / 255.0   # (H, W) [0, 1]
    img = img if short_side is None else _at_zoom(img, short_side)
    img.setflags(write=False)
    return img


def _at_zoom(img, short_side):
    """Grey levels (H, W) resized to ``short_side`` on the shorter side."""
    from skimage.transform import resize
    f = short_side / min(img.shape)
    shape = tuple(max(short_side, round(f * s)) for s in img.shape)
    return np.clip(resize(img, shape, anti_aliasing=f < 1), 0.0, 1.0)


@boundary(name=one_of(*NAMES), short_side=optional(positive_int()))
def photograph(name, short_side=None):
    """The photograph ``name`` as grey levels (H, W) in [0, 1], float64."""
    return _grey(name, short_side)


@boundary(held_out=positive_int(), seed=integer(0),
          names=optional(sequence(one_of(*NAMES))),
          checks=(lambda held_out, names: require(
              held_out < len(set(NAMES if names is None else names)),
              f"held_out must leave at least one of the "
              f"{len(set(NAMES if names is None else names))} photographs "
              f"of names for training, got {held_out}"),))
def split_photographs(held_out=4, seed=0, names=None):
    """Split ``names`` (by default the whole :data:`CATALOGUE`) by
    photograph: ``held_out`` of them, drawn from ``seed``, for testing, the
    rest for training."""
    names = list(dict.fromkeys(NAMES if names is None else names))
    rng = np.random.default_rng(seed)
    test = set(rng.choice(len(names), size=held_out, replace=False).tolist())
    return (tuple(n for i, n in enumerate(names) if i not in test),
            tuple(n for i, n in enumerate(names) if i in test))


def crops_fit(names, size, short_side, photos="names") -> None:
    """Some photographs are named (by the argument ``photos``), and a crop
    fits their shorter side."""
    require(len(names) > 0, f"{photos} must name at least one photograph, "
                            f"got none")
    require(size <= short_side, f"size must fit the photographs' shorter "
            f"side, short_side={short_side} pixels, got {size}")


@boundary(rng=generator(), names=sequence(one_of(*NAMES)), n=positive_int(),
          size=positive_int(), short_side=positive_int(),
          checks=(lambda names, size, short_side: crops_fit(names, size,
                                                            short_side),))
def random_crops(rng, names, n, size, short_side=128):
    """``n`` square crops (n, size, size) of the photographs ``names``."""
    crops = np.empty((n, size, size))                   # (n, size, size)
    source = rng.integers(len(names), size=n)           # (n,)
    for i, k in enumerate(source):
        img = photograph(names[k], short_side)
        r = rng.integers(img.shape[0] - size + 1)
        c = rng.integers(img.shape[1] - size + 1)
        crops[i] = img[r:r + size, c:c + size]
    return crops, source


#: The most bytes an uploaded file may have.
MAX_BYTES = 25 * 2 ** 20
#: The most pixels an uploaded image may have.
MAX_PIXELS = 50_000_000
#: The most times an uploaded image's longer side may be its shorter.
MAX_ASPECT = 8
_DEEP = ("I;16", "I;16L", "I;16B", "I;16N")      # 16-bit grey


def _grey_levels(img, full_scale=None):
    """A decoded PIL image as grey levels (H, W) in [0, 1]: transparency
    over white, colour by ``skimage.color.rgb2gray``, integer and float
    grey by ``full_scale`` (by default their range)."""
    from PIL import Image
    from skimage.color import rgb2gray

    if img.mode in ("I", "F"):
        a = np.asarray(img, dtype=float)
        if not np.isfinite(a).all():
            raise ValueError("it holds pixel values that are not finite "
                             "numbers")
        if full_scale is None:
            a = a - a.min()
            full_scale = a.max() or 1.0
        return np.clip(a / full_scale, 0.0, 1.0)
    if img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info:
        img = Image.alpha_composite(Image.new("RGBA", img.size, "white"),
                                    img.convert("RGBA"))
    return rgb2gray(np.asarray(img.convert("RGB"), dtype=float) / 255.0)


def photo_from_bytes(data, short_side=384, size=32):
    """An uploaded file as the book's photographs are: grey levels (H, W)
    in [0, 1], resized to ``short_side`` pixels on the shorter side.

    Raises ``ValueError`` saying what is wrong with the file: not an image
    Pillow can read, over :data:`MAX_BYTES` bytes or :data:`MAX_PIXELS`
    pixels, a shorter side below ``size`` (one crop) or a longer side over
    :data:`MAX_ASPECT` times it.
    """
    from PIL import Image, ImageOps

    data = bytes(data)
    if len(data) > MAX_BYTES:
        raise ValueError(f"the file has {len(data) / 2 ** 20:.1f} MiB; "
                         f"at most {MAX_BYTES // 2 ** 20} MiB, please")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            img = Image.open(io.BytesIO(data))
            w, h = img.size
        except Image.DecompressionBombError:
            raise ValueError(f"the image has too many pixels; at most "
                             f"{MAX_PIXELS // 10 ** 6} million, please") \
                from None
        except Exception:        # whatever a hostile file makes Pillow do
            raise ValueError("this is not an image Pillow can read (PNG, "
                             "JPEG, TIFF, ...)") from None
        if w * h > MAX_PIXELS:
            raise ValueError(f"the image has {w} × {h} pixels; at most "
                             f"{MAX_PIXELS // 10 ** 6} million, please")
        if min(w, h) < size:
            raise ValueError(f"the image has {w} × {h} pixels; a crop needs "
                             f"at least {size} on each side")
        if max(w, h) > MAX_ASPECT * min(w, h):
            raise ValueError(f"the image has {w} × {h} pixels; its longer "
                             f"side may be at most {MAX_ASPECT} times the "
                             f"shorter")
        try:
            img = ImageOps.exif_transpose(img)
            full_scale = 65535.0 if img.mode in _DEEP else None
            if img.mode in _DEEP + ("1", "P"):   # modes reduce() refuses
                img = img.convert({"1": "L", "P": "RGBA"}.get(img.mode, "I"))
            k = min(img.size) // (2 * short_side)
            if k >= 2:                           # box-averaged: less memory
                img = img.reduce(k)
            grey = _grey_levels(img, full_scale)
        except ValueError as err:
            raise ValueError(f"cannot use this image: {err}") from None
        except Exception:
            raise ValueError("the image could not be decoded (a damaged or "
                             "truncated file?)") from None
    return _at_zoom(grey, short_side)
