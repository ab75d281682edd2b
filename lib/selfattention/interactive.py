"""Interactive figures, in two layers (every chapter's "Try it" section).

* :func:`patch_explorer`, :func:`bar_explorer` and :func:`frames_explorer`
  return self-contained HTML/JavaScript figures built from precomputed
  numbers. They need no kernel, so they work in the static book: click a
  patch, see where it attends.
* :func:`live` wraps ``ipywidgets.interactive`` for Jupyter, Colab and
  Binder, where sliders recompute the figure with Python.

The HTML is a pure function of its inputs (numbers printed with fixed
precision, an id derived from a hash of the data), so it is byte-for-byte
stable and nbval can compare it. The three explorers share one shell
(``_explorer_html``): a titled box with a caption that screen readers
announce, and a script that reads the data and finds its elements; each
explorer adds its own controls and drawing code.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

__all__ = ["patch_explorer", "live"]


def _viridis_stops(k: int = 16) -> list[list[int]]:
    from matplotlib import colormaps

    rgba = colormaps["viridis"](np.linspace(0, 1, k))
    return [[int(round(255 * c)) for c in rgb[:3]] for rgb in rgba]


# ------------------------------------------------------------ shared shell
def _rounded(values, digits: int) -> list:
    """``values`` as nested lists of floats with ``digits`` decimals."""
    values = np.asarray(values, dtype=float)
    if values.ndim > 1:
        return [_rounded(v, digits) for v in values]
    return [float(f"{v:.{digits}f}") for v in values]


def _grey_levels(img) -> list:
    """Grey levels 0 … 255 of an image with values roughly in [0, 1]."""
    return np.clip(np.round(255 * img), 0, 255).astype(int).tolist()


def _payload(data: dict, separator: str = ",") -> str:
    """``data`` as JSON that can stand inside a ``<script>`` element.

    ``separator`` goes between items; ``", "`` keeps long arrays from
    forming runs without spaces (see :func:`frames_explorer`).
    """
    text = json.dumps(data, separators=(separator, ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c")     # no "</script>" inside


#: The viridis colour of ``t`` in [0, 1], interpolated in the table ``D.lut``.
_COLOUR_JS = """\
  function colour(t) {
    var k = Math.min(D.lut.length - 1, Math.max(0, t * (D.lut.length - 1)));
    var i = Math.floor(k), f = k - i, j = Math.min(i + 1, D.lut.length - 1);
    return D.lut[i].map(function(c, m) {
      return Math.round(c + f * (D.lut[j][m] - c)); });
  }
