"""Sphinx extension of the book: a self-contained site and dated chapters.

Loaded through ``sphinx.local_extensions`` in ``_config.yml``. It does three
things (and keeps a single search field, see :func:`theme_defaults`):

* **MathJax from the site itself, on every page.** After an HTML build it
  copies MathJax 4 (the npm packages ``mathjax`` and its default font
  ``@mathjax/mathjax-newcm-font``, pinned by version and integrity in
  :data:`MATHJAX_PACKAGES`, fetched once from the npm registry without Node)
  to ``<output>/_vendor/mathjax/``; ``mathjax_path`` in ``_config.yml``
  points there. It is copied after the build, not placed in the book's
  ``_static/``, because Jupyter Book adds every ``.js`` file under
  ``_static/`` to every page. A ``.nojekyll`` file keeps GitHub Pages from
  hiding ``_``-folders.
  Every page loads MathJax, because the navigation of every page shows the
  chapter titles, and titles may hold math.
* **Each inline script once.** Sphinx 7.4 lists an inline script (one added
  with ``app.add_js_file(None, body=...)``) twice when an extension adds it
  after the builder started: the builder keeps the entry with filename
  ``None`` and, before writing, re-adds the registry's copy with filename
  ``''``; the two differ only in that spelling, so the duplicate check misses
  it. sphinx-thebe adds ``const THEBE_JS_URL = ...`` that way, and a second
  ``const`` declaration is a SyntaxError in the browser ("Identifier
  'THEBE_JS_URL' has already been declared"), on every page. We drop exact
  duplicates from each page's script list before it is rendered.
* **When and with what each chapter was executed.** ``make execute``
  (``scripts/execute_notebooks.py``) stores ``metadata.selfattention =
  {executed, python, numpy, torch}`` in a notebook; here that becomes one
  line under the chapter's title. A notebook without it gets a warning
  (an error in the strict build) that says how to add it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from selfattention_book.pages import chapter_of

logger = logging.getLogger(__name__)

VENDOR_DIR = "_vendor"
MATHJAX_DIR = f"{VENDOR_DIR}/mathjax"
STAMP_KEY = "selfattention"
STAMP_FIELDS = ("executed", "python", "numpy", "torch")


# ------------------------------------------------------------------ MathJax
#: MathJax 4 and its default font, from the npm registry (no Node needed):
#: tarball and its integrity (sha512, as ``npm view <pkg>@<v> dist`` gives).
#: MathJax 4 breaks a display equation too wide for its column into lines
#: (``displayOverflow: linebreak`` in _config.yml); MathJax 3 cannot.
MATHJAX_VERSION = "4.1.1"
MATHJAX_PACKAGES = {
    "mathjax": (
        "https://registry.npmjs.org/mathjax/-/mathjax-4.1.1.tgz",
        "sha512-NyvA8c39LUUM/m+oCg7sfA13hmw7yGkre5kiRWN9qzChCyhce39lecnbjgMA"
        "/oEUgq9Vyetk6u78apwcIXpW/A=="),
    "mathjax-newcm-font": (
        "https://registry.npmjs.org/@mathjax/mathjax-newcm-font/-/"
        "mathjax-newcm-font-4.1.1.tgz",
        "sha512-LeV5AWzoR7k/k2tg5mW0Ad3Jr9oK9guW/zBUIP8aoiIZcZIhvAV9dlbtUSqS"
        "e1wgEBUP1KOcJXcrE/NxOqkxlQ=="),
}
#: Inside the site's MathJax folder, where the fonts go (``loader.paths.fonts``
#: in _config.yml points there, instead of MathJax's default CDN).
FONTS_DIR = "fonts"


def _integrity(data: bytes) -> str:
    import base64
    import hashlib

    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def mathjax_source(cache: Path | None = None) -> Path:
    """MathJax 4 as the site serves it: the ``mathjax`` npm package with the
    ``mathjax-newcm-font`` package under ``fonts/``.

    Both tarballs are downloaded once from the npm registry into ``cache``
    (default: ``<sys.prefix>/share/selfattention-mathjax/<version>``, in the
    book's ``.venv``), checked against their pinned integrity, and unpacked.
    """
    import io
    import sys
    import tarfile
    import urllib.request

    cache = cache or (Path(sys.prefix) / "share" / "selfattention-mathjax"
                      / MATHJAX_VERSION)
    done = cache / ".complete"
    if done.is_file():
        return cache
    if cache.exists():
        shutil.rmtree(cache)
    for name, (url, integrity) in MATHJAX_PACKAGES.items():
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                data = response.read()
        except OSError as err:
            raise RuntimeError(
                f"MathJax {MATHJAX_VERSION} is not in {cache} and could not "
                f"be downloaded from {url} ({err}); the first build needs the "
                "npm registry") from err
        if _integrity(data) != integrity:
            raise RuntimeError(f"{url} does not match its pinned integrity "
                               f"{integrity}")
        target = cache if name == "mathjax" else cache / FONTS_DIR / name
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts
                if not member.isfile() or parts[0] != "package" \
                        or ".." in parts:
                    continue
                out = target.joinpath(*parts[1:])
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(tar.extractfile(member).read())
    done.write_text(MATHJAX_VERSION)
    return cache


def copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: put MathJax and ``.nojekyll`` into the output."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    source = mathjax_source()
    target = out / MATHJAX_DIR
    version = json.loads((source / "package.json").read_text())["version"]
    marker = target / ".version"
    if not (marker.is_file() and marker.read_text() == version):
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
        marker.write_text(version)
    (out / ".nojekyll").touch()
    logger.info(f"[book_assets] MathJax {version} served from {MATHJAX_DIR}/")


# ------------------------------------------------------------ inline scripts
def _script_key(script) -> tuple:
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {})
    priority = getattr(script, "priority", 500)
    return (str(filename), priority, tuple(sorted(attributes.items())))


def unique_scripts(app: Sphinx, pagename: str, templatename: str,
                   context: dict, doctree) -> None:
    """``html-page-context``: list each script of the page once."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


# --------------------------------------------------------------------- theme
def theme_defaults(app: Sphinx, config) -> None:
    """``config-inited``: one search field, in the sidebar.

    pydata-sphinx-theme 0.17 turns an unset ``navbar_persistent`` into a
    search field in a bar of its own above every page; under
    sphinx-book-theme that bar only repeats the sidebar's search field.
    """
    config.html_theme_options.setdefault("navbar_persistent", [])


# -------------------------------------------------------------- version line
def stamp_of(path: Path) -> dict | None:
    """The ``selfattention`` metadata of a notebook, if complete."""
    metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    stamp = metadata.get(STAMP_KEY) or {}
    if all(stamp.get(field) for field in STAMP_FIELDS):
        return stamp
    return None


def stamp_sentence(stamp: dict) -> str:
    return (f"Last executed on {stamp['executed']} with Python "
            f"{stamp['python']}, NumPy {stamp['numpy']} and PyTorch "
            f"{stamp['torch']}.")


def add_version_line(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read``: one line under the title of every notebook page."""
    docname = app.env.docname
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    stamp = stamp_of(path)
    if stamp is None:
        relative = path.relative_to(app.srcdir).as_posix()
        logger.warning(
            f"{relative} has no execution stamp (metadata.{STAMP_KEY} with "
            f"{', '.join(STAMP_FIELDS)}); run `make execute NB={relative}`",
            location=docname, type="book_assets", subtype="stamp")
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    line = nodes.paragraph(classes=["sa-executed"])
    sentence = stamp_sentence(stamp)
    if chapter_of(docname):     # a chapter's further page (book_pages.py)
        # the course edition (course_edition.py) has no launch buttons
        opener = ("the download button gives"
                  if getattr(app.config, "course_edition", False)
                  else "the launch buttons open")
        sentence = ("This page runs as part of its chapter's notebook, "
                    f"which {opener}. " + sentence)
    line += nodes.emphasis(text=sentence)
    section.insert(1, line)  # right after the title


# ------------------------------------------------------------- plain titles
_SUBSCRIPTS = dict(zip("0123456789aehijklmnoprstuvx",
                       "₀₁₂₃₄₅₆₇₈₉ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))


def plain_title(title: str) -> str:
    """A page title as plain text for the browser's tab: its inline maths
    (``\\(\\sqrt{d_k}\\)`` or ``$\\sqrt{d_k}$``) written with Unicode
    (``√dₖ``), other markup dropped."""
    import re

    def math(m: re.Match) -> str:
        tex = m.group(1) or m.group(2) or ""
        tex = re.sub(r"\\sqrt\{([^{}]*)\}", r"√\1", tex)
        tex = re.sub(r"\\(times|cdot)\b", lambda t: {"times": "×",
                                                   "cdot": "·"}[t[1]], tex)

        def sub(t: re.Match) -> str:
            text = t.group(1) or t.group(2)
            low = "".join(_SUBSCRIPTS.get(ch, "") for ch in text)
            return low if len(low) == len(text) else "_" + text
        tex = re.sub(r"_\{([^{}]*)\}|_(\w)", sub, tex)
        tex = re.sub(r"\\[A-Za-z]+\s*", "", tex)
        return tex.replace("{", "").replace("}", "").strip()

    text = re.sub(r"<[^>]+>", "", title)
    text = re.sub(r"\\\((.*?)\\\)|\$(.+?)\$", math, text)
    return " ".join(text.split())


def plain_page_title(app: Sphinx, pagename: str, templatename: str,
                     context: dict, doctree) -> None:
    """``html-page-context``: the page's ``<title>`` without TeX."""
    if context.get("title"):
        context["title"] = plain_title(context["title"])


def setup(app: Sphinx) -> dict:
    # MathJax on every page, not only on pages with equations of their own:
    # the navigation shows every chapter title, and titles hold math
    # ("Scaling by sqrt(d_k)"), which would stay raw TeX elsewhere.
    app.set_html_assets_policy("always")
    app.connect("config-inited", theme_defaults)
    app.connect("build-finished", copy_mathjax)
    app.connect("html-page-context", unique_scripts)
    app.connect("html-page-context", plain_page_title)
    app.connect("doctree-read", add_version_line)
    # env_version: raise it when a change here alters the pages, so that an
    # incremental build rewrites all of them
    return {"version": "1.1", "env_version": 5, "parallel_read_safe": True,
            "parallel_write_safe": True}
