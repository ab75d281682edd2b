"""Companion package of the book *Self-Attention in Vision*.

Every module holds one concept and names the chapter that explains it:

========================  =====================================================
module                    concept
========================  =====================================================
``attention``             softmax, scaled dot-product and multi-head attention
``masks``                 boolean masks (True = this query may use this key)
``patches``               synthetic images, patch grids, digit patches
``example``               the book's running example and its random stream
``plots``                 the figures every chapter shares
``interactive``           kernel-free HTML figures and live ipywidgets
``exercises``             the checks students call in the exercises
========================  =====================================================

Import the module you need, for example ``from selfattention import attention``.
"""

__version__ = "1.0.0"
