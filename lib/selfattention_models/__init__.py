"""The models the chapters load: their architectures, the data sets they learn
from (photographs, digits, a stereo pair; an uploaded photograph decoded as
the packaged ones are), the trained weights (``trained/``, package data) and
their loader.

It imports the readers' library (:mod:`selfattention`) and nothing else of the
project; ``make train`` (:mod:`selfattention_training`) writes the weights.
"""
