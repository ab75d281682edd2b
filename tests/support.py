"""Small helpers that several test files share."""

import functools
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The gradebook codes of answers sent for review from their source
#: (selfattention_course.review.diagnosis); the notebook's own check,
#: which sees only what the kernel reports, says "for-review".
REVIEW_CODES = {"review-reference", "review-judge", "review-checks",
                "review-dynamic", "review-hook"}


#: The chapter that stands for every chapter in ``make test``: its pages in
#: the browser, its notebook in JupyterLab, its student notebook in the
#: sandbox. ``make sweep`` (and CI) runs the same tests on every other one.
SAMPLE_CHAPTER = "01_definition"
#: The pages besides the chapter's that ``make test`` opens in Chromium: the
#: first page a reader meets and the instructors' page of widest tables
#: (``make sweep`` opens every other one, the redirect ``index.html`` too).
SAMPLE_PAGES = ("intro.html", "appendices/instructors/exercises.html")


def in_sample(case: str) -> bool:
    """Whether ``make test`` runs a per-page or per-chapter case: a page of
    :data:`SAMPLE_PAGES`, or any name of a page, notebook or chapter that
    contains :data:`SAMPLE_CHAPTER` (its further pages too)."""
    return case in SAMPLE_PAGES or SAMPLE_CHAPTER in case


def sampled(cases, ids=str):
    """``cases`` for ``pytest.mark.parametrize``: those :func:`in_sample`
    accepts as they are, the others marked ``sweep`` (``make sweep``)."""
    return [case if in_sample(ids(case)) else
            pytest.param(case, marks=pytest.mark.sweep) for case in cases]


def stem(path: Path) -> str:
    """A chapter's case id: its notebook's name without ``.ipynb``."""
    return path.stem


def module_from_file(relative: str, name: str | None = None):
    """Import the script or extension at ``ROOT / relative`` (a file that is
    not part of a package, such as ``scripts/diagrams.py``) as a module."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module           # for dataclasses defined in it
    spec.loader.exec_module(module)
    return module


def answers_only(nb):
    """The student notebook ``nb`` cut to what its answers need, as a
    student may hand it in: its prose, the cell that imports its checks,
    the code it shows from the library, its answer cells and the cells that
    call a check. Its examples, figures and explorers go, and with them
    about 0.7 s of processor time from each hostile route's job."""
    def needed(cell) -> bool:
        source = cell.source
        return (cell.cell_type != "code" or "selfattention" in cell.metadata
                or "checks." in source
                or ("import" in source and " as checks" in source))
    nb.cells = [cell for cell in nb.cells if needed(cell)]
    return nb


def class_of_routes(tmp: Path, chapter: Path, routes: dict[str, str]):
    """A class that hands in ``chapter``: "honest" (its solutions),
    "untouched" (the student notebook as given) and one student per route,
    the student notebook cut to its answers (:func:`answers_only`) with the
    route's code as its last cell.

    Returns ``(subs, student, hand_in)``: the submissions folder, the path
    of the student notebook, and ``hand_in(name, nb)`` for more students.
    """
    import nbformat

    from selfattention_course import assign

    assign.build([chapter], tmp / "assignments")
    student = tmp / "assignments" / "student" / chapter.name
    subs = tmp / "submissions"
    subs.mkdir()

    def hand_in(name: str, nb) -> None:
        (subs / name).mkdir()
        nbformat.write(nb, subs / name / "homework.ipynb")

    hand_in("honest", nbformat.read(chapter, as_version=4))
    hand_in("untouched", nbformat.read(student, as_version=4))
    for name, source in routes.items():
        nb = answers_only(nbformat.read(student, as_version=4))
        nb.cells.append(nbformat.v4.new_code_cell(source.strip()))
        hand_in(name, nb)
    return subs, student, hand_in


def rows_of(run, student):
    """The gradebook rows of ``student`` in a graded class (the ``run``
    fixture of tests/e2e/test_hostile_grading.py and
    test_hostile_sandbox.py)."""
    return [r for r in run["rows"] if r.student == student]


def executed(run, student, chapter="01_definition"):
    """``student``'s notebook of ``chapter`` as it ran in the sandbox."""
    import nbformat

    path = run["out"] / "executed" / student / f"{chapter}.ipynb"
    return nbformat.read(path, as_version=4)


def printed(run, student) -> str:
    """What the cell added last printed, from the executed notebook."""
    nb = executed(run, student)
    return "".join(out.get("text", "") for out in nb.cells[-1].outputs)


def run_bpf(program: bytes, arch: int, number: int, arg0: int = 0) -> int:
    """What a classic BPF seccomp program returns for one call: the
    interpreter of the kernel's filters, for the instructions they use."""
    import struct

    data = struct.pack("<iIQQ", number, arch, 0, arg0)   # nr, arch, ip, a0
    steps = [struct.unpack("<HBBI", program[i:i + 8])
             for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = steps[pc]
        if op == 0x20:                             # ld [k]
            acc = struct.unpack("<I", data[k:k + 4])[0]
            pc += 1
        elif op in (0x15, 0x35, 0x45):             # jeq, jge, jset
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += 1 + (jt if hit else jf)
        else:                                      # ret
            return k


# ------------------------------------------------------ image files
def encoded(array, fmt="PNG"):
    """``array`` (H, W) or (H, W, channels) as the bytes of an image file."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, fmt)
    return buffer.getvalue()


def png_header(width, height):
    """A PNG file that declares ``width`` × ``height`` 8-bit grey pixels
    and holds none: what a decompression bomb shows before it is read."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data)))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0,
                                       0, 0)) + chunk(b"IEND", b""))


@functools.lru_cache(maxsize=1)
def hostile_files():
    """Files that no photograph can be made of, by what is wrong with them:
    not an image, cut short, too small, too oblong, too many pixels or
    bytes, values that are not numbers."""
    import io

    import numpy as np
    from PIL import Image

    from selfattention_models.photos import MAX_BYTES

    rng = np.random.default_rng(0)
    jpeg = encoded((rng.random((80, 80, 3)) * 255).astype(np.uint8), "JPEG")
    png = encoded((rng.random((80, 80)) * 255).astype(np.uint8))
    nan = io.BytesIO()
    Image.fromarray(np.full((40, 40), np.nan, np.float32)).save(nan, "TIFF")
    return {"text": b"<html>not an image</html>", "empty": b"",
            "cut-jpeg": jpeg[:300], "cut-png": png[:200],
            "tiny": encoded(np.zeros((20, 20), np.uint8)),
            "oblong": encoded(np.zeros((40, 1000), np.uint8)),
            "bomb": png_header(20000, 20000),       # 400 Mpixel declared
            "many-pixels": png_header(10000, 6000),
            "no-pixels": png_header(200, 200),      # header, then nothing
            "nan": nan.getvalue(),
            "many-bytes": png + bytes(MAX_BYTES)}
