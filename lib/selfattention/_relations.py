"""Checks between arguments, all of them (not part of the API).

A :func:`relation` is a function of some of a public function's converted
arguments, by name, that raises ``ValueError`` when they do not fit one
another (one, :func:`tracemalloc_idle`, reads no argument: it checks the
state of the process, and raises ``RuntimeError``).
``@boundary(..., checks=(qkv_fit,))`` runs it after each argument has been
converted on its own (:mod:`._validate`). A function whose
arguments carry other names says which, ``heads_fit.using(X="x")``: the
message then names the caller's arguments. Each relation receives
``name``, the mapping from its parameters to the caller's names, first.
"""

import inspect

import numpy as np


class Relation:
    """A check of ``@boundary``: ``check(args)`` with the dict of arguments."""

    def __init__(self, fn, names=None):
        self.fn, self.names = fn, dict(names or {})
        self.params = list(inspect.signature(fn).parameters)[1:]
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def using(self, **names) -> "Relation":
        """The same relation on arguments named differently by the caller."""
        return Relation(self.fn, {**self.names, **names})

    def __call__(self, args) -> None:
        name = {p: self.names.get(p, p) for p in self.params}
        self.fn(name, **{p: args[name[p]] for p in self.params
                         if name[p] in args})


def relation(fn) -> Relation:
    """Declare ``fn(name, **arguments)`` a relation between arguments."""
    return Relation(fn)


# ------------------------------------------------------------------ shapes
def _agree(name, a, x, i, b, y, j, what) -> None:
    """Axis ``i`` of argument ``a`` equals axis ``j`` of argument ``b``."""
    if x.shape[i] != y.shape[j]:
        raise ValueError(f"{name[a]} and {name[b]} must {what}, got "
                         f"{name[a]} of shape {x.shape} and {name[b]} of "
                         f"shape {y.shape}")


def _batch(names: str, *shapes) -> tuple:
    """The broadcast of the shapes' leading (batch) axes."""
    try:
        return np.broadcast_shapes(*(s[:-2] for s in shapes))
    except ValueError:
        raise ValueError(f"{names} must have leading (batch) dimensions that "
                         f"broadcast, got {[s[:-2] for s in shapes]}") from None


def _divides(name, k, sizes, what) -> None:
    """Argument ``k`` divides each of ``sizes``, the sizes of ``what``."""
    if any(s % k[1] for s in sizes):
        raise ValueError(f"{name[k[0]]}={k[1]} must divide {what}, got "
                         f"{tuple(sizes)}")


def _fits(label, x, want) -> None:
    """``x`` (if given) broadcasts to scores of shape ``want``; a mask must
    leave every query a key."""
    if x is None:
        return
    if x.ndim > len(want) or any(               # each axis 1 or the scores'
            a not in (1, b) for a, b in zip(x.shape[::-1], want[::-1])):
        raise ValueError(f"{label} must broadcast to the score matrices of "
                         f"shape {want} (last two axes: queries, keys), got "
                         f"shape {x.shape}")
    empty = x.dtype == bool and ~np.broadcast_to(x, want).any(axis=-1)
    if np.any(empty):
        where = tuple(int(i) for i in np.argwhere(empty)[0])
        raise ValueError(
            f"{label} leaves query {where[-1]} (index {where}) with no key to "
            f"attend to: every entry of its row is False, so its softmax is "
            f"undefined (PyTorch returns NaN or zeros there, depending on the "
            f"function)")


def score_shape(Q, K) -> tuple:
    """Shape (..., n_q, n_k) of the score matrices of ``Q`` and ``K``."""
    return _batch("Q and K", Q.shape, K.shape) + (Q.shape[-2], K.shape[-2])


def head_score_shape(X, h, context=None) -> tuple:
    """Shape (..., h, n, m) of the heads' score matrices."""
    C = X if context is None else context
    return _batch("X and context", X.shape, C.shape) + (
        h, X.shape[-2], C.shape[-2])


# ------------------------------------------------------------ two arrays
@relation
def same_shape(name, a, b) -> None:
    """Two arrays of one shape."""
    if a.shape != b.shape:
        raise ValueError(f"{name['a']} and {name['b']} must have the same "
                         f"shape, got {a.shape} and {b.shape}")


