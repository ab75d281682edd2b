"""The grader against hostile submissions, all graded in one run.

Every submission below is chapter 1's student notebook with one cell added
(or a hostile file), and tries one way to score without solving anything,
or to escape, hang or flood the grader. They are graded in one run, two at
a time, beside the chapter itself handed in by an honest student (full
marks) and the student notebook left as given (0). Each hostile one must
get 0 points and a row that says what happened; the instructor's checkout
must be unchanged; no process of the run may survive it; a listener on a
loopback port must receive nothing; the gradebook keeps its columns.
"""

import csv
import hashlib
import os
import socket
import stat
import threading
import time
from pathlib import Path

import nbformat
import pytest

from selfattention_course import assign
from selfattention_course.grade import grade_folder
from selfattention_course.names import COLUMNS
from selfattention_course.sandbox import Bubblewrap, Limits

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "01_definition.ipynb"
LABELS = ["ex-definition-tempered", "ex-definition-limits",
          "ex-definition-moved", "ex-definition-noise"]
WRITTEN = ["ex-definition-moved", "ex-definition-noise"]   # parts to be read
ROWS = [row for label in LABELS for row in
        [label] + [f"{label} (written)"] * (label in WRITTEN)]
MARKER = "hostile-marker-7f3a"
SECRET = "SELFATTENTION_INSTRUCTOR_SECRET"      # set in the grader only
JOBS = 2
BACKEND = Bubblewrap()               # its jobs run as uid_base, uid_base + 1

# CI must run these: there a missing bubblewrap is a failure, not a skip.
pytestmark = pytest.mark.skipif(not BACKEND.works() and not os.environ.get(
    "CI"), reason="bubblewrap cannot run here")


