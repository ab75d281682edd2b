"""A live widget of :ref:`ch-photographs`: choose a packaged photograph or
upload one, place a crop, pick a patch, and see ``draw`` redrawn. It needs
a kernel (Jupyter, Colab, Binder)."""

from __future__ import annotations

import html
import io
import warnings

import numpy as np

from ..photos import NAMES, _at_zoom, photograph

#: What an upload may be: bytes, pixels, and how oblong.
MAX_BYTES, MAX_PIXELS, MAX_ASPECT = 25 * 2 ** 20, 50_000_000, 8
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


def crop_at(photo, top, left, size=32):
    """The ``size`` × ``size`` crop of ``photo`` whose corner lies at the
    fractions ``top`` and ``left`` (0 to 1) of the room the photograph
    leaves, and that corner in pixels ``(row, col)``."""
    r = round(top * (photo.shape[0] - size))
    c = round(left * (photo.shape[1] - size))
    return photo[r:r + size, c:c + size], (r, c)


def photo_picker(draw, names=NAMES, short_side=384, size=32, grid=(8, 8)):
    """A live widget: one of the photographs ``names`` or an uploaded one,
    a crop placed with two sliders, a query patch picked with two more, and
    ``draw(crop, query, title)`` redrawn on each change (``query`` the
    patch's index, row-major, on ``grid``). A file it cannot use leaves the
    figure as it was and says why under the controls."""
    import ipywidgets as w

    photos = {}
    source = w.Dropdown(options=list(names), description="photograph")
    upload = w.FileUpload(accept="image/*", multiple=False,
                          description="upload")
    top, left = (w.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05,
                               description=f"crop from {side}")
                 for side in ("top", "left"))
    row, col = (w.IntSlider(value=k // 2, min=0, max=k - 1,
                            description=f"patch {what}")
                for what, k in (("row", grid[0]), ("column", grid[1])))
    status = w.HTML()
    out = w.Output(layout=w.Layout(min_height="320px"))
    for control in (source, top, left, row, col):
        control.style.description_width = "initial"

    def redraw(_=None):
        name = source.value
        photo = photos.get(name)
        if photo is None:
            photo = photograph(name, short_side)
        crop, (r, c) = crop_at(photo, top.value, left.value, size)
        with out:
            out.clear_output(wait=True)
            draw(crop, row.value * grid[1] + col.value,
                 f"{name}, crop at ({r}, {c}) of "
                 f"{photo.shape[0]} × {photo.shape[1]}")

    def uploaded(change):
        files = change["new"]
        if not files:
            return
        name = "upload: " + str(files[0].get("name", "file"))[:40]
        try:
            photo = photo_from_bytes(files[0]["content"], short_side, size)
        except ValueError as err:
            status.value = (f"<b>{html.escape(name[8:])}</b> cannot be "
                            f"used: {html.escape(str(err))}.")
            return
        photos[name] = photo
        status.value = (f"<b>{html.escape(name[8:])}</b>: grey, resized to "
                        f"{photo.shape[0]} × {photo.shape[1]} pixels.")
        source.options = [o for o in source.options if o != name] + [name]
        if source.value == name:
            redraw()
        else:
            source.value = name              # redraws

    for control in (source, top, left, row, col):
        control.observe(redraw, "value")
    upload.observe(uploaded, "value")
    redraw()
    return w.VBox([w.HBox([source, upload]), w.HBox([top, left]),
                   w.HBox([row, col]), status, out])