# --------------------------------------------------------------- attention
@relation
def no_empty_row(name, S) -> None:
    """No row of scores is entirely ``-inf``."""
    if np.isneginf(S).all(axis=-1).any():
        raise ValueError(f"{name['S']} has a row whose entries are all -inf: "
                         f"no entry can receive weight (is every key of a "
                         f"query masked?)")


@relation
def qkv_fit(name, Q, K, V) -> None:
    """Q and K share d_k, K and V share n_k, their batch axes broadcast."""
    _agree(name, "Q", Q, -1, "K", K, -1, "have the same last dimension d_k")
    _agree(name, "K", K, -2, "V", V, -2, "hold one row per key (n_k)")
    score_shape(Q, K)
    _batch("Q, K and V", Q.shape, K.shape, V.shape)


@relation
def mask_and_bias_fit_scores(name, Q, K, mask=None, bias=None) -> None:
    """``mask`` and ``bias`` broadcast to the scores of ``Q`` and ``K``."""
    want = score_shape(Q, K)
    _fits(name["mask"], mask, want)
    _fits(name["bias"], bias, want)


@relation
def heads_fit(name, X, W_q, W_k, W_v, W_o, h, context=None) -> None:
    """The projections fit ``X`` (or the context) and split into h heads."""
    tokens = "X" if context is None else "context"
    C = X if context is None else context
    name = {**name, "context": name.get("context", "context")}
    _agree(name, "W_q", W_q, 0, "X", X, -1, "agree on the token width")
    _agree(name, "W_k", W_k, 0, tokens, C, -1, "agree on the token width")
    _agree(name, "W_v", W_v, 0, tokens, C, -1, "agree on the token width")
    _agree(name, "W_q", W_q, 1, "W_k", W_k, 1,
           "have the same number of columns h·d_k")
    _agree(name, "W_o", W_o, 0, "W_v", W_v, 1, "agree on h·d_v (rows of W_o)")
    _divides(name, ("h", h), (W_q.shape[1], W_v.shape[1]),
             f"the widths of {name['W_q']} and {name['W_v']}")


@relation
def head_masks_fit(name, X, h, mask=None, bias=None, context=None) -> None:
    """``mask`` and ``bias`` broadcast to the heads' scores (..., h, n, m)."""
    want = head_score_shape(X, h, context)
    _fits(name["mask"], mask, want)
    _fits(name["bias"], bias, want)


@relation
def heads_divide_width(name, Z, h) -> None:
    """``h`` divides the last axis of ``Z``."""
    _divides(name, ("h", h), Z.shape[-1:], f"the width of {name['Z']}")


@relation
def running_sums_fit(name, m, l, acc, S, V) -> None:
    """The online softmax's running arrays fit one block of scores."""
    if not m.shape == l.shape == acc.shape[:-1] == S.shape[:-1]:
        raise ValueError(f"m, l, acc and S must share the queries' shape "
                         f"(..., n_q), got m {m.shape}, l {l.shape}, acc "
                         f"{acc.shape} and S {S.shape}")
    _agree(name, "V", V, -2, "S", S, -1, "agree on the keys of the block")
    _agree(name, "V", V, -1, "acc", acc, -1, "agree on the value width d_v")


@relation
def gradients_fit(name, Q, V, Y, dY, lse) -> None:
    """``Y`` and ``dY`` hold one output row per query, ``lse`` one number."""
    want = Q.shape[:-1] + V.shape[-1:]
    for label, x in (("Y", Y), ("dY", dY)):
        if x.shape != want:
            raise ValueError(f"{name[label]} must have shape (n_q, d_v) = "
                             f"{want}, got {x.shape}")
    if lse.shape != Q.shape[:-1]:
        raise ValueError(f"{name['lse']} must have shape (n_q,) = "
                         f"{Q.shape[:-1]}, got {lse.shape}")


