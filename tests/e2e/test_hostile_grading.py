"""The grader against hostile submissions, all graded in one run.

Every submission below is chapter 1's student notebook, cut to what its
answers need (support.answers_only), with one cell added (or a hostile
file), and tries one way to score without solving anything, or to escape,
hang or flood the grader, or to harm the instructor or the classmates
graded beside it. They are graded two at a time, beside the chapter
itself handed in by an honest student (full marks) and the student
notebook left as given (0): ``make test`` grades one class with one or two
routes of each kind (:data:`SWEPT` leaves out the others), ``make sweep``
a second class with the others. Each hostile one must get 0 points
and a row that says what happened; the instructor's checkout and session
keyring must stay out of reach; no process of the run may survive it; a
listener on a loopback port must receive nothing; the gradebook keeps its
columns. The tests after the run check the pieces that do not need a
sandbox: fingerprints of copied code, NaN, Markdown, names, parsing.
"""

import csv
import ctypes
import hashlib
import inspect
import json
import os
import socket
import stat
import threading
import time
from pathlib import Path

import nbformat
import pytest

from exercise_answers import temperatures_for
from hostile_routes import (AUTO, CHAPTER, FOR_REVIEW_ROUTES, KEY, KEYCTL,
                            LABELS, MARKER, ROWS, SECRET, routes)
from selfattention_course import assign
from selfattention_course.cli import grade_folder
from selfattention_course.grade import Grader
from selfattention_course.notebook import MAX_CELLS
from selfattention_course.intake import MAX_PER_STUDENT
from selfattention_course.names import (COLUMNS, FOR_REVIEW, NOT_DONE,
                                        NOT_GRADED, REFUSED, TO_BE_READ,
                                        WRONG)
from selfattention_course.sandbox import Bubblewrap, Limits
from support import (REVIEW_CODES, class_of_routes, executed, printed,
                     rows_of, run_bpf)

ROOT = Path(__file__).resolve().parents[2]
JOBS = 2
BACKEND = Bubblewrap()               # its jobs run as uid_base, uid_base + 1

# CI must run the graded class: there a missing bubblewrap is a failure,
# not a skip.
NO_SANDBOX = not BACKEND.works() and not os.environ.get("CI")

#: The routes that ``make sweep`` grades, in a class of their own, each a
#: variant of a route of ``make test``'s class: the judge's helpers reached
#: through other objects (judge-dict), the library through other modules
#: (module-in-list) or other strings (global-exec, encoded-setup), the
#: tripwire's other gaps, a reference in PyTorch's fast path (beside
#: layer-attention), an endless cell and a processor hog (beside the
#: endless answer, the fork bomb and tests/e2e/test_written.py's notebook
#: that runs into its cell limit), the flood of output (beside
#: rich-output). Each class has its honest student and its untouched
#: notebook.
SWEPT = frozenset({
    "co-filename", "computed-name", "cpu-hog", "endless-cell",
    "fast-path", "huge-output", "input-transformer", "judge-attribute",
    "judge-registry", "judge-reshaped", "oracle", "profile-off",
    "pydoc-locate", "recompiled-source", "reference-dict",
    "shifted-shown-cell", "shortcut-sdpa", "sympy-exec", "thread",
    "torch-module-in-list", "torchscript-string"})


def cases(students):
    """``students`` for ``pytest.mark.parametrize``: those of
    :data:`SWEPT` marked for ``make sweep``."""
    return [pytest.param(*(s if isinstance(s, tuple) else (s,)),
                         marks=pytest.mark.sweep)
            if (s[0] if isinstance(s, tuple) else s) in SWEPT else s
            for s in students]


def honest_habits():
    """The chapter handed in by an honest student with the habits of one:
    autoreload loaded first, help asked for, a line printed to stderr, the
    machine named, and a cell left with a syntax error (which the kernel
    does not run: the answer defined before it is graded)."""
    nb = nbformat.read(CHAPTER, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first, nbformat.v4.new_code_cell(
        "%load_ext autoreload\n%autoreload 2"))
    nb.cells += [nbformat.v4.new_code_cell(source) for source in (
        "import numpy as np\nnp.einsum?",
        "import sys\nprint('checked', file=sys.stderr)",
        "import platform\nprint(platform.system(), platform.machine())",
        "def my_tempered_attention(Q, K, V, tau):\n    return (Q @ K.T")]
    return nb


