"""What attention costs: tokens, score entries, bytes and multiply-adds
(chapters 6 and 7).

Every function here is exact integer arithmetic on sizes, so it runs in no
time and prints the same digits on every machine. Chapter 6 uses them to
show how the patch size sets the number of tokens ``n`` and why the ``n × n``
score matrix dominates; chapter 7 uses the two cost formulas of the Swin
Transformer to compare global attention with window attention.

Notation: an image of ``H_img × W_img`` pixels cut into ``P × P`` patches
gives a patch grid ``grid = (H, W)`` and ``n = H·W`` tokens of width ``C``;
windows hold ``M × M`` patches; ``h`` is the number of heads. Costs are
counted in multiply-adds (``*_macs``); a FLOP counter such as PyTorch's
counts two FLOPs per multiply-add (:mod:`selfattention.flops`).
"""

from __future__ import annotations

import numbers

import numpy as np

from ._legacy import positive_int  # used by cost_calculator only
from ._validate import (Constraint, boundary, grid, integer, optional, pair,
                        tiles)
from ._validate import positive_int as count

__all__ = ["tokens", "score_entries", "attention_bytes", "attention_macs",
           "msa_macs", "window_msa_macs", "window_score_entries",
           "human_bytes", "cost_calculator"]


def _sides(names: tuple[str, str]) -> Constraint:
    """A positive int ``s``, meaning ``(s, s)``, or a pair of them."""
    as_pair = pair(count(), names)

    def convert(value, name):
        if isinstance(value, numbers.Integral) and not isinstance(value,
                                                                   bool):
            value = (value, value)
        return as_pair(value, name)

    return Constraint(convert, "an int or " + as_pair.expected)


def _numeric_dtype(value, name):
    try:
        dt = np.dtype(value)
    except TypeError:
        dt = None
    if dt is None or not np.issubdtype(dt, np.number):
        raise TypeError(f"{name} must be a numeric NumPy dtype such as "
                        f"'float32', got {value!r}")
    return dt


def _patches_tile(args) -> None:
    (H, W), (P_h, P_w) = args["image_size"], args["patch_size"]
    if H % P_h or W % P_w:
        raise ValueError(f"patch_size {(P_h, P_w)} must divide image_size "
                         f"{(H, W)} so that the patches tile the image")


@boundary(image_size=_sides(("H", "W")), patch_size=_sides(("P_h", "P_w")),
          checks=(_patches_tile,))