"""


def _explorer_html(*, uid_prefix: str, css_class: str, testid: str,
                   caption_testid: str, width: int, title: str,
                   controls: str, payload: str, setup: str, draw: str,
                   canvas: tuple | None = None, colour: bool = False):
    """Wrap an explorer's controls and script in the shell they all share.

    Parameters
    ----------
    uid_prefix : str
        Start of the element id; a hash of ``payload`` completes it, so two
        figures on one page never share an id and the HTML stays stable.
    css_class, testid : str
        Class and ``data-testid`` of the outer box.
    caption_testid : str
        ``data-testid`` of the caption, a ``<p class="sa-caption">`` that is
        an ``aria-live`` region: screen readers announce what it says.
    width : int
        Largest width of the box in screen pixels.
    title : str
        Title above the figure, inserted as it is (escape it first).
    controls : str
        HTML between the title and the canvas (buttons, panel rows).
    payload : str
        JSON from :func:`_payload`; the script reads it as ``D``.
    setup, draw : str
        The explorer's JavaScript, one statement per line indented by two
        spaces: ``setup`` declares its state and elements, ``draw`` draws
        and listens. Besides ``D`` they can use ``root`` (the box), ``cap``
        (the caption), with a canvas ``cv`` and its context ``cx``, and
        with ``colour`` the function ``colour(t)`` (defined after
        ``setup``).
    canvas : (width, height, aria_label, clickable), optional
        One canvas after the controls, an image for screen readers
        described by ``aria_label``; ``clickable`` shows a pointer cursor.
    colour : bool
        Define ``colour(t)``, the viridis colour of ``t`` in [0, 1].

    Returns
    -------
    IPython.display.HTML
    """
    from IPython.display import HTML

    uid = uid_prefix + hashlib.sha1(payload.encode()).hexdigest()[:10]
    html = [f'<div id="{uid}" class="{css_class}" data-testid="{testid}" '
            f'style="font-family:sans-serif;max-width:{width}px">\n'
            f'<p style="margin:0 0 4px 0"><strong>{title}</strong></p>\n'
            f"{controls}\n"]
    script = ["<script>\n(function() {\n", f"  var D = {payload};\n",
              f'  var root = document.getElementById("{uid}");\n']
    if canvas is not None:
        w, h, label, clickable = canvas
        cursor = "cursor:pointer;" if clickable else ""
        html.append(f'<canvas width="{w}" height="{h}" role="img" '
                    f'aria-label="{label}" style="{cursor}max-width:100%;'
                    f'border:1px solid #ccc"></canvas>\n')
        script.append('  var cv = root.querySelector("canvas"), '
                      'cx = cv.getContext("2d");\n')
    html.append(f'<p class="sa-caption" data-testid="{caption_testid}" '
                f'aria-live="polite" style="margin:4px 0;font-size:0.9em">'
                f"</p>\n</div>\n")
    script += ['  var cap = root.querySelector(".sa-caption");\n', setup,
               _COLOUR_JS if colour else "", draw, "})();\n</script>"]
    return HTML("".join(html + script))


# ---------------------------------------------------------- patch explorer
def patch_explorer(img, A, grid: tuple[int, int], patch: int,
                   query: int = 0, title: str = "", scale: int = 8):
    """A kernel-free figure: click a patch to see its attention map.

    Parameters
    ----------
    img : array_like, shape (H, W)
        Grayscale image with values roughly in [0, 1].
    A : array_like, shape (n, n) or (h, n, n)
        Attention weights, one row per query patch (``n = rows·cols``). With
        a head axis, buttons switch between heads.
    grid : (rows, cols)
        Patch grid.
    patch : int
        Patch side in pixels.
    query : int
        Patch selected when the page loads.
    title : str
        Caption shown above the figure.
    scale : int
        Screen pixels per image pixel.

    Returns
    -------
    IPython.display.HTML
        Renders as ``text/html`` in Jupyter and in the built book.
    """
    img = np.asarray(img, dtype=float)
    A = np.asarray(A, dtype=float)
    if A.ndim == 2:
        A = A[None]
    rows, cols = grid
    n = rows * cols
    if A.shape[-2:] != (n, n):
        raise ValueError(f"A must have shape (h, {n}, {n}), got {A.shape}")
    if img.shape != (rows * patch, cols * patch):
        raise ValueError(
            f"img must have shape {(rows * patch, cols * patch)}, got {img.shape}"
        )
    data = {
        "pixels": _grey_levels(img), "weights": _rounded(A, 3),
        "rows": rows, "cols": cols, "patch": patch, "scale": scale,
        "query": int(query), "lut": _viridis_stops(),
    }
    head_buttons = "".join(
        f'<button type="button" data-head="{k}">head {k + 1}</button>'
        for k in range(A.shape[0])) if A.shape[0] > 1 else ""
    label = ("Image with the attention map of the selected patch; click a "
             "patch to select it")
    return _explorer_html(
        uid_prefix="sa-", css_class="sa-explorer", testid="patch-explorer",
        caption_testid="explorer-caption", width=cols * patch * scale,
        title=_html_escape(title),
        controls=f'<div class="sa-heads">{head_buttons}</div>',
        canvas=(cols * patch * scale, rows * patch * scale, label, True),
        payload=_payload(data), setup=_PATCH_SETUP, draw=_PATCH_DRAW,
        colour=True)


_PATCH_SETUP = """\
  var head = 0, q = D.query, s = D.scale, P = D.patch;