@relation
def weight_rows(name, p) -> None:
    """Every row of ``p`` holds non-negative weights summing to one."""
    sums = p.sum(axis=-1)
    if (p < 0).any() or not np.allclose(sums, 1.0, rtol=0, atol=1e-6):
        raise ValueError(f"{name['p']} must hold non-negative rows summing "
                         f"to one, got row sums {sums.min():.3g} to "
                         f"{sums.max():.3g} and smallest entry "
                         f"{p.min():.3g}")


@relation
def positive_row_sums(name, p) -> None:
    """Every row of ``p`` holds non-negative weights with a positive sum."""
    if (p < 0).any() or not np.all(p.sum(axis=-1) > 0):
        raise ValueError(f"{name['p']} must hold non-negative rows with a "
                         f"positive sum, got smallest entry {p.min():.3g} "
                         f"and smallest row sum {p.sum(axis=-1).min():.3g}")


# ------------------------------------------------------------------ masks
@relation
def lengths_fit(name, lengths, n) -> None:
    """Every length lies in 1..n."""
    if ((lengths < 1) | (lengths > n)).any():
        raise ValueError(f"{name['lengths']} must each lie in 1..{n} (a token "
                         f"needs at least one real key), got "
                         f"{lengths.tolist()}")


@relation
def tiles(name, grid, M) -> None:
    """Windows of ``M × M`` patches tile the grid exactly."""
    _divides(name, ("M", M), grid, f"both sides of the {name['grid']}")


@relation
def window_tiles_kind(name, kind, grid, M) -> None:
    """For the window kind, windows of ``M × M`` patches tile the grid."""
    if kind == "window":
        _divides(name, ("M", M), grid, f"both sides of the {name['grid']}")


# ------------------------------------------------------------------ windows
@relation
def windows_tile_x(name, x, M) -> None:
    """Windows of ``M × M`` patches tile the grid of ``x`` (..., H, W, C)."""
    _divides(name, ("M", M), x.shape[-3:-1],
             f"both sides of the grid of {name['x']}")


@relation
def shift_below_M(name, shift, M) -> None:
    """``0 ≤ shift < M``."""
    if shift >= M:
        raise ValueError(f"{name['shift']} must lie in 0..M-1 = 0..{M - 1} "
                         f"patches (Swin uses M // 2), got {shift}")


