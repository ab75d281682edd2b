"""A live widget of :ref:`ch-photographs`: choose a packaged photograph or
upload one, place a crop, pick a patch, and see ``draw`` redrawn. It needs
a kernel (Jupyter, Colab, Binder)."""

import html


def crop_at(photo, top, left, size=32):
    """The ``size`` × ``size`` crop of ``photo`` whose corner lies at the
    fractions ``top`` and ``left`` (0 to 1) of the room the photograph
    leaves, and that corner in pixels ``(row, col)``."""
    r = round(top * (photo.shape[0] - size))
    c = round(left * (photo.shape[1] - size))
    return photo[r:r + size, c:c + size], (r, c)


def photo_picker(draw, names, photograph, from_bytes, short_side=384,
                 size=32, grid=(8, 8)):
    """A live widget: one of the photographs ``names`` or an uploaded one,
    a crop placed with two sliders, a query patch picked with two more, and
    ``draw(crop, query, title)`` redrawn on each change (``query`` the
    patch's index, row-major, on ``grid``). ``photograph(name,
    short_side)`` loads a named photograph and ``from_bytes(data,
    short_side, size)`` an uploaded file, raising ``ValueError`` when it
    cannot; a file it cannot use leaves the figure as it was and says why
    under the controls."""
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
            photo = from_bytes(files[0]["content"], short_side, size)
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
