"""Record in each PNG figure the size of its smallest text (``make execute``).

``scripts/execute_notebooks.py`` runs this file in every kernel it starts,
before the notebook's first cell. From then on, every figure that
matplotlib's Agg canvas writes as PNG (the inline backend's figures among
them) carries a ``tEXt`` chunk ``selfattention:smallest-text-px``: the
smallest font size among the texts that were drawn into it (titles, labels,
tick labels, legends, annotations; a hidden axis draws none), in pixels of
the PNG, or ``none`` for a picture without text. A figure stored at twice
its size (retina) and shown at ``w`` CSS pixels wide from a PNG ``W``
pixels wide shows that text at ``px * w / W`` CSS pixels: what
``tests/e2e/test_layout.py`` measures on a phone and on a laptop.

Only the PNG's bytes change (nbval compares no image); nothing here is
part of what a reader runs.
"""

import io
import struct
import zlib

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

KEY = b"selfattention:smallest-text-px"
_drawn: list[float] = []
_text_draw = Text.draw
_print_png = FigureCanvasAgg.print_png


def _recording_draw(self, renderer):
    if self.get_visible() and self.get_text().strip():
        _drawn.append(self.get_fontsize())
    return _text_draw(self, renderer)


def _with_chunk(png: bytes, key: bytes, value: bytes) -> bytes:
    """``png`` with a tEXt chunk ``key``: ``value`` right after its header."""
    body = key + b"\0" + value
    chunk = (struct.pack(">I", len(body)) + b"tEXt" + body
             + struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF))
    end_of_header = 8 + 4 + 4 + 13 + 4     # signature, IHDR chunk
    return png[:end_of_header] + chunk + png[end_of_header:]


def _recording_print_png(self, filename_or_obj, *, metadata=None,
                         pil_kwargs=None, **_settings):
    # print_figure hands a print method outside matplotlib its own settings
    # too (dpi, facecolor, orientation ...), already applied to the figure;
    # print_png takes none of them
    kwargs = {"metadata": metadata, "pil_kwargs": pil_kwargs}
    if not hasattr(filename_or_obj, "write"):
        return _print_png(self, filename_or_obj, **kwargs)
    _drawn.clear()
    buffer = io.BytesIO()
    _print_png(self, buffer, **kwargs)
    smallest = (f"{min(_drawn) * self.figure.dpi / 72:.2f}" if _drawn
                else "none")
    filename_or_obj.write(_with_chunk(buffer.getvalue(), KEY,
                                      smallest.encode()))


Text.draw = _recording_draw
FigureCanvasAgg.print_png = _recording_print_png