@relation
def windows_fit(name, windows, grid, M) -> None:
    """``windows`` holds the windows of ``grid`` (..., nW, M², C)."""
    H, W = grid
    if windows.shape[-3:-1] != ((H // M) * (W // M), M * M):
        raise ValueError(f"{name['windows']} must have shape (..., "
                         f"(H/M)·(W/M), M², C) for grid {(H, W)} and M={M}, "
                         f"got shape {windows.shape}")


@relation
def window_table_fits(name, table, M, h=None) -> None:
    """A relative position table (h, 2M-1, 2M-1), if given."""
    if table is None:
        return
    want = (table.shape[0] if h is None else h, 2 * M - 1, 2 * M - 1)
    if table.shape != want:
        raise ValueError(f"{name['table']} must have shape (h, 2M-1, 2M-1) "
                         f"= {want}, got shape {table.shape}")


@relation
def merging_fits(name, x, W_merge) -> None:
    """An even grid, and 4C rows in ``W_merge``."""
    (H, W, C), rows = x.shape[-3:], W_merge.shape[0]
    if H % 2 or W % 2 or rows != 4 * C:
        raise ValueError(f"patch merging needs an even grid and 4C = {4 * C} "
                         f"rows in {name['W_merge']}, got {name['x']} of "
                         f"shape {x.shape}, {name['W_merge']} of shape "
                         f"{W_merge.shape}")


# ------------------------------------------------------------ patches, cost
@relation
def patch_divides_image(name, img, p) -> None:
    """``p`` divides the image's height and width."""
    _divides(name, ("p", p), img.shape[-2:], "the image's height and width")


@relation
def patch_divides_digits(name, p) -> None:
    """``p`` divides the 8 pixels of a digit's side."""
    _divides(name, ("p", p), (8,), "the digits' 8 pixels")


@relation
def tokens_fill_grid(name, X, grid) -> None:
    """``X`` holds ``H·W`` square patches (..., H·W, p²)."""
    H, W = grid
    p = int(round(np.sqrt(X.shape[-1])))
    if p * p != X.shape[-1] or X.shape[-2] != H * W:
        raise ValueError(f"{name['X']} must hold {H}x{W} square patches, "
                         f"shape (..., {H * W}, p²), got shape {X.shape}")


@relation
def patches_tile_image(name, image_size, patch_size) -> None:
    """The patches tile the image exactly."""
    (H, W), (P_h, P_w) = image_size, patch_size
    if H % P_h or W % P_w:
        raise ValueError(f"{name['patch_size']} {(P_h, P_w)} must divide "
                         f"{name['image_size']} {(H, W)} so that the patches "
                         f"tile the image")


# ------------------------------------------------------------------ position
def _d_divisible_by(name, d, k, why) -> None:
    if d % k:
        raise ValueError(f"{name['d']} must be divisible by {k} ({why}), got "
                         f"{d}")


@relation
def d_even(name, d) -> None:
    """Sines and cosines come in pairs."""
    _d_divisible_by(name, d, 2, "sin and cos come in pairs")


@relation
def d_divisible_by_4(name, d) -> None:
    """Half the width for rows, half for columns, each in pairs."""
    _d_divisible_by(name, d, 4, "half for rows, half for columns, each in "
                                "sin/cos pairs")


@relation
def offset_table_fits(name, table, grid) -> None:
    """A table ending with the axes (2H-1, 2W-1) of the grid's offsets."""
    H, W = grid
    if table.shape[-2:] != (2 * H - 1, 2 * W - 1):
        raise ValueError(f"{name['table']} must end with the axes (2H-1, "
                         f"2W-1) = {(2 * H - 1, 2 * W - 1)} for a {H}x{W} "
                         f"grid, got shape {table.shape}")


# ------------------------------------------------------------------ matching
@relation
def scores_on_grid(name, S, grid) -> None:
    """One score per pair of the grid's cells: (n, n) with n = H·W."""
    n = grid[0] * grid[1]
    if S.shape != (n, n):
        raise ValueError(f"{name['S']} must have shape ({n}, {n}) for the "
                         f"{name['grid']} {grid}, got {S.shape}")


@relation
def odd_window_fits(name, img, k) -> None:
    """An odd window side ``k`` no larger than either side of ``img``."""
    if k % 2 == 0 or k > min(img.shape):
        raise ValueError(f"{name['k']} must be odd and no larger than the "
                         f"image {img.shape}, got {name['k']}={k}")


@relation
def volume_fits(name, C, flow=None) -> None:
    """A correlation volume (H, W, H, W) and a flow (H, W, 2), if given."""
    if C.shape[:2] != C.shape[2:]:
        raise ValueError(f"{name['C']} must have shape (H, W, H, W), got "
                         f"{C.shape}")
    if flow is not None and flow.shape != C.shape[:2] + (2,):
        raise ValueError(f"{name['flow']} must have shape "
                         f"{C.shape[:2] + (2,)}, one (d_row, d_col) per "
                         f"pixel, got {flow.shape}")


# ------------------------------------------------------------------ PyTorch
@relation
def square_weights_split(name, W_q, W_k, W_v, W_o, h) -> None:
    """Four square (d, d) matrices, ``h`` dividing ``d``."""
    d = W_q.shape[0]
    for key, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o)):
        if W.shape != (d, d):
            raise ValueError(f"{name[key]} must be square ({d}, {d}) for "
                             f"nn.MultiheadAttention, got shape {W.shape}")
    _divides(name, ("h", h), (d,), "the width d")


@relation
def embeddings_fit(name, X, W_theta, W_phi, W_g) -> None:
    """The non-local embeddings take the channels of ``X``."""
    C = X.shape[-1]
    for key, W in (("W_theta", W_theta), ("W_phi", W_phi), ("W_g", W_g)):
        if W.shape[0] != C:
            raise ValueError(f"{name[key]} must have one row per channel of "
                             f"{name['X']} ({C}), got shape {W.shape}")
    if W_theta.shape != W_phi.shape:
        raise ValueError(f"{name['W_theta']} and {name['W_phi']} must have "
                         f"the same shape, got {W_theta.shape} and "
                         f"{W_phi.shape}")