def build_submissions(tmp: Path, port: int, gradebook: Path,
                      swept: bool) -> Path:
    """The class of ``make sweep`` (``swept``: the routes of
    :data:`SWEPT`) or of ``make test`` (the other routes, the honest habits,
    the hostile files and folders)."""
    chosen = {name: source for name, source in routes(port, gradebook).items()
              if (name in SWEPT) == swept}
    subs, student, hand_in = class_of_routes(tmp, CHAPTER, chosen)
    if swept:
        return subs
    hand_in("honest-habits", honest_habits())
    semicolon = nbformat.read(CHAPTER, as_version=4)
    semicolon.cells.append(nbformat.v4.new_code_cell("shown = [1, 2];"))
    hand_in("honest-semicolon", semicolon)
    # Hostile files.
    (subs / "fifo").mkdir()
    os.mkfifo(subs / "fifo" / "homework.ipynb")
    (subs / "symlink-file").mkdir()
    (subs / "symlink-file" / "homework.ipynb").symlink_to("/etc/passwd")
    (subs / "symlink-folder").symlink_to(subs / "honest")
    (subs / "too-big").mkdir()
    with open(subs / "too-big" / "homework.ipynb", "wb") as out:
        out.truncate(21 * 2 ** 20)
    (subs / "not-json").mkdir()
    (subs / "not-json" / "homework.ipynb").write_text(
        f"=cmd|' /C calc'!A0 {MARKER} secret text")
    (subs / "=SUM(1+1)").mkdir()
    (subs / "=SUM(1+1)" / "homework.ipynb").write_text(f"{MARKER} not json")
    if os.geteuid() == 0:
        (subs / "device").mkdir()
        os.mknod(subs / "device" / "homework.ipynb",
                 stat.S_IFCHR | 0o600, os.makedev(1, 3))
    # A loose notebook: a flat folder counts it for a student of that name.
    (subs / "loose.ipynb").write_bytes(student.read_bytes())
    # Names that look alike once cleaned, or differ only in case; a student
    # who hands in too many notebooks; too many cells; a text on which a
    # careless regular expression takes quadratic time.
    for name in ("twin\nname", "twin\tname", "Case", "case"):
        (subs / name).mkdir()
        (subs / name / "homework.ipynb").write_text("{}")
    (subs / "many").mkdir()
    for i in range(MAX_PER_STUDENT + 5):
        (subs / "many" / f"copy{i:02d}.ipynb").write_text("{}")
    cells = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")
                                            for _ in range(MAX_CELLS + 1)])
    (subs / "cells").mkdir()
    nbformat.write(cells, subs / "cells" / "homework.ipynb")
    bomb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        ":" * 2_000_000), nbformat.v4.new_markdown_cell("`" * 2_000_000)])
    (subs / "colons").mkdir()
    nbformat.write(bomb, subs / "colons" / "homework.ipynb")
    return subs


def instructor_key() -> int | None:
    """A key in a session keyring of the grader (the instructor's)."""
    if KEYCTL is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(KEYCTL[2], 1, b"selfattention-test-session")  # join
    key = libc.syscall(KEYCTL[0], b"user", KEY, b"instructor-only", 15, -3)
    return key if key > 0 else None