def tokens(image_size, patch_size):
    """Number of tokens when an image is cut into non-overlapping patches.

    ``n = (H / P_h) · (W / P_w)``: the sequence length falls with the square
    of the patch size (chapter 6, Eq. ``eq-cost-tokens``).

    Parameters
    ----------
    image_size : int or (int, int)
        Image height and width in pixels; an int means a square.
    patch_size : int or (int, int)
        Patch height and width ``(P_h, P_w)``; 1 means one token per pixel.

    Returns
    -------
    n : int
        ``H·W / (P_h·P_w)``; for 224 × 224 and 16 × 16 patches, 196.

    Raises
    ------
    TypeError
        If a size is not an integer or a pair of integers.
    ValueError
        If a size is not positive, or a patch side does not divide the image
        side (the patches would not tile the image).
    """
    (H, W), (P_h, P_w) = image_size, patch_size
    return (H // P_h) * (W // P_w)


@boundary(n=count(), h=count(), n_k=optional(count()))
def score_entries(n, h=1, n_k=None):
    """Entries of the score matrices ``Q Kᵀ`` of one attention layer.

    Parameters
    ----------
    n : int
        Number of queries (tokens).
    h : int
        Number of heads; each holds its own matrix.
    n_k : int, optional
        Number of keys, for cross-attention; defaults to ``n``.

    Returns
    -------
    entries : int
        ``h · n · n_k``; ``n²`` per head for self-attention (38,416 for
        the 196 tokens of a ViT-B/16 input).
    """
    return h * n * (n if n_k is None else n_k)


@boundary(n=count(), h=count(),
          dtype=Constraint(_numeric_dtype, "a numeric NumPy dtype"),
          n_k=optional(count()))
def attention_bytes(n, h=1, dtype="float32", n_k=None):
    """Bytes needed to hold the score (or weight) matrices of one layer.

    Parameters
    ----------
    n : int
        Number of queries (tokens).
    h : int
        Number of heads.
    dtype : str or numpy dtype
        Element type; float32 takes 4 bytes, float64 8.
    n_k : int, optional
        Number of keys; defaults to ``n``.

    Returns
    -------
    nbytes : int
        ``score_entries(n, h, n_k) · itemsize``; about 10 GB for one
        float32 matrix over the 50,176 pixels of a 224 × 224 image.

    Raises
    ------
    TypeError
        If ``dtype`` is not a numeric NumPy dtype.
    """
    return score_entries(n, h, n_k) * dtype.itemsize


@boundary(n=count(), d_k=count(), d_v=optional(count()), h=count())
def attention_macs(n, d_k, d_v=None, h=1):
    """Multiply-adds of ``Q Kᵀ`` and ``A V`` (no projections), per layer.

    Forming the scores takes ``n² d_k`` multiply-adds per head and the
    weighted sum ``n² d_v``: the ``O(n²·d)`` term of chapter 6.

    Parameters
    ----------
    n : int
        Number of tokens.
    d_k : int
        Query and key width per head.
    d_v : int, optional
        Value width per head; defaults to ``d_k``.
    h : int
        Number of heads.

    Returns
    -------
    macs : int
        ``h · n² · (d_k + d_v)``.
    """
    return h * n * n * (d_k + (d_k if d_v is None else d_v))


@boundary(grid=grid(), C=count())
def msa_macs(grid, C):
    """Swin's cost of global multi-head self-attention, ``4nC² + 2n²C``.

    With ``n = H·W`` patches, the first term counts the four ``C × C``
    projections (queries, keys, values, output) and the second forms
    ``Q Kᵀ`` and ``A V`` over all ``n²`` pairs (Liu et al., 2021, Eq. 1,
    written there ``4hwC² + 2(hw)²C``; chapter 7).

    Parameters
    ----------
    grid : (int, int)
        Patch grid ``(H, W)``.
    C : int
        Token width (channels).

    Returns
    -------
    macs : int
        ``4·n·C² + 2·n²·C`` multiply-adds, quadratic in the number of
        patches.
    """
    n = grid[0] * grid[1]
    return 4 * n * C * C + 2 * n * n * C


@boundary(grid=grid(), C=count(), M=count(), checks=(tiles(),))
def window_msa_macs(grid, C, M):
    """Swin's cost of window self-attention, ``4nC² + 2M²nC``.

    Each of the ``n = H·W`` tokens attends only within its ``M × M`` window,
    so the pair term becomes ``2·M²·n·C``: linear in the number of patches
    for a fixed ``M`` (Liu et al., 2021, Eq. 2; chapter 7).

    Parameters
    ----------
    grid : (int, int)
        Patch grid ``(H, W)``.
    C : int
        Token width (channels).
    M : int
        Window side in patches (7 in Swin).

    Returns
    -------
    macs : int
        ``4·n·C² + 2·M²·n·C`` multiply-adds.

    Raises
    ------
    ValueError
        If ``M`` does not divide ``H`` and ``W`` (windows must tile the grid).
    """
    n = grid[0] * grid[1]
    return 4 * n * C * C + 2 * M * M * n * C


@boundary(grid=grid(), M=count(), h=count(), checks=(tiles(),))
def window_score_entries(grid, M, h=1):
    """Score entries of window attention: ``H·W`` queries times ``M²`` keys.

    Compared with :func:`score_entries` of the whole grid (``(HW)²``), the
    saving is ``HW / M²``, the number of windows (64 for Swin's 56 × 56
    grid and M = 7; chapter 7).

    Raises
    ------
    ValueError
        If ``M`` does not divide ``H`` and ``W``.
    """
    return h * grid[0] * grid[1] * M * M


@boundary(nbytes=integer(0))
def human_bytes(nbytes):
    """Bytes in decimal units with two decimals: ``10.07 GB``, ``153.66 kB``.

    :func:`cost_calculator` formats its numbers the same way in JavaScript.
    """
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6),
                       ("kB", 10**3)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


_SIDES = (32, 64, 96, 128, 224, 256, 384, 512, 1024)
_DTYPES = (("float16", 2), ("float32", 4), ("float64", 8))


def _calculator_rows(image_size, patch_size, heads, itemsize):
    n = tokens(image_size, patch_size)
    per_head = score_entries(n)
    total = per_head * heads * itemsize
    vit = score_entries(tokens(224, 16))
    return [("tokens n", f"{n:,}"),
            ("score entries per head, n²", f"{per_head:,}"),
            (f"memory for {heads} head(s), one layer", human_bytes(total)),
            ("entries per head / ViT-B/16 at 224 px (38,416)",
             f"{per_head / vit:,.2f}")]


