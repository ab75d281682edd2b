"""Companion package of the book *Self-Attention in Vision*.

Every module holds one concept and names the chapter that explains it:

========================  =====================================================
module                    concept (chapter)
========================  =====================================================
``attention``             softmax, scaled dot-product, multi-head (1, 3)
``scaling``               why scores are divided by √d_k; softmax Jacobian (2)
``torch_bridge``          weights and masks crossing into PyTorch (3, 4)
``masks``                 boolean masks, True = this query may use this key (4)
``position``              sinusoidal encodings, relative position bias (5)
``vit``                   a tiny vision transformer for the digits (5, 6, 11)
``cost``                  tokens, score entries, bytes, FLOP formulas (7, 8)
``blockwise``             exact attention in blocks, online softmax (7)
``timing``                time and peak memory measured on this machine (7)
``flops``                 FLOPs counted on real PyTorch modules (8)
``windows``               window and shifted-window attention, Swin (8)
``nonlocal_block``        non-local blocks over video, SAGAN's gate (9)
``matching``              cross-attention matching, correlation volumes (10)
``data``                  synthetic images and videos with known answers
``patches``               patch grids, digit patches (1, 2)
``example``               the running example and its random stream (1-4)
``plots``                 the figures every chapter shares
``interactive``           kernel-free HTML figures and live ipywidgets
``exercises``             the checks students call, one module per chapter
========================  =====================================================

Import the module you need, for example ``from selfattention import attention``.
"""

__version__ = "1.0.0"
