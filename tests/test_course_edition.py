"""The course edition of the site (make book SOLUTIONS=hidden).

The book is built once with SELFATTENTION_SOLUTIONS=hidden into a temporary
folder; no solution's code or output may appear in its pages, the
notebooks offered for download are the student versions, and the exercises
themselves are still there.
"""

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from selfattention_course.names import BEGIN, END, META

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    env = dict(os.environ, SELFATTENTION_SOLUTIONS="hidden")
    done = subprocess.run(
        [str(JUPYTER_BOOK), "build", str(ROOT), "-W", "-n", "--keep-going",
         "--path-output", str(out)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out / "_build" / "html"


def page_text(path: Path) -> str:
    text = re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))
    return " ".join(html.unescape(text).split())


def solution_parts(nb):
    """Lines only a solution holds, and the text its cells print."""
    inside, lines, printed = False, set(), []
    elsewhere = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            elsewhere.add(" ".join(cell.source.split()))
            continue
        for line in cell.source.splitlines():
            if line.strip() == BEGIN:
                inside = True
            elif line.strip() == END:
                inside = False
            elif inside:
                lines.add(" ".join(line.split()))
            else:
                elsewhere.add(" ".join(line.split()))
        if "solution" in cell.metadata.get("tags", []):
            printed += [out["text"].strip().splitlines()[0]
                        for out in cell.get("outputs", [])
                        if out.get("output_type") == "stream"]
    shown = "\n".join(elsewhere)
    return [ln for ln in lines if len(ln) > 12 and ln not in shown], \
        [p for p in printed if len(p) > 12 and p not in shown]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_solution_code_or_output_is_published(site, path):
    nb = nbformat.read(path, as_version=4)
    lines, printed = solution_parts(nb)
    assert lines, "the chapter has solutions to hide"
    raw = (site / "chapters" / f"{path.stem}.html").read_text()
    text = page_text(site / "chapters" / f"{path.stem}.html")
    leaked = [ln for ln in lines + printed if ln in text]
    assert not leaked, leaked
    assert not re.search(r'class="[^"]*\bsolution\b', raw)
    assert "colab.research.google.com" not in raw
    labels = re.findall(r":label: (ex-[\w-]+)", "\n".join(
        c.source for c in nb.cells if c.cell_type == "markdown"))
    for label in labels:
        assert f'id="{label}"' in raw, label


def test_the_downloadable_notebooks_are_the_student_versions(site):
    for path in CHAPTERS:
        copy = site / "_sources" / "chapters" / path.name
        nb = nbformat.read(copy, as_version=4)
        assert META in nb.metadata
        assert BEGIN not in copy.read_text()
