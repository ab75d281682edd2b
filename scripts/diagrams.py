"""Write the book's diagrams as SVG: ``make diagrams``.

Every diagram of :mod:`selfattention_book.diagrams` is saved as
``_static/diagrams/<name>.svg``, with ``manifest.json`` beside it (name ->
file, alt text, size in inches, bytes). The bytes depend only on the code:
a fixed ``svg.hashsalt``, no date, text as paths. Text as paths keeps the
drawing identical for every reader (the mathtext symbols need matplotlib's
own fonts, which a reader's browser does not have) and in the build; the
alt text in the manifest, used by each figure's ``:alt:``, carries the words.
``tests/book/test_diagrams.py`` fails when a committed file differs from what
this script writes now.

Usage: python scripts/diagrams.py [--check] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from selfattention_book import diagrams  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_static" / "diagrams"
MANIFEST = "manifest.json"


def render(name: str, fig=None) -> tuple[bytes, dict]:
    """The SVG bytes of diagram ``name`` and its manifest entry; ``fig``:
    the diagram already drawn."""
    fig = diagrams.draw(name) if fig is None else fig
    svg = diagrams.to_svg(fig)
    width, height = (round(float(v), 3) for v in fig.get_size_inches())
    entry = {"file": f"{name}.svg", "alt": diagrams.ALT[name],
             "width_in": width, "height_in": height, "bytes": len(svg)}
    return svg, entry


def manifest_bytes(entries: dict) -> bytes:
    return (json.dumps(entries, indent=2, ensure_ascii=False) + "\n").encode()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="diagrams (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; fail if a file is stale")
    args = parser.parse_args(argv)
    names = args.names or list(diagrams.DIAGRAMS)
    path = OUT / MANIFEST
    entries = json.loads(path.read_text()) if path.is_file() else {}
    stale = []
    for name in names:
        svg, entry = render(name)
        target = OUT / entry["file"]
        if args.check:
            if not target.is_file() or target.read_bytes() != svg:
                stale.append(target.name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            target.write_bytes(svg)
            print(f"{target.relative_to(ROOT)}: {len(svg):,} bytes")
        entries[name] = entry
    entries = {k: entries[k] for k in diagrams.DIAGRAMS if k in entries}
    if args.check:
        if not path.is_file() or path.read_bytes() != manifest_bytes(entries):
            stale.append(MANIFEST)
        if stale:
            print("stale: " + ", ".join(stale) + "; run make diagrams",
                  file=sys.stderr)
        return 1 if stale else 0
    path.write_bytes(manifest_bytes(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
