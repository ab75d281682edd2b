"""Input checks of the modules that do not declare their arguments yet.

Each helper here goes once no module calls it; new code declares its
arguments with :func:`selfattention._validate.boundary`.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._validate import broadcasts_to  # noqa: F401  (re-exported)


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


def as_bool_mask(mask, name: str = "mask") -> np.ndarray:
    """Return ``mask`` as a boolean array; refuse any other dtype."""
    arr = np.asarray(mask)
    if arr.dtype != bool:
        raise TypeError(
            f"{name} must be a boolean array (True = this query may use this "
            f"key), got dtype {arr.dtype}"
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


def broadcast_shape(a: tuple, b: tuple, names: tuple[str, str]) -> tuple:
    """Broadcast two batch shapes, naming both arguments on failure."""
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        raise ValueError(
            f"the leading (batch) dimensions of {names[0]} {a} and "
            f"{names[1]} {b} do not broadcast"
        ) from None




def check_qkv(Q, K, V) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return ``Q``, ``K`` and ``V`` as float arrays that fit attention.

    ``Q`` must be ``(..., n_q, d_k)``, ``K`` ``(..., n_k, d_k)`` and ``V``
    ``(..., n_k, d_v)``: queries and keys share their width ``d_k``, keys
    and values their count ``n_k``. The leading (batch) dimensions are left
    to the caller, which knows how it broadcasts them
    (:func:`broadcast_shape`).
    """
    Q = as_float_array(Q, "Q", min_ndim=2)
    K = as_float_array(K, "K", min_ndim=2)
    V = as_float_array(V, "V", min_ndim=2)
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"Q and K must have the same last dimension d_k, got Q of shape "
            f"{Q.shape} and K of shape {K.shape}"
        )
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"K and V must hold the same number of rows n_k (one value per "
            f"key), got K of shape {K.shape} and V of shape {V.shape}"
        )
    return Q, K, V


def positive_scale(scale):
    """Return ``scale`` unchanged if it is a positive finite number, or raise.

    A bool, an array or a non-finite or non-positive number raises
    ``ValueError``.
    """
    if isinstance(scale, bool) or not np.isscalar(scale) or not (
        np.isfinite(scale) and scale > 0
    ):
        raise ValueError(
            f"scale must be a positive finite number, got {scale!r}"
        )
    return scale


def every_query_has_a_key(mask, torch_gives: str) -> None:
    """Raise ``ValueError`` if a row of ``mask`` is all False.

    Such a query has no key, so its softmax is undefined; the message names
    its index and says what PyTorch gives there (``torch_gives``, which
    depends on the PyTorch function the caller is compared with).
    """
    empty = ~mask.any(axis=-1)
    if empty.any():
        where = tuple(int(i) for i in np.argwhere(empty)[0])
        raise ValueError(
            f"mask leaves query {where[-1]} (index {where}) with no key to "
            f"attend to: every entry of its row is False, so its softmax "
            f"is undefined (PyTorch returns {torch_gives})"
        )


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
