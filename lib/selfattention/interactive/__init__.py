"""Interactive figures (every chapter's "Try it"): kernel-free HTML/JavaScript
figures built from precomputed numbers, byte-stable and usable by keyboard and
screen reader, and live ipywidgets for a kernel; one module per figure.
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