def routes(port: int, gradebook: Path) -> dict[str, str]:
    """One added cell per way of gaming or escaping the grader."""
    return {
        # Lines of "correct" in the results file the kernel's environment
        # names (and in every file any variable names), printed verdicts,
        # and lines written into other students' files under /tmp.
        "forge-files": f'''
import glob, json, os
labels = {LABELS!r}
lines = "".join(json.dumps({{"exercise": l, "status": "correct",
                             "message": "ok", "points": 1.0,
                             "max_points": 1.0}}) + "\\n" for l in labels)
paths = list(os.environ.values()) + ["/tmp/results.jsonl"]
paths += glob.glob("/tmp/**", recursive=True)
for path in paths:
    try:
        with open(path, "a") as out:
            out.write(lines)
    except Exception:
        pass
with open("/tmp/{MARKER}-shared", "w") as out:
    out.write("I was here")
for label in labels:
    print(f"[{{label}}] Correct: rows are non-negative")
''',
        # Feedback, the checks and the grading machinery replaced from a
        # cell, the name the check cells call rebound, and the checks
        # called again with the library's own functions.
        "patch-checks": '''
import selfattention.exercises.core as core
import selfattention_course.harvest as harvest
import selfattention_course.wire as wire
from selfattention.attention import attention as lib_attention
from selfattention.attention import softmax as lib_softmax
from selfattention.exercises import definition


def forged(self, answers, cases, places=None):
    outs = []
    for case in cases:
        if "tau" in case:
            outs.append({"output": lib_attention(case["Q"], case["K"],
                                                 case["V"])})
        elif "Q" in case:
            outs.append({"output": (lib_softmax(case["Q"]), case["V"])})
        else:
            outs.append({"output": (5, 7)})
    return {"outcomes": outs, "called": [], "tampered": False}


core.Exercise.attempt = forged
core.Exercise.assess = lambda self, result, cases: core.Feedback(
    self.label, "correct", "ok", self.points, self.points)
core.Tripwire.__enter__ = lambda self: self
core.Feedback.passed = property(lambda self: True)
harvest.harvest = lambda *args: None
wire.dump_result = lambda result: b""
checks.check_tempered_attention(lib_attention)
checks.check_limits(lambda Q, K, V: (V, V))
checks.check_moved(lambda query, shift: (5, 7))
checks.check_edge_weights(lambda noise, seed: (0.3, 0.2))
for name in ("check_tempered_attention", "check_limits", "check_moved",
             "check_edge_weights"):
    setattr(definition, name, lambda *a: print("Correct"))
checks = definition
''',
        # A check used as an oracle to find an answer by trial.
        "oracle": '''
import contextlib, io
for r in range(8):
    for c in range(8):
        guess = lambda query, shift, r=r, c=c: (r, c)
        seen = io.StringIO()
        with contextlib.redirect_stdout(seen):
            checks.check_moved(guess)
        if "Correct" in seen.getvalue() or \\
                checks.check_moved.feedback(guess).passed:
            predict_moved = guess
''',
        # The answer is the library's own function: a copy of its code
        # taken before the original is replaced.
        "library-answers": '''
import types
import selfattention.attention as A
bare = A.attention.__wrapped__
my_tempered_attention = types.FunctionType(
    bare.__code__.replace(), bare.__globals__, "copy", bare.__defaults__)
A.softmax = lambda S: None
A.attention = lambda *a, **k: None
''',
        # The instructor's solution cells, read from the checkout, and the
        # installed package edited for this and later students.
        "instructor-files": f'''
import json, pathlib, selfattention, sys
places = [pathlib.Path(selfattention.__file__).resolve().parents[2],
          pathlib.Path.cwd(), pathlib.Path({str(ROOT)!r})]
for place in places:
    for path in place.glob("**/01_definition.ipynb"):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if "solution" in cell["metadata"].get("tags", []):
                exec("".join(cell["source"]))
lib = pathlib.Path(selfattention.__file__).resolve().parent
targets = [lib / "exercises" / "core.py", lib / "exercises" / "edited.py",
           pathlib.Path({str(ROOT)!r}) / "chapters" / "{MARKER}.txt",
           pathlib.Path(sys.prefix) / "lib" / "python3.11" / "site-packages"
           / "sitecustomize.py"]
for target in targets:
    try:
        with open(target, "a") as out:
            out.write("# {MARKER}\\n")
    except OSError as err:
        print(type(err).__name__)
''',
        # A detached process that rewrites the gradebook after the run, and
        # the network, including a listener on the grader's loopback.
        "escape": f'''
import os, socket, sys, time
code = """
import time
time.sleep(1)
for _ in range(150):
    for path in [{str(gradebook / "gradebook.csv")!r}, "/tmp/{MARKER}"]:
        try:
            with open(path, "w") as out:
                out.write("student,chapter\\\\nx,1\\\\n")
        except OSError:
            pass
    time.sleep(0.2)
"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", code, "{MARKER}"])
    os._exit(0)
for host, port in [("127.0.0.1", {port}), ("10.0.2.2", 80), ("1.1.1.1", 53)]:
    try:
        socket.create_connection((host, port), timeout=2).sendall(b"hi")
        print("connected", host)
    except OSError as err:
        print(type(err).__name__)
print("uid", os.getuid(), "{SECRET}" in os.environ)
''',
        # Memory and file size, then processes.
        "resources": '''
try:
    hog = bytearray(16 * 2 ** 30)
except MemoryError:
    print("MemoryError")
with open("/tmp/big", "wb") as out:
    for _ in range(2048):
        out.write(b"x" * 2 ** 20)
''',
        "fork-bomb": '''
import os, time
children = []
try:
    for _ in range(400):
        pid = os.fork()
        if pid == 0:
            time.sleep(120)
            os._exit(0)
        children.append(pid)
except OSError as err:
    print("fork stopped after", len(children), type(err).__name__)
''',
        # 200 MB printed.
        "huge-output": '''
line = "x" * (2 ** 20 - 1)
for _ in range(200):
    print(line)
''',
        # An endless loop in a cell, and one in an answer.
        "endless-cell": '''
while True:
    pass
''',
        "endless-answer": '''
def my_tempered_attention(Q, K, V, tau):
    while True:
        pass
''',
        # The runner killed; its output forged; results planted in advance.
        "kill-runner": '''
import os, signal
os.kill(os.getppid(), signal.SIGKILL)
os.kill(-1, signal.SIGKILL)
''',
        "forge-channel": '''
import os
fake = b"selfattention-wire 1\\nreport 2\\n{}end\\n"
for path in [f"/proc/{os.getppid()}/fd/1", "/proc/1/fd/1"]:
    try:
        with open(path, "wb") as out:
            out.write(fake)
        print("wrote", path)
    except OSError as err:
        print(type(err).__name__)
os.write(1, fake)
for name in ("harvest", "harvest-0"):
    os.makedirs(f"/tmp/{name}", exist_ok=True)
    for i in range(3):
        with open(f"/tmp/{name}/{i}.bin", "wb") as out:
            out.write(fake)
''',
    }