def checkout_digest() -> str:
    """The instructor's files: the book's sources and the installed package
    (not what a build writes meanwhile: the chapters' further pages under
    chapters/<chapter>/, made by selfattention_book.book_pages, and the
    metadata that setuptools writes into lib/*.egg-info whenever the package
    is built, as the Colab-like install of tests/e2e/test_clients.py
    does)."""
    digest = hashlib.sha256()
    for folder in ("lib", "chapters", "scripts", "tests", "appendices"):
        for path in sorted((ROOT / folder).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file() or any(
                    part.endswith(".egg-info") for part in path.parts):
                continue
            if folder == "chapters" and len(path.relative_to(ROOT).parts) > 2:
                continue
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    site = next((ROOT / ".venv" / "lib").glob("python*/site-packages"))
    for path in sorted(site.iterdir()):
        digest.update(path.name.encode())
    return digest.hexdigest()


def job_processes() -> list[str]:
    """Processes of the run still alive: a job's uid or the marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        uid = int(status.split("Uid:")[1].split()[0])
        ours = BACKEND.privileged and \
            BACKEND.uid_base <= uid < BACKEND.uid_base + JOBS
        if ours or MARKER.encode() in cmdline:
            found.append(f"{entry.name} uid={uid} {cmdline[:80]!r}")
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``make test``'s class, graded."""
    return grade_class(tmp_path_factory, swept=False)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """``make sweep``'s class (the routes of :data:`SWEPT`), graded."""
    return grade_class(tmp_path_factory, swept=True)


@pytest.fixture
def run_of(request):
    """The graded class that holds a student."""
    return lambda student: request.getfixturevalue(
        "swept" if student in SWEPT else "run")


@pytest.fixture(params=["run", pytest.param("swept",
                                            marks=pytest.mark.sweep)])
def each_run(request):
    """Each graded class in turn."""
    return request.getfixturevalue(request.param)


def grade_class(tmp_path_factory, swept: bool) -> dict:
    if NO_SANDBOX:
        pytest.skip("bubblewrap cannot run here")
    tmp = tmp_path_factory.mktemp("hostile")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    received = []
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                received.append(conn.recv(100))
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    out = tmp / "gradebook"
    (out / "feedback").mkdir(parents=True)
    (out / "feedback" / "ghost.md").write_text("stale")
    (out / "executed" / "ghost").mkdir(parents=True)
    subs = build_submissions(tmp, port, out, swept)
    before = checkout_digest()
    os.environ[SECRET] = "instructor-only"
    key = instructor_key()
    # Limits well above what the honest notebooks take on a busy machine
    # (chapter 1's slowest cell takes 2 s, its harvest under 1 s), and low
    # enough that the routes that run into them end soon.
    limits = Limits(cell_seconds=6, notebook_seconds=90, harvest_seconds=8,
                    memory_bytes=3 * 2 ** 30)
    start = time.monotonic()
    rows, graded = grade_folder(subs, tmp / "assignments" / "grader" /
                                "manifest.json", out, jobs=JOBS,
                                backend=BACKEND, limits=limits,
                                echo=lambda *a: None)
    seconds = time.monotonic() - start
    del os.environ[SECRET]
    survivors = job_processes()
    time.sleep(1.5)                   # a detached writer would act by now
    stop.set()
    thread.join()
    listener.close()
    return {"rows": rows, "graded": {g.student: g for g in graded},
            "book": {(r.student, r.exercise): r for r in rows},
            "out": out, "seconds": seconds, "survivors": survivors,
            "received": received, "changed": checkout_digest() != before,
            "limits": limits, "csv": (out / "gradebook.csv").read_text(),
            "key": key, "info": json.loads((out / "run.json").read_text())}


def test_the_honest_student_scores_full_marks(each_run):
    """In each class, beside the hostile notebooks (the hog, the fork bomb,
    the endless ones) and graded again alone if one of them starved it."""
    run = each_run
    for label in AUTO:
        row = run["book"]["honest", label]
        assert row.points == row.max_points > 0, row.feedback
        assert row.code == "correct"
    for label in set(LABELS) - set(AUTO):       # the written part's points
        row = run["book"]["honest", label]
        assert row.max_points == 0 and row.code == "to-be-read"


@pytest.mark.parametrize("student", ["honest-habits", "honest-semicolon"])
def test_honest_habits_score_full_marks(run, student):
    """autoreload, help, stderr, platform.system and a last cell with a
    syntax error (an unclosed bracket) or ending in ";" (which IPython's
    display hook reads from the history) leave the auto-points whole."""
    for label in AUTO:
        row = run["book"][student, label]
        assert row.points == row.max_points > 0, row.feedback
        assert row.code == "correct"


def test_the_untouched_notebook_scores_zero(each_run):
    run = each_run
    for label in AUTO:
        row = run["book"]["untouched", label]
        assert row.points == 0 and row.code == "not-done"


@pytest.mark.parametrize("student", cases(FOR_REVIEW_ROUTES))
def test_the_tripwire_s_gaps_are_for_review_quoting_the_line(run_of,
                                                             student):
    run = run_of(student)
    row = run["book"][student, LABELS[0]]
    assert row.points == 0
    # Sent for review by the grader's reading of the source, not by what
    # the kernel reported ("for-review"); the row quotes the first finding,
    # a line of the cell the student added (the notebook's last).
    assert row.code in REVIEW_CODES, (row.code, row.feedback)
    first = run["graded"][student].findings[LABELS[0]][0]
    assert first.cell == len(executed(run, student).cells)
    assert first.text.strip() in routes(0, Path("/x"))[student]


def test_made_up_numbers_and_a_measured_prediction_earn_nothing(run):
    noise = run["book"]["invented-numbers", "ex-definition-noise"]
    assert noise.max_points == 0 and noise.code == "to-be-read"
    # A prediction measured on the moved copy: no auto-points to take.
    moved = run["book"]["invented-numbers", "ex-definition-moved"]
    assert moved.max_points == 0 and moved.code == "to-be-read"


def test_the_judges_are_not_in_the_sandbox(run):
    # The import fails (ImportError or its ModuleNotFoundError) inside.
    assert printed(run, "private-helpers").split()[:2] in (
        ["judges", "ModuleNotFoundError"], ["judges", "ImportError"])


@pytest.mark.parametrize("student", cases(sorted(routes(0, Path("/x")))))
def test_every_hostile_notebook_scores_zero_with_a_clear_row(run_of,
                                                             student):
    rows = rows_of(run_of(student), student)
    assert [r.exercise for r in rows] == ROWS
    for r in rows:
        assert r.points == 0, (student, r.feedback)
        assert r.status in (NOT_DONE, WRONG, FOR_REVIEW, NOT_GRADED,
                            TO_BE_READ), (r.status, r.feedback)
        assert r.code and len(r.feedback) > 20


@pytest.mark.parametrize("student, code, quoted", cases([
    # The line the row quotes (the first finding of the source review):
    # the library's attention taken apart, the copy the chapter shows
    # (its own cell), the signals sent to the runner, the pickles of the
    # helper process.
    ("library-answers", "review-reference", "A.attention.__wrapped__"),
    ("copies", "review-reference", "def attention("),
    ("endless-answer", "answer-timeout", None),
    ("kill-runner", "review-dynamic", "signal"),
    ("early-look", "review-reference", "pickle.dumps(A.attention("),
    # the judge's helpers, pasted or retyped; a listed reference inside a
    # PyTorch layer, as its attribute or through its fast path
    ("judge-pasted", "review-judge", "def _scores("),
    ("judge-retyped", "review-judge", "def weights("),
    ("layer-attention", "review-reference", "nn.TransformerEncoderLayer("),
    ("fast-path", "review-reference", "torch.nn.TransformerEncoderLayer("),
    # the helpers and a reference reached through objects only; a module
    # kept in a list; code compiled or run from strings
    ("judge-dict", "review-judge", "def _scores("),
    ("judge-attribute", "review-judge", "def _scores("),
    ("judge-registry", "review-judge", "def _scores("),
    ("reference-dict", "review-reference", 'R["a"] = sa.attention'),
    ("module-in-list", "review-dynamic", "[sa][0].attention"),
    ("torch-module-in-list", "review-dynamic", "[torch.nn][0]"),
    ("pydoc-locate", "review-dynamic", "import pydoc"),
    ("torchscript-string", "review-dynamic", "torch.jit.CompilationUnit"),
    ("sympy-exec", "review-dynamic", "from sympy.parsing"),
    ("judge-reshaped", "review-judge", "largest = lambda"),
    ("reference-retyped", "review-reference", "def attn("),
]))
def test_the_first_row_says_what_happened(run_of, student, code, quoted):
    run = run_of(student)
    row = run["book"][student, LABELS[0]]
    assert row.code == code, (row.code, row.feedback)
    if quoted is not None:
        first = run["graded"][student].findings[LABELS[0]][0]
        assert quoted in first.text, first.quote()


def test_the_limits_give_no_auto_points_to_a_measurement(run):
    # The limits are to be derived: the chapter's softmax (a copy of the
    # library's) run at an extreme scale measures them instead, so the
    # grader runs nothing of them and their points are the written part's.
    row = run["book"]["copies", LABELS[1]]
    assert row.points == row.max_points == 0 and row.code == "to-be-read", (
        row.feedback, run["graded"]["copies"].problems)


def test_hidden_cases_and_helpers_are_out_of_reach(run):
    assert printed(run, "early-look").split()[:3] == ["cases", "seen", "0"]
    # its helper was stopped and its fork failed inside the answer, and the
    # source shows the pickles
    assert run["book"]["early-look", LABELS[0]].code in REVIEW_CODES
    assert any(p.code == "strays-stopped"
               for p in run["graded"]["early-look"].problems)


def test_the_instructors_keyring_is_out_of_reach(run):
    if run["key"] is None:
        pytest.skip("no keyring here")
    text = printed(run, "keyring")
    assert "instructor-only" not in text and text.startswith("key -1")


@pytest.mark.sweep
def test_classmates_of_the_hog_are_graded_fairly(swept):
    run = swept
    # Whoever ran beside it and was starved into a time limit was graded
    # again alone (tests/e2e/test_hostile_sandbox.py tests the rule): the
    # honest student of its class has full marks, the untouched notebook
    # its zero (the tests above, on each class).
    for label in AUTO:
        row = run["book"]["honest", label]
        assert row.points == row.max_points > 0, row.feedback
    # The hog itself forks: its rows are for review.
    assert rows_of(run, "cpu-hog")[0].code in REVIEW_CODES


def test_rich_outputs_are_capped_and_defused(run):
    graded = run["graded"]["rich-output"]
    assert any(p.code == "output-truncated" for p in graded.problems)
    path = run["out"] / "executed" / "rich-output" / "01_definition.ipynb"
    assert path.stat().st_size < run["limits"].notebook_output_bytes
    nb = nbformat.read(path, as_version=4)
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    for part in ("<script", "alert(", "text/html", "javascript",
                 "image/svg"):
        assert part not in outputs, part
    assert "widgets" not in nb.metadata


def test_student_text_renders_as_text(run):
    from markdown_it import MarkdownIt

    page = (run["out"] / "feedback" / "feedback-text.md").read_text()
    html = MarkdownIt("gfm-like").render(page)     # links bare addresses
    assert "x.example" in html
    assert "<a" not in html and "<b>" not in html and "<img" not in html
    assert "\u202e" not in page and "\u202e" not in run["csv"]
    # Lone surrogates became "?" instead of stopping the whole gradebook.
    # (Kept on purpose: the row quotes the student's own error message, so
    # the quote is what is checked, not the grader's wording.)
    assert "reversed ?" in rows_of(run, "feedback-text")[0].feedback


def test_names_that_look_alike_stay_apart(run):
    students = {r.student for r in run["rows"]}
    twins = [s for s in students if s.startswith("twin?name")]
    assert len(twins) == 2 and "Case" in students and "case" in students
    pages = [p.name.casefold() for p in (run["out"] / "feedback").iterdir()]
    assert len(pages) == len(set(pages)) == len(students)


def test_parsing_bombs_and_floods_end_with_clear_rows(run):
    # MAX_PER_STUDENT notebooks read (each "{}", not a notebook), one row
    # for the rest.
    codes = sorted(r.code for r in rows_of(run, "many") if not r.chapter)
    assert codes == ["not-a-notebook"] * MAX_PER_STUDENT + [
        "too-many-entries"]
    (cells,) = [r for r in rows_of(run, "cells") if not r.chapter]
    assert (cells.status, cells.code) == (REFUSED, "too-many-cells")
    (bomb,) = [r for r in rows_of(run, "colons") if not r.chapter]
    assert bomb.code == "unknown-chapter"
    # Read for its chapter in the grader (in linear time: see
    # test_exercise_labels_are_found_in_linear_time), no cell of the bomb
    # reached a kernel: no sandboxed run, no executed notebook.
    colons = run["graded"]["colons"]
    assert colons.started is None and colons.cpu is None
    assert not (run["out"] / "executed" / "colons").exists()


@pytest.mark.sweep
def test_runs_that_stop_are_reported_to_the_student(swept):
    graded = swept["graded"]
    codes = {p.code for p in graded["endless-cell"].problems}
    assert codes & {"cell-timeout", "notebook-deadline"}, codes
    assert any(p.code == "output-truncated"
               for p in graded["huge-output"].problems)


def test_a_file_size_limit_stops_a_cell(run):
    graded = run["graded"]
    # Kept on purpose: "File too large" is the error the student's own cell
    # raised (EFBIG, quoted from the kernel): the file size limit held.
    assert any(p.code == "cell-raised" and "File too large" in p
               for p in graded["resources"].problems)


@pytest.mark.parametrize("student, code", [
    ("fifo", "not-a-file"), ("symlink-file", "symlink"),
    ("symlink-folder", "symlink"), ("too-big", "too-large"),
    ("not-json", "not-a-notebook"), ("=SUM(1+1)", "not-a-notebook"),
    ("device", "not-a-file"),
])
def test_hostile_files_get_a_clear_row_and_nothing_is_echoed(run, student,
                                                             code):
    if student == "device" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    rows = rows_of(run, student)
    (row,) = [r for r in rows if not r.chapter]
    assert row.points == row.max_points == 0
    assert row.code == code, (row.code, row.feedback)
    assert all(r.points == 0 and r.code == "no-notebook"
               for r in rows if r.chapter)
    # Other students' pages may quote their own code (which names MARKER);
    # what must never appear is the content of this student's hostile file.
    pages = [p.read_text() for p in (run["out"] / "feedback").iterdir()]
    from selfattention_course.gradebook import md_text
    title = f"# Feedback for {md_text(student)}\n"
    (page,) = [t for t in pages if t.startswith(title)]
    text = page + "".join(r.feedback for r in rows)
    assert MARKER not in text and "root:" not in text


def test_a_loose_notebook_is_graded_as_its_own_student(run):
    rows = rows_of(run, "loose")
    assert [r.exercise for r in rows] == ROWS
    assert all(r.points == 0 and r.chapter == "01_definition" for r in rows)


def test_the_gradebook_keeps_its_columns_and_defuses_formulas(run):
    table = list(csv.reader(run["csv"].splitlines()))
    assert tuple(table[0]) == COLUMNS
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
               for line in table[1:] for cell in line)
    assert any(line[0] == "'=SUM(1+1)" for line in table[1:])