# ------------------------------------------------------------------ plots
@relation
def numbers_fit_values(name, values, numbers=None) -> None:
    """``numbers``, if given, has the shape of ``values``."""
    if numbers is not None and np.shape(numbers) != values.shape:
        raise ValueError(f"{name['numbers']} must have the shape of "
                         f"{name['values']} {values.shape}, got "
                         f"{np.shape(numbers)}")


@relation
def loglog_fits(name, x, y) -> None:
    """Two positive series of one length ≥ 2."""
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"{name['x']} and {name['y']} must have the same "
                         f"length >= 2, got shapes {x.shape} and {y.shape}")
    if not ((x > 0).all() and (y > 0).all()):
        raise ValueError(f"{name['x']} and {name['y']} must be positive to "
                         f"take logarithms")


# ------------------------------------------------------------ interactive
@relation
def explorer_fits_grid(name, img, A, grid, patch, query,
                       head_names=None) -> None:
    """Weights (n, n) or (h, n, n), an image of the patch grid, and a name
    for each head if any."""
    rows, cols = grid
    n = rows * cols
    if A.ndim not in (2, 3) or A.shape[-2:] != (n, n):
        raise ValueError(f"{name['A']} must have shape (n, n) or (h, n, n) "
                         f"with n = {n} patches, got shape {A.shape}")
    if img.shape != (rows * patch, cols * patch):
        raise ValueError(f"{name['img']} must have shape "
                         f"{(rows * patch, cols * patch)} for a {rows} x "
                         f"{cols} grid of {patch}-pixel patches, got "
                         f"{img.shape}")
    if query >= n:
        raise ValueError(f"{name['query']} must be a patch index below {n}, "
                         f"got {query}")
    heads = A.shape[0] if A.ndim == 3 else 1
    if head_names is not None and len(head_names) != heads:
        raise ValueError(f"{name['head_names']} must name each of the "
                         f"{heads} heads, got {len(head_names)} names")


@relation
def frames_fit_grid(name, frames, A, grid, patch, query, keys=None) -> None:
    """Frames of the patch grid, and weights between all their patches."""
    rows, cols = grid
    want = (rows * patch, cols * patch)
    for key, arr in (("frames", frames), ("keys", keys)):
        if arr is not None and arr.shape[1:] != want:
            raise ValueError(
                f"{name[key]} must have shape (count, {want[0]}, {want[1]}) "
                f"for a {rows} x {cols} grid of {patch}-pixel patches, got "
                f"{arr.shape}")
    n = rows * cols
    shape = (len(frames) * n, len(frames if keys is None else keys) * n)
    if A.shape != shape:
        raise ValueError(f"{name['A']} must have shape {shape}, got "
                         f"{A.shape}")
    if query >= shape[0]:
        raise ValueError(f"{name['query']} must be below {shape[0]} (frames "
                         f"x patches), got {query}")


@relation
def bars_fit_labels(name, values, choices, series, choice) -> None:
    """Non-negative bars, one label per choice and per panel."""
    if (values < 0).any():
        raise ValueError(f"{name['values']} must be non-negative, got a "
                         f"minimum of {float(values.min()):g}")
    for key, labels, axis, what in (("choices", choices, 0, "choice"),
                                    ("series", series, 1, "panel")):
        if len(labels) != values.shape[axis]:
            raise ValueError(f"{name[key]} must have one label per {what} "
                             f"({values.shape[axis]}), got {len(labels)}")
    if choice >= values.shape[0]:
        raise ValueError(f"{name['choice']} must be between 0 and "
                         f"{values.shape[0] - 1}, got {choice}")


@relation
def patch_divides_side(name, image_size, patch_size) -> None:
    """The patch side divides the image side."""
    if image_size % patch_size:
        raise ValueError(f"{name['patch_size']} must divide "
                         f"{name['image_size']} {image_size}, got "
                         f"{patch_size}")