"""

_PATCH_DRAW = """\
  function draw() {
    var w = D.weights[head][q], top = Math.max.apply(null, w);
    for (var y = 0; y < D.pixels.length; y++) {
      for (var x = 0; x < D.pixels[0].length; x++) {
        var g = D.pixels[y][x];
        var t = w[Math.floor(y / P) * D.cols + Math.floor(x / P)] / top;
        var c = colour(t), a = 0.7;
        cx.fillStyle = "rgb(" + Math.round((1 - a) * g + a * c[0]) + "," +
          Math.round((1 - a) * g + a * c[1]) + "," +
          Math.round((1 - a) * g + a * c[2]) + ")";
        cx.fillRect(x * s, y * s, s, s);
      }
    }
    var r = Math.floor(q / D.cols), c0 = q % D.cols;
    cx.strokeStyle = "#ff7f0e"; cx.lineWidth = 3;
    cx.strokeRect(c0 * P * s + 1.5, r * P * s + 1.5, P * s - 3, P * s - 3);
    var order = w.map(function(v, j) { return [v, j]; })
      .sort(function(a, b) { return b[0] - a[0] || a[1] - b[1]; }).slice(0, 3);
    cap.textContent = "query patch (" + r + ", " + c0 + ")" +
      (D.weights.length > 1 ? ", head " + (head + 1) : "") +
      ": strongest keys " + order.map(function(o) {
        return "(" + Math.floor(o[1] / D.cols) + ", " + (o[1] % D.cols) +
          ") " + o[0].toFixed(3); }).join(", ");
  }
  cv.addEventListener("click", function(e) {
    var b = cv.getBoundingClientRect();
    var x = (e.clientX - b.left) * cv.width / b.width;
    var y = (e.clientY - b.top) * cv.height / b.height;
    q = Math.floor(y / (P * s)) * D.cols + Math.floor(x / (P * s));
    draw();
  });
  root.querySelectorAll("button[data-head]").forEach(function(btn) {
    btn.addEventListener("click", function() {
      head = +btn.getAttribute("data-head"); draw(); });
  });
  draw();
"""


def live(function, **widgets):
    """Wrap ``ipywidgets.interactive`` with the book's defaults.

    ``function`` draws a figure from keyword arguments; each keyword in
    ``widgets`` is an ipywidgets control (or an abbreviation such as a
    ``(min, max, step)`` tuple). Returns the widget; display it as the last
    line of a cell. Runs in Jupyter, Colab and Binder, where a kernel is
    attached; the static book shows the figure drawn just before it.
    """
    import ipywidgets

    widget = ipywidgets.interactive(function, **widgets)
    widget.children[-1].layout.min_height = "320px"
    return widget


# ------------------------------------------------------------ bar explorer
def bar_explorer(values, choices, series, title: str = "",
                 xlabel: str = "", ymax: float | None = None,
                 choice: int = 0, width: int = 300, height: int = 180):
    """A kernel-free figure: buttons switch between precomputed bar charts.

    Each choice (a button) shows ``len(series)`` panels side by side, each a
    bar chart of ``n`` values; the caption gives each panel's largest bar.
    Chapter 2 uses it for one attention row at several ``d_k``, unscaled
    and scaled.

    Parameters
    ----------
    values : array_like, shape (n_choices, n_series, n)
        The bars: ``values[c, s]`` is panel ``s`` under choice ``c``.
    choices : sequence of str, length n_choices
        Button labels.
    series : sequence of str, length n_series
        Panel titles.
    title : str
        Caption shown above the figure.
    xlabel : str
        Label under every panel (what the bars are indexed by).
    ymax : float, optional
        Top of the vertical axis; defaults to the largest value.
    choice : int
        Choice shown when the page loads.
    width, height : int
        Size of one panel in screen pixels.

    Returns
    -------
    IPython.display.HTML
        Self-contained HTML and JavaScript, byte-for-byte stable for the
        same inputs (values are stored with 4 decimals).

    Raises
    ------
    ValueError
        If ``values`` is not a finite non-negative 3-D array, the number of
        labels does not match its shape, or ``choice`` is out of range.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 3:
        raise ValueError(
            f"values must have shape (n_choices, n_series, n), got shape "
            f"{values.shape}"
        )
    if not np.all(np.isfinite(values)) or (values < 0).any():
        raise ValueError("values must be finite and non-negative")
    choices, series = [str(c) for c in choices], [str(s) for s in series]
    if len(choices) != values.shape[0]:
        raise ValueError(
            f"choices must have one label per choice ({values.shape[0]}), "
            f"got {len(choices)}"
        )
    if len(series) != values.shape[1]:
        raise ValueError(
            f"series must have one title per panel ({values.shape[1]}), "
            f"got {len(series)}"
        )
    if not 0 <= int(choice) < len(choices):
        raise ValueError(
            f"choice must be between 0 and {len(choices) - 1}, got {choice}"
        )
    top = float(values.max()) if ymax is None else float(ymax)
    data = {
        "values": _rounded(values, 4),
        "choices": choices, "series": series, "xlabel": xlabel,
        "ymax": float(f"{top:.4f}") or 1.0, "choice": int(choice),
        "w": int(width), "h": int(height), "colour": _viridis_stops(5)[1],
    }
    buttons = "".join(
        f'<button type="button" data-choice="{k}">{_html_escape(c)}</button>'
        for k, c in enumerate(choices))
    size = values.shape[1] * int(width)
    label = ("Bar charts of the selected choice, one panel per series; use "
             "the buttons to switch")
    return _explorer_html(
        uid_prefix="sa-bars-", css_class="sa-bars", testid="bar-explorer",
        caption_testid="bar-caption", width=size, title=_html_escape(title),
        controls=f'<div class="sa-choices">{buttons}</div>',
        canvas=(size, int(height), label, False), payload=_payload(data),
        setup=_BARS_SETUP, draw=_BARS_DRAW)