def test_stale_files_are_gone(run):
    assert not (run["out"] / "feedback" / "ghost.md").exists()
    assert not (run["out"] / "executed" / "ghost").exists()
    assert (run["out"] / "feedback" / "honest.md").exists()


def test_nothing_escapes_the_sandbox(each_run):
    run = each_run
    assert not run["changed"], "the instructor's checkout changed"
    assert run["survivors"] == [], "processes of the run survived it"
    assert run["received"] == [], "the loopback listener received data"
    assert not Path(f"/tmp/{MARKER}").exists()
    assert not Path(f"/tmp/{MARKER}-shared").exists()
    assert run["csv"] == (run["out"] / "gradebook.csv").read_text()


def test_every_notebook_ends_within_its_time_limit(each_run):
    run = each_run
    # Kept on purpose: a time bound, because ending every notebook within
    # its time limit (plus the harvest and the start) is what is promised.
    limit = run["limits"].notebook_seconds + 20
    for g in run["graded"].values():
        assert g.seconds <= limit, (g.student, g.seconds)


def test_a_module_written_beside_the_notebook_is_not_imported(run):
    # The write succeeded (the folder is the notebook's to write in); the
    # import did not find it.
    assert printed(run, "cwd-module").split() == ["cwd", "import", "refused"]


