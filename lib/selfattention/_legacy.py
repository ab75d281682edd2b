"""Input checks of the modules that do not declare their arguments yet.

Each helper here goes once no module calls it; new code declares its
arguments with :func:`selfattention._validate.boundary`. Still used by
windows, matching, nonlocal_block, vit and ``cost.cost_calculator``.
"""

from __future__ import annotations

import numbers

import numpy as np


def as_float_array(x, name: str, min_ndim: int = 1) -> np.ndarray:
    """Return ``x`` as a floating-point array, or raise a clear error.

    Integer and boolean input is promoted to float64; float32 stays float32.
    """
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(
            f"{name} must be an array of numbers, got {type(x).__name__}"
        )
    try:
        arr = np.asarray(x)
    except Exception as err:  # pragma: no cover - numpy's own message
        raise TypeError(f"{name} must be an array of numbers: {err}") from err
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == bool
    ):
        raise TypeError(
            f"{name} must be an array of real numbers, got dtype {arr.dtype}"
        )
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s), "
            f"got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(
            f"{name} must be finite, got {bad} NaN or infinite value(s)"
        )
    return arr


def integer(value, name: str, expected: str = "an integer") -> int:
    """Return ``value`` as an ``int`` if it is an integer, or raise.

    ``bool`` is refused although Python counts it as an integer. The
    ``TypeError`` reads "``name`` must be ``expected``, got <type>".
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be {expected}, got {type(value).__name__}"
        )
    return int(value)


def positive_int(value, name: str) -> int:
    """Return ``value`` as a positive ``int`` or raise."""
    integer(value, name, "a positive integer")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def generator(rng) -> np.random.Generator:
    """Return ``rng`` if it is a NumPy random ``Generator``, or raise.

    The book passes ``rng = np.random.default_rng(seed)`` explicitly; the
    legacy ``np.random.RandomState`` and plain seeds raise ``TypeError``.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator "
            f"(np.random.default_rng(seed)), got {type(rng).__name__}"
        )
    return rng