@relation
def stereo_band_fits(name, left, right, weights, truth, query,
                     image_rows=None) -> None:
    """A band of the pair, its weights (h, W, D + 1) and a query inside."""
    if left.shape != right.shape or truth.shape != left.shape:
        raise ValueError(f"{name['left']}, {name['right']} and "
                         f"{name['truth']} must share one shape (h, W), got "
                         f"{left.shape}, {right.shape} and {truth.shape}")
    if weights.shape[:2] != left.shape:
        raise ValueError(f"{name['weights']} must have shape (h, W, D + 1) "
                         f"= {left.shape + ('D + 1',)}, got {weights.shape}")
    if image_rows is not None and len(image_rows) != left.shape[0]:
        raise ValueError(f"{name['image_rows']} must name the "
                         f"{left.shape[0]} rows of the band, got "
                         f"{len(image_rows)}")
    r, c = query
    if not (0 <= r < left.shape[0] and 0 <= c < left.shape[1]):
        raise ValueError(f"{name['query']} must be a pixel of the (h, W) = "
                         f"{left.shape} band, got {(r, c)}")


# ------------------------------------------------------------------ stereo
@relation
def rows_of_image(name, img, rows=None) -> None:
    """``rows``, if given, are row indices of ``img`` (H, W, c)."""
    H = img.shape[0]
    if rows is not None and len(rows) and not (0 <= rows.min()
                                               and rows.max() < H):
        raise ValueError(f"{name['rows']} must be row indices of "
                         f"{name['img']}, 0 to {H - 1}, got {rows.min()} to "
                         f"{rows.max()}")


# ------------------------------------------------------------------ data
@relation
def square_stays_apart(name, T, size, side, start, step,
                       distractor=True) -> None:
    """The moving square stays in the frame, and off the static one."""
    for t in range(T):
        r, c = (a + t * d for a, d in zip(start, step))
        out = not (0 <= r <= size - side and 0 <= c <= size - side)
        if out or (distractor and min(r, c) + side > size - side):
            where = "out of the frame" if out else "onto the static square"
            raise ValueError(f"{name['step']} moves the square {where} at "
                             f"frame {t} (top-left corner ({r}, {c})); "
                             f"choose another {name['start']}, "
                             f"{name['step']} or {name['T']}")


# ------------------------------------------------------------------ timing
@relation
def tracemalloc_idle(name) -> None:
    """``tracemalloc`` is not tracing already: a state of the process, not
    of an argument, so a ``RuntimeError``."""
    import tracemalloc

    if tracemalloc.is_tracing():
        raise RuntimeError("tracemalloc is already tracing; stop it first")


# ---------------------------------------------------------- the tiny ViT
@relation
def heads_divide_d(name, d, h) -> None:
    """``h`` divides the token width ``d``: each head has width d/h."""
    if d % h:
        raise ValueError(f"{name['h']}={h} must divide {name['d']}={d} (each "
                         f"head has width {name['d']}/{name['h']})")


@relation
def tokens_fit_model(name, model, X) -> None:
    """Tokens ``X`` (N, n, d_in) as the model's embedding and positions
    take them."""
    n = model.pos.shape[1] - 1 if model.pos is not None else X.shape[1]
    want = (n, model.embed.in_features)
    if X.shape[1:] != want:
        raise ValueError(f"{name['X']} must have shape (N, {want[0]}, "
                         f"{want[1]}) for {name['model']}, got {X.shape}")


@relation
def keep_fits_model(name, model, keep=None) -> None:
    """``keep``, if given, has one entry per head of each block (L, h)."""
    want = (len(model.blocks), model.blocks[0].h)
    if keep is not None and keep.shape != want:
        raise ValueError(f"{name['keep']} must have shape (L, h) = {want} "
                         f"for {name['model']}, got {keep.shape}")


@relation
def one_per_image(name, X, values) -> None:
    """``values``, if given, has one row per image of ``X``; the caller
    names its argument: ``one_per_image.using(values="y")``."""
    N = len(X)
    if values is not None and values.shape[:1] != (N,):
        raise ValueError(f"{name['values']} must have one row per image of "
                         f"{name['X']} ({N}), got shape {values.shape}")