def test_the_walls_held_where_the_notebooks_pushed(run):
    text = printed(run, "forge-channel")
    assert "wrote" not in text and text.count("PermissionError") == 2
    words = printed(run, "instructor-files").split()
    assert len(words) == 4 and all(w.endswith("Error") for w in words)
    text = printed(run, "escape")
    assert "connected" not in text and text.count("Error") == 3
    uid = text.split("uid ")[1].split()
    assert int(uid[0]) != os.geteuid() and uid[1] == "False"
    stopped = printed(run, "fork-bomb").split()
    assert stopped[:3] == ["fork", "stopped", "after"]
    assert int(stopped[3]) < run["limits"].processes


# ------------------------------------------------------------ the pieces
# These need no sandbox: what the grader does with what a notebook sends.

def _compiled(source: str, filename: str, **names) -> dict:
    space = dict(names)
    exec(compile(source, filename, "exec"), space)
    return space


def test_the_copy_a_chapter_shows_is_recognised():
    import inspect
    import linecache
    import math

    import numpy as np

    from selfattention.attention import attention, softmax
    from selfattention_exercises import definition
    from selfattention_exercises.core import CORRECT, FOR_REVIEW
    from selfattention_exercises.tripwire import fingerprint

    source = inspect.getsource(attention.__wrapped__)
    body = source[source.index("def "):]
    head, _, rest = body.partition('"""')
    _, _, rest = rest.partition('"""')
    page = head + '"""A summary line only."""' + rest
    reference = fingerprint(attention.__wrapped__.__code__)
    for number, (text, status) in enumerate((
            ("# lib/selfattention/attention.py\n" + page, FOR_REVIEW),
            ("# lib/selfattention/attention.py\nimport numpy as np\n\n\n"
             + page, FOR_REVIEW),
            (page, CORRECT),                     # retyped by the student
            ("# my own attention\n" + page, CORRECT))):
        name = f"/tmp/ipykernel_0/cell{number}.py"  # as IPython keeps cells
        lines = text.splitlines(True)
        linecache.cache[name] = (len(text), None, lines, name)
        try:
            copy = _compiled(text, name, np=np, math=math,
                             softmax=softmax)["attention"]
            assert fingerprint(copy.__code__) == reference

            def answer(Q, K, V, tau, copy=copy):
                return copy(Q / tau[..., None], K, V)

            feedback = definition.check_tempered_attention.feedback(
                answer, temperatures_for)
        finally:
            del linecache.cache[name]
        assert feedback.status == status, (number, feedback)


