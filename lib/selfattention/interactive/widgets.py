"""Live widgets, which need a kernel: :func:`live` and :func:`drawing_pad`
(:ref:`ch-transformer`).
"""

import numpy as np


def live(function, **widgets):
    """Wrap ``ipywidgets.interactive`` with the book's defaults."""
    import ipywidgets

    widget = ipywidgets.interactive(function, **widgets)
    for control in widget.children[:-1]:
        # the whole label ("temperature", not "temperat…"), and the slider
        # beside it
        control.style.description_width = "initial"
    widget.children[-1].layout.min_height = "320px"
    return widget


def _cells_of(image, cells):
    """Which cells of a ``cells × cells`` grid over ``image`` hold ink."""
    side = image.shape[0] // cells
    blocks = image.reshape(cells, side, cells, side).mean(axis=(1, 3))
    return blocks > 0.3                                  # (cells, cells)


def _image_of(on, side, soften):
    """A grey image from the cells that are on: each cell ``side`` pixels
    of ink, softened by a Gaussian of ``soften`` pixels, peak at 1."""
    from scipy.ndimage import gaussian_filter

    img = np.kron(on.astype(float), np.ones((side, side)))
    img = gaussian_filter(img, soften) if soften else img
    return img / img.max() if img.max() > 0 else img


def pad_image(image, cells=14, soften=0.7):
    """What :func:`drawing_pad` draws when it starts from ``image``
    (28, 28): the cells with ink, softened; the default state's figure."""
    return _image_of(_cells_of(np.asarray(image), cells),
                     image.shape[-1] // cells, soften)


def drawing_pad(draw, images, cells=14, soften=0.7):
    """A live widget: draw a digit on a grid of toggle buttons, or start
    from one of ``images``, and see ``draw(image)`` redrawn."""
    import ipywidgets as w

    side = images.shape[-1] // cells
    buttons = [w.ToggleButton(layout=w.Layout(width="16px", height="16px",
                                              padding="0", margin="0"))
               for _ in range(cells * cells)]
    pad = w.GridBox(buttons, layout=w.Layout(
        grid_template_columns=f"repeat({cells}, 16px)", grid_gap="1px"))
    start = w.Dropdown(options=[(f"test digit {k}", k)
                                for k in range(len(images))],
                       description="start from")
    clear = w.Button(description="clear")
    out = w.Output()
    busy = [False]

    def redraw(_=None):
        if busy[0]:
            return
        on = np.array([b.value for b in buttons]).reshape(cells, cells)
        with out:
            out.clear_output(wait=True)
            draw(_image_of(on, side, soften))

    def load(on):
        busy[0] = True
        for b, v in zip(buttons, on.ravel()):
            b.value = bool(v)
        busy[0] = False
        redraw()

    for b in buttons:
        b.observe(redraw, "value")
    start.observe(lambda c: load(_cells_of(images[c["new"]], cells)),
                  "value")
    clear.on_click(lambda _: load(np.zeros((cells, cells), bool)))
    load(_cells_of(images[0], cells))
    return w.HBox([w.VBox([start, pad, clear]), out])