def _html_escape(text: str) -> str:
    """Escape ``&``, ``<``, ``>`` and quotes for HTML text and attributes."""
    import html

    return html.escape(str(text), quote=True)


_BARS_SETUP = """\
  var btns = root.querySelectorAll("button[data-choice]");
  var k = D.choice, pad = 28, top = 22, foot = 26;
"""

_BARS_DRAW = """\
  function draw() {
    cx.clearRect(0, 0, cv.width, cv.height);
    cx.font = "12px sans-serif"; cx.textAlign = "center";
    var parts = [];
    D.series.forEach(function(name, s) {
      var v = D.values[k][s], x0 = s * D.w + pad, pw = D.w - pad - 8;
      var ph = D.h - top - foot, bw = pw / v.length;
      cx.fillStyle = "#000"; cx.fillText(name, x0 + pw / 2, 14);
      cx.strokeStyle = "#888"; cx.beginPath();
      cx.moveTo(x0, top); cx.lineTo(x0, top + ph); cx.lineTo(x0 + pw, top + ph);
      cx.stroke();
      cx.textAlign = "right"; cx.fillText("0", x0 - 3, top + ph + 4);
      cx.fillText(D.ymax.toFixed(2), x0 - 3, top + 8); cx.textAlign = "center";
      cx.fillStyle = "rgb(" + D.colour.join(",") + ")";
      v.forEach(function(y, j) {
        var hh = Math.min(1, y / D.ymax) * ph;
        cx.fillRect(x0 + j * bw + 1, top + ph - hh, Math.max(1, bw - 2), hh);
      });
      cx.fillStyle = "#000";
      cx.fillText(D.xlabel, x0 + pw / 2, D.h - 6);
      parts.push(name + " " + Math.max.apply(null, v).toFixed(3));
    });
    btns.forEach(function(b, j) { b.style.fontWeight = j === k ? "bold" : ""; });
    cap.textContent = D.choices[k] + ": largest bar " + parts.join(", ");
  }
  btns.forEach(function(b) {
    b.addEventListener("click", function() {
      k = +b.getAttribute("data-choice"); draw(); });
  });
  draw();
"""

__all__ += ["bar_explorer"]


