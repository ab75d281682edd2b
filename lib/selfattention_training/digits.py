"""The ``make train`` recipes of the tiny ViT on 8 × 8 digits
(:func:`selfattention.vit.train` with the arguments of
:data:`selfattention_models.digits.TRAINED_DIGITS`).
"""

import numpy as np

from selfattention.vit import digit_split, train
from selfattention_models.digits import TRAINED_DIGITS

from .recipes import recipe, weight_arrays


def _digits_recipe(name, arguments):
    @recipe(name, rtol=0.0, atol=1e-6, retrained_by_test=True)
    def train_digits():
        model = train(digit_split(), **arguments)
        return {**weight_arrays(model), "losses": np.array(model.losses)}
    train_digits.__doc__ = (f":func:`train` on :func:`digit_split` with "
                            f"{arguments or 'its defaults'}: the weights "
                            f"(``w/<name>``) and each epoch's mean loss.")
    return train_digits


for _name, _arguments in TRAINED_DIGITS.items():
    _digits_recipe(_name, _arguments)
