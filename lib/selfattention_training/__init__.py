"""Training: the recipes of ``make train`` (``scripts/train.py``).

Each recipe trains one model of the book from fixed seeds; ``make train``
writes its weights and curves, with their checksums, into the readers'
package (``selfattention/trained/``), where the chapters load them with
:func:`selfattention.trained.load`. The registry is
:mod:`selfattention_training.recipes`; the recipes live beside the models
they train: :mod:`~selfattention_training.mnist`,
:mod:`~selfattention_training.digits`, :mod:`~selfattention_training.scale`
and :mod:`~selfattention_training.stereo`. This package imports the readers'
library and nothing else of the project.
"""