def test_a_students_own_code_is_not_taken_for_a_copy():
    import math

    import numpy as np

    from selfattention_exercises import definition
    from selfattention_exercises.core import CORRECT

    own = _compiled('''
def my_tempered_attention(Q, K, V, tau):
    S = Q @ np.swapaxes(K, -1, -2) / (math.sqrt(Q.shape[-1]) * tau[..., None])
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    A = E / E.sum(axis=-1, keepdims=True)
    return A @ V, A

def mine(Q, K, V, tau):
    Z = np.einsum("bqd,bkd->bqk", Q / tau[..., None], K) / Q.shape[-1] ** 0.5
    Z = np.exp(Z - Z.max(axis=-1, keepdims=True))
    Z = Z / Z.sum(axis=-1, keepdims=True)
    return Z @ V, Z
''', "/tmp/ipykernel_0/cell.py", np=np, math=math)
    for name in ("my_tempered_attention", "mine"):
        feedback = definition.check_tempered_attention.feedback(
            own[name], temperatures_for)
        assert feedback.status == CORRECT, feedback


@pytest.mark.parametrize("output", [
    float("nan"), [float("nan")], ("x", float("nan")), "NaN",
    __import__("numpy").array([1.0, float("nan")]),
    __import__("numpy").array([" nan", "1"])])