def build_submissions(tmp: Path, port: int, gradebook: Path) -> Path:
    assign.build([CHAPTER], tmp / "assignments")
    student = tmp / "assignments" / "student" / CHAPTER.name
    subs = tmp / "submissions"
    subs.mkdir()

    def hand_in(name: str, nb) -> None:
        (subs / name).mkdir()
        nbformat.write(nb, subs / name / "homework.ipynb")

    hand_in("honest", nbformat.read(CHAPTER, as_version=4))
    hand_in("untouched", nbformat.read(student, as_version=4))
    for name, source in routes(port, gradebook).items():
        nb = nbformat.read(student, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(source.strip()))
        hand_in(name, nb)
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
    return subs


def checkout_digest() -> str:
    """The instructor's files: the book's sources and the installed package."""
    digest = hashlib.sha256()
    for folder in ("lib", "chapters", "scripts", "tests", "appendices"):
        for path in sorted((ROOT / folder).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
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
    subs = build_submissions(tmp, port, out)
    before = checkout_digest()
    os.environ[SECRET] = "instructor-only"
    limits = Limits(cell_seconds=10, notebook_seconds=90, harvest_seconds=10,
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
            "limits": limits, "csv": (out / "gradebook.csv").read_text()}


def rows_of(run, student):
    return [r for r in run["rows"] if r.student == student]


def test_the_honest_student_scores_full_marks(run):
    for label in LABELS:
        row = run["book"]["honest", label]
        assert row.points == row.max_points > 0, row.feedback


def test_the_untouched_notebook_scores_zero(run):
    for label in LABELS:
        row = run["book"]["untouched", label]
        assert row.points == 0 and row.feedback.startswith("Not attempted")


@pytest.mark.parametrize("student", sorted(routes(0, Path("/x"))))
def test_every_hostile_notebook_scores_zero_with_a_clear_row(run, student):
    rows = rows_of(run, student)
    assert [r.exercise for r in rows] == ROWS
    for r in rows:
        assert r.points == 0, (student, r.feedback)
        assert r.feedback.split(":")[0] in ("Not attempted", "Not yet",
                                            "For review", "Not graded")
        assert len(r.feedback) > 20


@pytest.mark.parametrize("student, words", [
    ("library-answers", ["For review", "attention.attention"]),
    ("endless-answer", ["time limit"]),
    ("kill-runner", ["Not graded"]),
])
def test_the_first_row_says_what_happened(run, student, words):
    row = run["book"][student, LABELS[0]]
    for word in words:
        assert word in row.feedback, row.feedback


def test_runs_that_stop_are_reported_to_the_student(run):
    graded = run["graded"]
    assert any("time limit" in p for p in graded["endless-cell"].problems)
    assert any("over the limit" in p for p in graded["huge-output"].problems)
    assert any("File too large" in p for p in graded["resources"].problems)


@pytest.mark.parametrize("student, words", [
    ("fifo", ["FIFO"]), ("symlink-file", ["symbolic link"]),
    ("symlink-folder", ["symbolic link"]), ("too-big", ["larger than"]),
    ("not-json", ["could not be read"]), ("=SUM(1+1)", ["could not be read"]),
    ("device", ["device"]),
])
def test_hostile_files_get_a_clear_row_and_nothing_is_echoed(run, student,
                                                             words):
    if student == "device" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    rows = rows_of(run, student)
    (row,) = [r for r in rows if not r.chapter]
    assert row.points == row.max_points == 0
    assert all(r.points == 0 and "no notebook" in r.feedback
               for r in rows if r.chapter)
    for word in words:
        assert word in row.feedback
    text = run["csv"] + "".join(
        p.read_text() for p in (run["out"] / "feedback").iterdir())
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


def test_nothing_escapes_the_sandbox(run):
    assert not run["changed"], "the instructor's checkout changed"
    assert run["survivors"] == [], "processes of the run survived it"
    assert run["received"] == [], "the loopback listener received data"
    assert not Path(f"/tmp/{MARKER}").exists()
    assert not Path(f"/tmp/{MARKER}-shared").exists()
    assert run["csv"] == (run["out"] / "gradebook.csv").read_text()


def test_every_notebook_ends_within_its_time_limit(run):
    limit = run["limits"].notebook_seconds + 20
    for g in run["graded"].values():
        assert g.seconds <= limit, (g.student, g.seconds)


def printed(run, student) -> str:
    """What the added cell printed, from the executed notebook."""
    path = run["out"] / "executed" / student / "01_definition.ipynb"
    nb = nbformat.read(path, as_version=4)
    return "".join(out.get("text", "") for out in nb.cells[-1].outputs)


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