# --------------------------------------------------------- frames explorer
def frames_explorer(frames, A, grid: tuple[int, int], patch: int,
                    query: int = 0, keys=None, title: str = "",
                    labels=None, key_labels=None, scale: int = 6):
    """A kernel-free figure: click a patch of one frame, see where it looks.

    Attention between the patches of several frames: the frames of a video
    (self-attention over space and time, chapter 8) or two different images
    (cross-attention, chapter 9). Clicking a patch of a query frame draws its
    weights over every key frame on one shared colour scale; the caption
    names the strongest keys and the displacement to the strongest one.

    Parameters
    ----------
    frames : array_like, shape (F, H, W)
        Query frames, grayscale with values roughly in [0, 1].
    A : array_like, shape (F·n, G·n)
        Attention weights, ``n = rows·cols`` patches per frame; query
        ``f·n + r·cols + c`` is patch (r, c) of frame ``f``, keys likewise.
    grid : (rows, cols)
        Patch grid of every frame.
    patch : int
        Patch side in pixels.
    query : int
        Query selected when the page loads.
    keys : array_like, shape (G, H, W), optional
        Key frames (cross-attention): drawn in a second row that shows the
        map, while the query frames above only take clicks. By default the
        keys are the query frames themselves, which then show the map.
    title : str
        Caption shown above the figure.
    labels, key_labels : sequence of str, optional
        Names of the frames (default "frame 0", "frame 1", ...).
    scale : int
        Screen pixels per image pixel.

    Returns
    -------
    IPython.display.HTML
        Self-contained HTML and JavaScript, byte-for-byte stable for the
        same inputs (weights are stored with 3 decimals).

    Raises
    ------
    ValueError
        If the frames do not fit the grid, ``A`` does not fit the frames,
        a label list has the wrong length, or ``query`` is out of range.
    """
    frames = np.asarray(frames, dtype=float)
    cross = keys is not None
    key_frames = np.asarray(keys, dtype=float) if cross else frames
    rows, cols = grid
    n = rows * cols
    for arr, name in ((frames, "frames"), (key_frames, "keys")):
        if arr.ndim != 3 or arr.shape[1:] != (rows * patch, cols * patch):
            raise ValueError(
                f"{name} must have shape (count, {rows * patch}, "
                f"{cols * patch}) for a {rows}x{cols} grid of {patch}-pixel "
                f"patches, got {arr.shape}"
            )
    A = np.asarray(A, dtype=float)
    want = (len(frames) * n, len(key_frames) * n)
    if A.shape != want:
        raise ValueError(f"A must have shape {want}, got {A.shape}")
    if not 0 <= int(query) < want[0]:
        raise ValueError(f"query must be between 0 and {want[0] - 1}, "
                         f"got {query}")
    labels = [f"frame {t}" for t in range(len(frames))] if labels is None \
        else [str(s) for s in labels]
    key_labels = labels if not cross and key_labels is None else (
        [f"frame {t}" for t in range(len(key_frames))] if key_labels is None
        else [str(s) for s in key_labels])
    if len(labels) != len(frames) or len(key_labels) != len(key_frames):
        raise ValueError(
            f"labels need one name per frame ({len(frames)} and "
            f"{len(key_frames)}), got {len(labels)} and {len(key_labels)}"
        )
    data = {
        "q": _grey_levels(frames), "k": _grey_levels(key_frames),
        "cross": cross, "weights": _rounded(A, 3),
        "rows": rows, "cols": cols, "patch": int(patch), "scale": int(scale),
        "query": int(query), "lut": _viridis_stops(),
        "labels": labels, "keyLabels": key_labels,
    }
    w = cols * patch * int(scale)
    panels = len(frames) + (len(key_frames) if cross else 0)
    rows_html = "".join(
        f'<div class="{row}" style="display:flex;gap:8px;flex-wrap:wrap">'
        f"</div>\n" for row in ("sa-qrow", "sa-krow"))
    # ", " keeps runs without spaces short: nbval's sanitizing regexes
    # backtrack quadratically over long runs of non-space characters
    return _explorer_html(
        uid_prefix="sa-frames-", css_class="sa-frames",
        testid="frames-explorer", caption_testid="frames-caption",
        width=panels * (w + 40),       # room for borders, gaps and margins
        title=_html_escape(title),
        controls=('<div style="display:flex;gap:8px;flex-wrap:wrap">\n'
                  f"{rows_html}</div>"),
        payload=_payload(data, separator=", "), setup=_FRAMES_SETUP,
        draw=_FRAMES_DRAW, colour=True)