def test_nan_never_passes_even_a_careless_judge(output):
    import numpy as np

    from selfattention_exercises.core import CORRECT, WRONG, Exercise, Wrong

    def careless(out):                  # NaN > tol is False: it would pass
        values = np.asarray(out if not isinstance(out, tuple) else out[1:],
                            dtype=float)
        if np.any(np.abs(values - 1.0) > 1e-9):
            raise Wrong("not one")

    ex = Exercise("ex-test-nan", kind="Predict", points=1,
                  answers=("answer",), judge=careless)
    assess = ex.assess({"outcomes": [{"output": output}], "called": [],
                        "tampered": False}, [{}])
    assert assess.status == WRONG and assess.code == "nan", assess
    right = ex.assess({"outcomes": [{"output": 1.0}], "called": [],
                       "tampered": False}, [{}])
    assert right.status == CORRECT


@pytest.mark.parametrize("text", [
    "see https://x.example/a?b=c, www.x.example and a@x.example",
    "<b>bold</b> <img src=x onerror=alert(1)> <https://x.example>",
    "[link](https://x.example) ![img](https://x.example/i.png) x.example",
    "`code` *em* _em_ # heading | table | ~~strike~~ \u202ereversed\u200b",
])
def test_student_text_never_renders_as_markup(text):
    import mistune
    from markdown_it import MarkdownIt

    from selfattention_course.gradebook import md_text

    line = f"- **ex** (0 / 1): Not yet: {md_text(text)}"
    for html in (MarkdownIt("gfm-like").render(line),
                 mistune.create_markdown(plugins=["url", "strikethrough",
                                                  "table"])(line)):
        for tag in ("<a", "<img", "<b>", "<code", "<em", "<h1", "<del",
                    "<table"):
            assert tag not in html, (tag, html)
        assert "\u202e" not in html and "\u200b" not in html


def test_names_that_would_look_alike_stay_distinct():
    from selfattention_course.intake import student_name

    pairs = [("ab\ncd", "ab\tcd"), ("x" * 90 + "1", "x" * 90 + "2"),
             ("\u00e9mile", "e\u0301mile"), ("ann\u200b", "ann")]
    for a, b in pairs:
        assert student_name(a) != student_name(b)
        for name in (a, b):
            shown = student_name(name)
            assert shown.isprintable() and len(shown) <= 64
    assert student_name("ann") == "ann" and student_name("Zoë") == "Zoë"


def test_exercise_labels_are_found_in_linear_time():
    """A search is linear when a match is tried from the start of a run of
    colons or backticks only: a careless pattern tries every position
    inside a long run, each time across the rest of the run (quadratic;
    hours on the bombs below)."""
    from selfattention_course.assign import EXERCISE_RE

    text = "::::{exercise} Implement: x (1 point)\n:label: ex-a-b\n"
    assert [m.group("label") for m in EXERCISE_RE.finditer(text)] == [
        "ex-a-b"]
    for fence in (":" * 6, "`" * 6):
        text = f"{fence}{{exercise}} T\n:label: ex-a-b\n"
        assert EXERCISE_RE.match(text, 0) is not None
        # Inside the run, no match is tried (each is one it would repeat).
        assert all(EXERCISE_RE.match(text, start) is None
                   for start in range(1, len(fence)))
    for bomb in (":" * 2_000_000, "`" * 2_000_000, ":::{exercise}\n" * 10 ** 5):
        assert not list(EXERCISE_RE.finditer(bomb))


def test_of_two_notebooks_of_one_chapter_the_lower_counts():
    from selfattention_course.cli import assemble
    from selfattention_course.grade import Graded
    from selfattention_course.gradebook import Row

    chapters = {"01_definition": {"exercises": [
        {"label": "ex-a", "points": 1}, {"label": "ex-b", "points": 1}]}}

    def graded(name, points):
        g = Graded("ann", name, chapter="01_definition")
        g.rows = [Row("ann", "01_definition", label, p, 1.0, "")
                  for label, p in zip(("ex-a", "ex-b"), points)]
        return g

    for order in ((graded("best.ipynb", (1, 1)), graded("x.ipynb", (1, 0))),
                  (graded("x.ipynb", (1, 0)), graded("best.ipynb", (1, 1)))):
        rows, _, notes, _ = assemble(list(order), chapters)
        assert sum(r.points for r in rows) == 1
        assert [g.name for g in order if g.counted] == ["x.ipynb"]
        assert len(notes["ann"]) == 1           # the student is told why


