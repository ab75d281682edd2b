"""What the grader reads of a submitted notebook before and after its run.

:func:`identify` finds a notebook's chapter (from the metadata of the
student version, else its exercise labels, else its check calls);
:func:`clean` gives the copy that runs (code cells without outputs, at most
:data:`MAX_CELLS` cells); :func:`written_answers` the answers of its
written parts; :func:`safe_executed` the executed copy that the gradebook
keeps, with only the outputs a reader can trust
(:data:`KEPT_OUTPUT`).
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from .assign import calls, exercise_labels
from .names import META, WRITTEN_STUB

__all__ = ["MAX_NOTEBOOK", "MAX_CELLS", "load_manifest", "identify",
           "clean", "written_answers", "safe_executed"]


MAX_NOTEBOOK = 20 * 2 ** 20


#: Cells a notebook may have (a chapter has fewer than a hundred).
MAX_CELLS = 2_000


#: Characters of one written answer that reach the instructor's page.
MAX_WRITTEN = 20_000


#: What the grader keeps of an output in the executed notebook: text and
#: bitmaps; HTML, JavaScript, SVG, widgets and the like could run code in
#: whatever program the instructor opens it with.
KEPT_OUTPUT = ("text/plain", "image/png", "image/jpeg")


def load_manifest(path: Path) -> tuple[dict[str, dict], list[str]]:
    """The manifest's chapters by file stem, and extra exercise modules."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {ch["file"]: ch for ch in data["chapters"]}, \
        list(data.get("modules", []))


def identify(nb, chapters: dict[str, dict]) -> tuple[str | None, str]:
    """The chapter (file stem) a notebook belongs to, and how it was found."""
    meta = nb.metadata.get(META, {})
    meta = meta if isinstance(meta, dict) else {}
    for stem, ch in chapters.items():
        if meta.get("chapter") == ch["chapter"]:
            return stem, "notebook metadata"
    labels = set(exercise_labels(nb))     # cell metadata or directives
    best = max(chapters.values(), default=None, key=lambda ch: len(
        labels & {ex["label"] for ex in ch["exercises"]}))
    if best and labels & {ex["label"] for ex in best["exercises"]}:
        return best["file"], "exercise labels"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    best = max(chapters.values(), default=None, key=lambda ch: sum(
        calls(code, ex["check"]) for ex in ch["exercises"]))
    if best and any(calls(code, ex["check"]) for ex in best["exercises"]):
        return best["file"], "check calls"
    return None, ""


def clean(nb) -> nbformat.NotebookNode:
    """The notebook the sandbox runs: sources, tags; no outputs or state."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            tags = [t for t in cell.metadata.get("tags", [])
                    if isinstance(t, str)] if isinstance(
                cell.metadata.get("tags"), list) else []
            new = nbformat.v4.new_code_cell(cell.source)
            if tags:
                new.metadata["tags"] = tags
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source)
        else:
            new = nbformat.v4.new_raw_cell(cell.source)
        cells.append(new)
    return nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3",
                       "language": "python"}})


def written_answers(nb) -> dict[str, str]:
    found: dict[str, str] = {}
    for cell in nb.cells:
        meta = cell.metadata.get(META)
        if cell.cell_type == "markdown" and isinstance(meta, dict) \
                and isinstance(meta.get("written"), str):
            text = cell.source
            head, _, rest = text.partition("\n\n")
            body = rest if head.startswith("**Your answer") else text
            body = "" if body.strip() == WRITTEN_STUB else body.strip()
            found[meta["written"]] = found.get(meta["written"], "") + body
    for label, text in found.items():
        if len(text) > MAX_WRITTEN:
            found[label] = (text[:MAX_WRITTEN] + f"\n[the grader cut this "
                            f"answer at {MAX_WRITTEN} characters]")
    return found


def safe_executed(nb) -> str:
    """The executed notebook with only text and bitmap outputs."""
    nb.metadata = {k: v for k, v in nb.metadata.items()
                   if k in ("kernelspec", "language_info")}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        dropped = 0
        for out in cell.get("outputs", []):
            data = out.get("data")
            if isinstance(data, dict):
                kept = {k: v for k, v in data.items() if k in KEPT_OUTPUT
                        and isinstance(v, (str, list))}
                dropped += len(kept) < len(data)
                if not kept:
                    kept = {"text/plain": "[output removed by the grader]"}
                out["data"] = kept
            if "metadata" in out:
                out["metadata"] = {}
        if dropped:
            cell.outputs.append(nbformat.v4.new_output(
                "stream", name="stderr",
                text=f"[the grader removed HTML, JavaScript or other rich "
                     f"parts from {dropped} output(s)]\n"))
    return nbformat.writes(nb)