_FRAMES_SETUP = """\
  var P = D.patch, s = D.scale, n = D.rows * D.cols, q = D.query;
  var W = D.cols * P * s, H = D.rows * P * s;
  function panel(row, label, clickable) {
    var box = document.createElement("figure");
    box.style.margin = "0";
    var cv = document.createElement("canvas");
    cv.width = W; cv.height = H;
    cv.style.maxWidth = "100%"; cv.style.border = "1px solid #ccc";
    cv.setAttribute("role", "img");
    cv.setAttribute("aria-label", label + (clickable ?
      ": click a patch to make it the query" : ": attention of the query"));
    if (clickable) cv.style.cursor = "pointer";
    var fc = document.createElement("figcaption");
    fc.textContent = label; fc.style.fontSize = "0.85em";
    fc.style.textAlign = "center";
    box.appendChild(cv); box.appendChild(fc); row.appendChild(box);
    return cv;
  }
  var qc = D.q.map(function(f, t) {
    return panel(root.querySelector(".sa-qrow"), D.labels[t], true); });
  var kc = D.cross ? D.k.map(function(f, t) {
    return panel(root.querySelector(".sa-krow"), D.keyLabels[t], false); })
    : qc;
"""

_FRAMES_DRAW = """\
  function paint(cv, img, w) {
    var cx = cv.getContext("2d");
    for (var y = 0; y < img.length; y++) {
      for (var x = 0; x < img[0].length; x++) {
        var g = img[y][x], a = w ? 0.7 : 0, c = [g, g, g];
        if (w) c = colour(w[Math.floor(y / P) * D.cols + Math.floor(x / P)]);
        cx.fillStyle = "rgb(" + Math.round((1 - a) * g + a * c[0]) + "," +
          Math.round((1 - a) * g + a * c[1]) + "," +
          Math.round((1 - a) * g + a * c[2]) + ")";
        cx.fillRect(x * s, y * s, s, s);
      }
    }
  }
  function where(j) {
    var f = Math.floor(j / n), r = Math.floor((j % n) / D.cols);
    return [f, r, j % D.cols];
  }
  function draw() {
    var w = D.weights[q];
    var top = Math.max.apply(null, w.map(Math.abs)) || 1;
    if (D.cross) qc.forEach(function(cv, t) { paint(cv, D.q[t], null); });
    kc.forEach(function(cv, t) {
      paint(cv, D.k[t], w.slice(t * n, (t + 1) * n).map(function(v) {
        return v / top; }));
    });
    var a = where(q), cx = qc[a[0]].getContext("2d");
    cx.strokeStyle = "#ff7f0e"; cx.lineWidth = 3;
    cx.strokeRect(a[2] * P * s + 1.5, a[1] * P * s + 1.5, P * s - 3, P * s - 3);
    var order = w.map(function(v, j) { return [v, j]; })
      .sort(function(x, y) { return y[0] - x[0] || x[1] - y[1]; })
      .slice(0, 3);
    var b = where(order[0][1]);
    cap.textContent = "query: " + D.labels[a[0]] + ", patch (" + a[1] + ", " +
      a[2] + "); strongest keys " + order.map(function(o) {
        var k = where(o[1]);
        return D.keyLabels[k[0]] + " (" + k[1] + ", " + k[2] + ") " +
          o[0].toFixed(3); }).join(", ") +
      "; displacement to the strongest (rows, columns): (" +
      (b[1] - a[1]) + ", " + (b[2] - a[2]) + ")";
  }
  qc.forEach(function(cv, t) {
    cv.addEventListener("click", function(e) {
      var r = cv.getBoundingClientRect();
      var x = (e.clientX - r.left) * cv.width / r.width;
      var y = (e.clientY - r.top) * cv.height / r.height;
      q = t * n + Math.min(D.rows - 1, Math.floor(y / (P * s))) * D.cols +
        Math.min(D.cols - 1, Math.floor(x / (P * s)));
      draw();
    });
  });
  draw();
"""

__all__ += ["frames_explorer"]
