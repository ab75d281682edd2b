"""Companion package of the book *Self-Attention in Vision*.

One concept per module, each naming the chapter that explains it (the
book's appendix on the library lists them); import the one you need, for
example ``from selfattention import attention``.
"""

__version__ = "1.0.0"