@relation
def maps_fit_grid(name, maps, grid=None) -> None:
    """Weights (N, L, h, 1+n, 1+n): as many keys as queries, and, with a
    ``grid``, ``n = H·W`` patches."""
    m = maps.shape
    if m[-1] != m[-2]:
        raise ValueError(f"{name['maps']} must have shape (N, L, h, 1+n, "
                         f"1+n), as many keys as queries, got {m}")
    if grid is not None and m[-1] != 1 + grid[0] * grid[1]:
        raise ValueError(f"{name['maps']} must have shape (N, L, h, 1+n, "
                         f"1+n) with n = {grid[0] * grid[1]} patches in the "
                         f"{name['grid']} {grid}, got {m}")


@relation
def two_items_per_row(name, a) -> None:
    """At least two items along the last axis of ``a``."""
    if a.shape[-1] < 2:
        raise ValueError(f"{name['a']} must hold at least 2 items per row "
                         f"(its last axis), got shape {a.shape}")


# ------------------------------------------------------------------ photographs
@relation
def split_leaves_both_sides(name, held_out, names) -> None:
    """Holding out ``held_out`` photographs leaves some on each side."""
    distinct = len(set(names))
    if held_out >= distinct:
        raise ValueError(f"{name['held_out']} must leave at least one of the "
                         f"{distinct} photographs of {name['names']} for "
                         f"training, got {held_out}")


@relation
def crop_fits_photographs(name, names, size, short_side) -> None:
    """Some photographs are named, and a crop fits their shorter side."""
    if not names:
        raise ValueError(f"{name['names']} must name at least one "
                         f"photograph, got none")
    if size > short_side:
        raise ValueError(f"{name['size']} must fit the photographs' shorter "
                         f"side, {name['short_side']}={short_side} pixels, "
                         f"got {size}")


@relation
def digits_fit_scene(name, photos, digits, size, n_digits, digit_size,
                     short_side) -> None:
    """Digits are MNIST indices, ranges run low to high, digits keep some
    ink (at least 14 pixels a side), the most digits of the largest side
    cover at most half the scene (so that they can be placed apart), and
    the scene fits the photographs."""
    from .data import mnist_digits
    total = len(mnist_digits()[1])
    if len(digits) == 0 or digits.min() < 0 or digits.max() >= total:
        raise ValueError(f"{name['digits']} must be indices of the {total} "
                         f"MNIST digits, 0 to {total - 1}, got "
                         f"{len(digits)} indices")
    for arg, (low, high) in (("n_digits", n_digits),
                             ("digit_size", digit_size)):
        if low > high:
            raise ValueError(f"{name[arg]} must run from low to high, got "
                             f"{(low, high)}")
    if digit_size[0] < 14:
        raise ValueError(f"{name['digit_size']} must be at least 14 pixels "
                         f"(below that some digits keep no pixel of "
                         f"opacity 0.5), got {digit_size[0]}")
    if 2 * n_digits[1] * digit_size[1] ** 2 > size * size:
        raise ValueError(f"{name['n_digits']} and {name['digit_size']} must "
                         f"leave the digits at most half of the {size} × "
                         f"{size} scene ({name['size']}) to be placed apart, "
                         f"got up to {n_digits[1]} digits of "
                         f"{digit_size[1]} pixels a side")
    crop_fits_photographs.using(names=name["photos"], size=name["size"],
                                short_side=name["short_side"])(
        {name["photos"]: photos, name["size"]: size,
         name["short_side"]: short_side})


# -------------------------------------------------------------- detection
@relation
def four_columns(name, boxes) -> None:
    """Boxes (k, 4): (top, left, bottom, right) on the last axis."""
    if boxes.shape[-1] != 4:
        raise ValueError(f"{name['boxes']} must hold 4 numbers per box "
                         f"(top, left, bottom, right), got shape "
                         f"{boxes.shape}")


@relation
def one_box_per_row(name, rows, boxes) -> None:
    """One box per row: the first axes of ``rows`` and ``boxes`` agree."""
    if rows.shape[0] != boxes.shape[0]:
        raise ValueError(f"{name['rows']} and {name['boxes']} must have one "
                         f"row per box, got shapes {rows.shape} and "
                         f"{boxes.shape}")
