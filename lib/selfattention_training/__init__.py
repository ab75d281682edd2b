"""Training: the recipes of ``make train`` (``scripts/train.py``).

Each recipe trains one model of the book from fixed seeds; ``make train``
writes its weights and curves, with their checksums, into the models'
package (``selfattention_models/trained/``), where the chapters load them
with :func:`selfattention_models.trained.load`. The registry is
:mod:`selfattention_training.recipes`; the recipes live in modules named
after the models they train: :mod:`~selfattention_training.mnist`,
:mod:`~selfattention_training.digits`, :mod:`~selfattention_training.scale`,
:mod:`~selfattention_training.stereo` and
:mod:`~selfattention_training.photographs`. The tiny ViT's training loop,
:func:`selfattention_training.digits.train`, is also what the chapters'
exercises call. This package imports the readers' library and the models'
package (:mod:`selfattention_models`), and nothing else of the project.
"""
