"""Companion package of the book *Self-Attention in Vision*: one concept per
module, each naming the chapter that explains it.
"""

__version__ = "1.0.0"