def test_the_size_of_an_output_counts_all_of_it():
    from selfattention_course.runner import _size

    deep = [[[[[[[[["x" * 1000]]]]]]]]]
    assert _size({"content": {"data": {"application/json": deep}}}) > 1000
    assert _size({"content": {}, "buffers": [b"y" * 5000]}) >= 5000
    nested = current = []
    for _ in range(100_000):
        current.append([])
        current = current[0]
    assert _size({"content": nested}) >= 2 ** 40     # cannot be stored


def test_an_executed_notebook_keeps_text_and_bitmaps_only():
    from selfattention_course.notebook import safe_executed

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    nb.metadata["widgets"] = {"state": "x" * 100}
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": "<script>alert(1)</script>", "text/plain": "x",
        "image/png": "iVBORw0KGgo=", "application/javascript": "alert(2)",
        "image/svg+xml": "<svg onload=alert(3)/>"}, metadata={"a": 1}),
        nbformat.v4.new_output("display_data", data={
            "text/html": "<b>only html</b>"})]
    text = safe_executed(nb)
    for part in ("alert", "<script", "<svg", "<b>", "widgets"):
        assert part not in text
    kept = nbformat.reads(text, as_version=4).cells[0].outputs
    assert set(kept[0].data) == {"text/plain", "image/png"}
    assert "removed" in kept[1].data["text/plain"]


@pytest.mark.slow                   # it runs the runner (no sandbox)
def test_the_hidden_cases_go_to_the_runner_and_to_no_file(tmp_path):
    from selfattention_course import wire
    from selfattention_course.sandbox import Unisolated

    assign.build([CHAPTER], tmp_path / "a")
    grader = Grader(tmp_path / "a" / "grader" / "manifest.json",
                    Unisolated(), Limits(), seed=3)
    job = tmp_path / "job"
    job.mkdir()
    nb = nbformat.read(CHAPTER, as_version=4)
    cases, given = grader._write_job(job, nb, "ann",
                                     grader.chapters["01_definition"])
    assert sorted(p.name for p in job.iterdir()) == ["job.json",
                                                     "notebook.ipynb"]
    parts = wire.unpack(given)
    # An exercise without auto-points (its written part carries them) gets
    # no cases at all; every other one gets its own.
    drawn = [i for i, c in enumerate(cases) if c]
    assert 0 < len(drawn) < len(cases)
    assert sorted(parts) == [f"cases-{i}.bin" for i in drawn]
    again = wire.load_cases(parts["cases-0.bin"])
    assert again[0]["Q"].tobytes() == cases[0][0]["Q"].tobytes()


def test_processes_left_behind_are_stopped(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "strays.py"
    script.write_text('''
import ctypes, os, sys, time
from selfattention_course.processes import _stop_strays
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)          # a child subreaper
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        while True:
            time.sleep(1)
    os._exit(0)
pid = int(os.read(r, 20))
time.sleep(0.2)
count = _stop_strays(set())
time.sleep(0.2)
print(count, os.path.exists(f"/proc/{pid}"))
''')
    done = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["1", "False"], done.stderr


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_syscall_filter_refuses_the_keyrings_only(machine):
    from selfattention_course.sandbox.seccomp import (_KEY_CALLS,
                                                      seccomp_program)

    program = seccomp_program(machine)
    allow, deny = 0x7FFF0000, 0x00050001
    for arch, calls in _KEY_CALLS[machine]:
        for number in calls:
            assert run_bpf(program, arch, number) == deny
        for number in (0, 1, 2, 57, 59, 60, 200, 247, 251, 300):
            if number not in calls:
                assert run_bpf(program, arch, number) == allow
    if machine == "x86_64":                        # the x32 calls
        assert run_bpf(program, 0xC000003E, 0x40000000 + 250) == deny
    assert seccomp_program("sparc") is None


# Every test of a graded class is slow (sandboxed notebooks): make test runs
# them, make unit does not; the tests above that need no sandbox stay in the
# fast lane.
GRADED = {"run", "swept", "run_of", "each_run"}
for _name, _test in list(globals().items()):
    if _name.startswith("test_") and \
            GRADED & set(inspect.signature(_test).parameters):
        globals()[_name] = pytest.mark.slow(_test)
