"""Interactive figures, in two layers (every chapter's "Try it" section).

* :func:`patch_explorer`, :func:`frames_explorer`, :func:`bar_explorer` and
  :func:`cost_calculator` return self-contained HTML/JavaScript figures
  built from precomputed numbers. They need no kernel, so they work in the
  static book: pick a patch, see where it attends.
* :func:`live` wraps ``ipywidgets.interactive`` for Jupyter, Colab and
  Binder, where sliders recompute the figure with Python;
  :func:`drawing_pad` is a live grid to draw a digit on, and
  :func:`photo_picker` a live choice (or upload) of a photograph.

Every kernel-free figure works with a keyboard as well as a mouse, and with
a screen reader: the picture you pick a query on is focusable (Tab), the
arrow keys move the query patch, buttons are real buttons that say whether
they are pressed, and a live region states the selection and its strongest
weights in words ("patch (0, 1): most weight on (4, 6) 0.357, ..."), which
screen readers announce after each change. The text is also written into
the HTML by Python, so the figure says something before any script runs.

Weights are drawn in viridis on one fixed colour scale per figure, the
same for every query and head, with a legend that gives its tick values:
two maps of a figure can be compared by their colours. The query patch is
outlined black-white-black, which stands out on every colour of viridis and
on grey images, for every kind of colour vision.

The HTML is a pure function of the inputs (numbers printed with fixed
precision, element ids derived from a hash of the data), so it is byte for
byte stable and nbval can compare it, and it loads nothing from anywhere.

One module per figure: ``patch`` (:func:`patch_explorer`),
``frames`` (:func:`frames_explorer`), ``bars``
(:func:`bar_explorer`), ``calculator`` (:func:`cost_calculator`),
``stereo`` (:func:`stereo_explorer`), ``widgets`` (:func:`live`,
:func:`drawing_pad`) and ``photo`` (:func:`photo_picker`); the box,
legend and colour scale they share are in ``_figure.py``, their scripts
and styles in ``selfattention/static/``.
"""

from ._figure import (_COMMON_JS, _at, _static, _strongest,  # noqa: F401
                      _viridis_stops)
from .bars import bar_explorer
from .calculator import cost_calculator
from .frames import frames_explorer
from .patch import patch_explorer
from .photo import photo_picker
from .stereo import stereo_explorer
from .widgets import drawing_pad, live, pad_image

__all__ = ["patch_explorer", "frames_explorer", "bar_explorer",
           "cost_calculator", "live", "stereo_explorer", "pad_image",
           "drawing_pad", "photo_picker"]