def cost_calculator(image_size: int = 224, patch_size: int = 16,
                    heads: int = 1, dtype: str = "float32"):
    """A kernel-free calculator: patch size → tokens, entries, bytes.

    The table is first filled in Python (so the stored page shows the
    default setting even without JavaScript); menus then recompute it in
    JavaScript from the same formulas as :func:`tokens`,
    :func:`score_entries` and :func:`attention_bytes` (chapter 6).

    Parameters
    ----------
    image_size : int
        Side of the square image in pixels, one of 32, 64, 96, 128, 224,
        256, 384, 512, 1024.
    patch_size : int
        Initial patch side; must divide ``image_size``.
    heads : int
        Initial number of heads (1 to 16).
    dtype : str
        ``"float16"``, ``"float32"`` or ``"float64"``.

    Returns
    -------
    IPython.display.HTML
    """
    import html
    import hashlib

    from IPython.display import HTML

    image_size = positive_int(image_size, "image_size")
    if image_size not in _SIDES:
        raise ValueError(f"image_size must be one of {_SIDES}, got "
                         f"{image_size}")
    heads = positive_int(heads, "heads")
    if heads > 16:
        raise ValueError(f"heads must be between 1 and 16, got {heads}")
    sizes = dict(_DTYPES)
    if dtype not in sizes:
        raise ValueError(f"dtype must be one of {tuple(sizes)}, got "
                         f"{dtype!r}")
    rows = _calculator_rows(image_size, patch_size, heads, sizes[dtype])
    key = f"{image_size}-{patch_size}-{heads}-{dtype}"
    uid = "sa-cost-" + hashlib.sha1(key.encode()).hexdigest()[:10]

    def options(values, chosen, label=str):
        return "".join(
            f'<option value="{v}"{" selected" if v == chosen else ""}>'
            f"{label(v)}</option>" for v in values)

    patches = [p for p in range(1, image_size + 1) if image_size % p == 0]
    body = "".join(f"<tr><td>{html.escape(k)}</td>"
                   f'<td style="text-align:right" data-row="{i}">{v}</td></tr>'
                   for i, (k, v) in enumerate(rows))
    return HTML(_CALC_TEMPLATE.format(
        uid=uid, body=body,
        sides=options(_SIDES, image_size, lambda v: f"{v} × {v}"),
        patches=options(patches, patch_size, lambda v: f"{v} × {v}"),
        heads=options(range(1, 17), heads),
        dtypes="".join(
            f'<option value="{b}"{" selected" if name == dtype else ""}>'
            f"{name}</option>" for name, b in _DTYPES)))


_CALC_TEMPLATE = r"""<div id="{uid}" class="sa-cost" data-testid="cost-calculator" style="font-family:sans-serif;max-width:560px">
<p style="margin:0 0 6px 0"><strong>What attention over one image costs</strong></p>
<label>image <select data-in="side">{sides}</select></label>
<label>patch <select data-in="patch">{patches}</select></label>
<label>heads <select data-in="heads">{heads}</select></label>
<label>type <select data-in="bytes">{dtypes}</select></label>
<table style="margin-top:6px;border-collapse:collapse" aria-live="polite">
{body}
</table>
</div>
<script>
(function() {{
  var root = document.getElementById("{uid}");
  function get(name) {{
    return +root.querySelector('[data-in="' + name + '"]').value; }}
  function commas(x) {{
    return String(x).replace(/\B(?=(\d{{3}})+(?!\d))/g, ","); }}
  function human(b) {{
    var units = [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
    for (var i = 0; i < units.length; i++) {{
      if (b >= units[i][1]) {{
        return (b / units[i][1]).toFixed(2) + " " + units[i][0]; }}
    }}
    return b + " B";
  }}
  function patches() {{
    var side = get("side"), sel = root.querySelector('[data-in="patch"]');
    var old = +sel.value, best = 1, html = "";
    for (var p = 1; p <= side; p++) {{
      if (side % p === 0) {{
        if (Math.abs(p - old) < Math.abs(best - old)) {{ best = p; }}
        html += '<option value="' + p + '">' + p + " × " + p + "</option>";
      }}
    }}
    sel.innerHTML = html; sel.value = best;
  }}
  function update() {{
    var side = get("side"), p = get("patch"), h = get("heads");
    var n = (side / p) * (side / p), e = n * n;
    var vals = [commas(n), commas(e),
                human(e * h * get("bytes")),
                commas((e / 38416).toFixed(2))];
    root.querySelectorAll("[data-row]").forEach(function(td) {{
      td.textContent = vals[+td.getAttribute("data-row")]; }});
    var label = root.querySelectorAll("td")[4];
    label.textContent = "memory for " + h + " head(s), one layer";
  }}
  root.querySelector('[data-in="side"]').addEventListener("change",
    function() {{ patches(); update(); }});
  ["patch", "heads", "bytes"].forEach(function(name) {{
    root.querySelector('[data-in="' + name + '"]')
      .addEventListener("change", update); }});
}})();
</script>"""
