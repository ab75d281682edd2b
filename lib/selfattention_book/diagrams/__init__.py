"""Schematic diagrams of the book's mechanisms, one function per diagram,
drawn from the library itself (``make diagrams`` saves them as SVG under
``_static/diagrams/``); one module per kind of diagram."""

from ._base import (ALT, CSS_PX_PER_IN, DIAGRAMS, DISPLAY_IN, DISPLAY_PX,
                    MIN_PT, SVG_DPI, draw, smallest_text_pt, to_svg)
from .mechanism import masked_scores, multi_head, scaled_dot_product
from .transformer import transformer_block, vit_pipeline
from .scale import swin_windows, tokenisation_cost
from .video import cross_attention_correlation, nonlocal_block

__all__ = ["DIAGRAMS", "ALT", "DISPLAY_PX", "DISPLAY_IN", "MIN_PT",
           "CSS_PX_PER_IN", "scaled_dot_product", "multi_head",
           "masked_scores", "transformer_block", "vit_pipeline",
           "tokenisation_cost", "swin_windows", "nonlocal_block",
           "cross_attention_correlation", "draw", "to_svg",
           "smallest_text_pt", "SVG_DPI"]
