"""Write the plain-Jupyter notebooks that the launch buttons open.

    python scripts/plain_notebooks.py          # rewrite notebooks/
    python scripts/plain_notebooks.py --check  # exit 1 if any is stale

Each chapter of ``_toc.yml``, and each appendix written as a notebook,
becomes ``notebooks/<name>.ipynb`` through
:func:`selfattention_book.plain.plain_notebook`: cross-references and
citations as links to the online book, numbered equations, exercises as
headed blocks, solutions folded. ``make execute`` runs this after it
re-executes the notebooks; ``tests/book/test_plain_notebooks.py`` fails when the
folder is stale.
"""

import argparse
import sys
from pathlib import Path

import nbformat

from selfattention_book.plain import BookIndex, plain_notebook

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "notebooks"


def expected(root: Path = ROOT) -> dict[Path, str]:
    """{path under notebooks/: text} for every chapter of the book and
    every appendix that is a notebook."""
    index = BookIndex(root)
    out = {}
    for doc in index.chapters + index.appendices:
        nb = nbformat.read(root / f"{doc}.ipynb", as_version=4)
        plain = plain_notebook(nb, index, doc, solutions="folded")
        out[OUT / f"{Path(doc).name}.ipynb"] = nbformat.writes(plain) + "\n"
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="report stale notebooks instead of writing")
    args = parser.parse_args(argv)
    want = expected()
    stale = [p for p, text in want.items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    extra = sorted(set(OUT.glob("*.ipynb")) - set(want))
    if args.check:
        for path in stale + extra:
            print(f"stale: {path.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale or extra else 0
    OUT.mkdir(exist_ok=True)
    for path in stale:
        path.write_text(want[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    for path in extra:
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
