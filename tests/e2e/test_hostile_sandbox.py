"""Results only the harvest writes, a sandbox a job cannot widen, one source
per student, names that cannot pass for another, fair second gradings, and
grades in the forms learning platforms import.

One grading run, two notebooks at a time, holds chapter 1 handed in by an
honest student (full marks), the student notebook left as given (0) and one
hostile notebook per route below; each hostile one must get 0 points and a
row that says so. The tests after the run check the pieces that need no
sandbox: the rule for a second grading, the syscall filter, the
``--sandbox none`` switch, the LMS files.
"""

import csv
import io
import json
import os
import time
from pathlib import Path

import nbformat
import pytest

from selfattention_course import assign
from selfattention_course.cli import grade_folder, main
from selfattention_course.grade import Grader
from selfattention_course.sandbox import (CLONE_NEWUSER, EXPOSED, Bubblewrap,
                                          JobGroup, Limits, cgroup_support,
                                          seccomp_program)
from selfattention_course.names import (FOR_REVIEW, NOT_DONE, NOT_GRADED,
                                        REFUSED)
from support import (REVIEW_CODES, class_of_routes, printed, rows_of,
                     run_bpf)

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "01_definition.ipynb"
LABELS = ["ex-definition-tempered", "ex-definition-limits",
          "ex-definition-moved", "ex-definition-noise"]
JOBS = 2
BACKEND = Bubblewrap()
NO_SANDBOX = not BACKEND.works() and not os.environ.get("CI")
MIXED = "\u0430nna"                     # a Cyrillic "а", then Latin "nna"
#: Memory of a whole job in the graded run: an honest chapter 1 needs far
#: less; the hog below asks for more, spread over processes that each stay
#: under the per-process limit.
JOB_MEMORY = 1536 * 2 ** 20

# Helpers the answers below share: the harvest's own frame (its folder,
# its nonce, the cases and its fresh wire module), and a result that says
# every output is right, computed with the library's reference.
FRAMES = '''
import os, sys
import numpy as np
import selfattention.attention as A
def harvest_frame():
    f = sys._getframe(1)
    while f is not None and "nonce" not in f.f_locals:
        f = f.f_back
    return f.f_locals if f is not None else None
def forged_bytes(h):
    import importlib.util
    spec = importlib.util.find_spec("selfattention_course.wire")
    wire = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wire)
    cases = wire.load_cases(open(os.path.join(h["out_dir"],
                            os.listdir(h["out_dir"])[0]), "rb").read())
    outs = [{"output": A.attention(c["Q"] / c["tau"][..., None], c["K"],
                                   c["V"])} for c in cases]
    return wire.dump_result({"outcomes": outs, "called": [],
                             "tampered": False})
'''


def routes() -> dict[str, str]:
    """One added cell per way of forging a result or widening the job."""
    return {
        # Each answer, while its own harvest runs, writes the
        # result itself (at the path the harvest will use, found in the
        # harvest's frame), puts a folder where it goes, or litters the
        # harvest's folder with results under every name it could have.
        "forge-results": FRAMES + '''
def my_tempered_attention(Q, K, V, tau):
    h = harvest_frame()
    path = os.path.join(h["out_dir"], f"result-{h['nonce']}.bin")
    with open(path, "wb") as out:
        out.write(forged_bytes(h))
    os.mkdir(os.path.join(h["out_dir"], f"result-{h['nonce']}.bin.d"))
    for name in ("0.bin", "1.bin", "1.part"):
        with open(os.path.join(h["out_dir"], name), "wb") as out:
            out.write(b"x")
    return A.attention(Q / tau[..., None], K, V)
''',
        # The same without the frame, beside a right answer: results
        # written under every name in every harvest folder in /tmp.
        "forge-files": '''
import os
import numpy as np
def my_tempered_attention(Q, K, V, tau):
    S = Q @ np.swapaxes(K, -1, -2) / (np.sqrt(Q.shape[-1]) * tau[..., None])
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    A = E / E.sum(axis=-1, keepdims=True)
    for folder in os.listdir("/tmp"):
        if folder.startswith("harvest"):
            for name in ("0.bin", "1.bin", "result-.bin", "result.bin"):
                try:
                    with open(f"/tmp/{folder}/{name}", "wb") as out:
                        out.write(b"selfattention-wire 1\\nend\\n")
                except OSError:
                    pass
    return A @ V, A
''',
        # A thread started by a cell rewrites every result file the
        # moment it appears, after its harvest wrote it.
        "late-writer": '''
import os, threading, time
def rewrite():
    done = set()
    while True:
        for folder in os.listdir("/tmp"):
            if not folder.startswith("harvest"):
                continue
            try:
                names = os.listdir(f"/tmp/{folder}")
            except OSError:
                continue
            for name in names:
                path = f"/tmp/{folder}/{name}"
                if name.startswith("result") and path not in done:
                    try:
                        with open(path, "r+b") as out:
                            out.write(b"selfattention-wire 1\\nend\\n")
                        done.add(path)
                    except OSError:
                        pass
        time.sleep(0.0005)
threading.Thread(target=rewrite, daemon=True).start()
''',
        # A user namespace of its own (then a tmpfs no limit caps),
        # then more memory than the job may have, spread over processes
        # that each stay under the per-process limit.
        "escape-limits": '''
import ctypes, os, select, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
print("unshare", libc.unshare(0x10000000), ctypes.get_errno())
done = subprocess.run(["unshare", "-Urm", "sh", "-c",
                       "mount -t tmpfs none /mnt && echo mounted"],
                      capture_output=True, text=True)
print("unshare-tool", done.returncode, "mounted" in done.stdout)
children = {}
for _ in range(5):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                  # 500 MB, written (so held), then said
        os.close(r)
        block = bytearray(500 * 2 ** 20)
        os.write(w, b"5" * 10)        # 50 MB a byte
        time.sleep(60)
        os._exit(0)
    os.close(w)
    children[pid] = [r, 0, True]
end = time.time() + 5
while time.time() < end:
    open_ = [c[0] for c in children.values() if c[2]]
    if not open_:
        break
    ready, _, _ = select.select(open_, [], [], 0.2)
    for c in children.values():
        if c[2] and c[0] in ready:
            data = os.read(c[0], 100)
            c[1] += 50 * len(data)
            c[2] = bool(data)
alive = [c[1] for pid, c in children.items()
         if os.waitpid(pid, os.WNOHANG) == (0, 0)]
print("held MB", sum(alive), "by", len(alive), "of", len(children))
''',
        # Right outputs with a block of 16 MB beside each: more than the
        # grader reads of one exercise's result.
        "too-large": '''
import numpy as np
def my_tempered_attention(Q, K, V, tau):
    S = Q @ np.swapaxes(K, -1, -2) / (np.sqrt(Q.shape[-1]) * tau[..., None])
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    A = E / E.sum(axis=-1, keepdims=True)
    return A @ V, A, np.zeros(2 * 2 ** 20)
def temperatures_for(Q, K, p):
    return np.ones(p.shape)
''',
        # Outputs of 31 MB per case, about 94 MB in all: past the
        # sandbox's limit on the size of one file, which a result written
        # whole would hit partway.
        "far-too-large": '''
import numpy as np
HUGE = np.zeros(3_900_000)
def my_tempered_attention(Q, K, V, tau):
    return HUGE, np.zeros(1)
def temperatures_for(Q, K, p):
    return np.ones(p.shape)
''',
        # A notebook that sleeps into its time limit is not starved
        # by anyone, and is graded once.
        "sleeper": '''
import time
time.sleep(120)
''',
    }


def build_submissions(tmp: Path) -> Path:
    subs, student, hand_in = class_of_routes(tmp, CHAPTER, routes())
    # A loose notebook dropped beside a classmate's folder, so that
    # the lower of the two would count; and a name that displays like a
    # classmate's (which needs no sandbox: its file is not a notebook).
    hand_in("victim", nbformat.read(CHAPTER, as_version=4))
    (subs / "victim.ipynb").write_bytes(student.read_bytes())
    for name in (MIXED, "anna"):
        (subs / name).mkdir()
        (subs / name / "homework.ipynb").write_text("{}")
    return subs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if NO_SANDBOX:
        pytest.skip("bubblewrap cannot run here")
    tmp = tmp_path_factory.mktemp("hostile-sandbox")
    subs = build_submissions(tmp)
    out = tmp / "gradebook"
    # A cell may take 25 s: a chapter cell on a machine busy with other
    # work must not run into the limit that stops the sleeper below.
    limits = Limits(cell_seconds=25, notebook_seconds=240,
                    harvest_seconds=30, job_memory_bytes=JOB_MEMORY)
    gradings: list[str] = []
    start = time.monotonic()
    rows, graded = grade_folder(
        subs, tmp / "assignments" / "grader" / "manifest.json", out,
        jobs=JOBS, backend=BACKEND, limits=limits,
        echo=lambda line: gradings.append(line.split()[0]))
    return {"rows": rows, "graded": {g.student: g for g in graded},
            "book": {(r.student, r.exercise): r for r in rows},
            "out": out, "seconds": time.monotonic() - start,
            "gradings": gradings, "limits": limits,
            "info": json.loads((out / "run.json").read_text())}


def stopped_at_a_limit(graded) -> bool:
    """Whether a time limit (per cell, or the notebook's) stopped its run."""
    return any(p.code in ("cell-timeout", "notebook-deadline")
               for p in graded.problems)


@pytest.mark.slow
def test_the_honest_student_scores_full_marks_and_the_untouched_zero(run):
    # (An exercise whose points are all its written part's has none here.)
    auto = [label for label in LABELS
            if run["book"]["honest", label].max_points > 0]
    assert auto
    for label in auto:
        honest = run["book"]["honest", label]
        assert honest.points == honest.max_points, honest.feedback
        untouched = run["book"]["untouched", label]
        assert untouched.points == 0 and untouched.code == "not-done"


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(routes()))
def test_every_hostile_notebook_scores_zero(run, student):
    rows = rows_of(run, student)
    assert [r.exercise for r in rows if "written" not in r.exercise] == LABELS
    for r in rows:
        assert r.points == 0, (student, r.feedback)


@pytest.mark.slow
def test_a_result_over_the_size_limit_is_too_large_not_forged(run):
    # just past the limit, and far past it (past the size of one file
    # the sandbox lets a job write)
    for student in ("too-large", "far-too-large"):
        row = run["book"][student, LABELS[0]]
        assert row.points == 0 and row.code == "too-large", (
            student, row.code, row.feedback)


@pytest.mark.slow
def test_a_result_the_harvest_did_not_report_is_not_accepted(run):
    # Forged in place, blocked by a folder, littered: no result at all
    # (or "for review", where the source review sees the frames).
    for student, label in [("forge-results", LABELS[0]),
                           ("forge-files", LABELS[0])]:
        row = run["book"][student, label]
        assert row.code in REVIEW_CODES | {"forged-result"}, (row.code,
                                                              row.feedback)
    # Rewritten after the harvest wrote it: whichever of the thread and the
    # runner came first, no verdict of the thread's counts.
    for label in LABELS:
        row = run["book"]["late-writer", label]
        assert row.max_points == 0 or row.status in (
            NOT_GRADED, NOT_DONE, FOR_REVIEW), (row.status, row.feedback)


@pytest.mark.slow
def test_no_user_namespace_and_no_memory_past_the_job_limit(run):
    graded = run["graded"]["escape-limits"]
    path = run["out"] / "executed" / "escape-limits" / "01_definition.ipynb"
    text = printed(run, "escape-limits") if path.exists() else ""
    if cgroup_support()[0] is None:
        pytest.skip("no writable cgroup hierarchy: the job cap is not set")
    assert "unshare -1 1" in text, text                 # EPERM
    assert "unshare-tool" in text and "True" not in text.split(
        "unshare-tool")[1].split("\n")[0], text
    # 2.5 GB asked for, each process under its own limit: the job's cgroup
    # ended or stalled processes so that what is held fits (or ended the
    # kernel).
    if "held MB" in text:
        held = int(text.split("held MB")[1].split()[0])
        assert held * 2 ** 20 < JOB_MEMORY, text
    else:
        assert any(p.code == "kernel-died" for p in graded.problems), \
            graded.problems


@pytest.mark.slow
def test_a_sleeping_notebook_is_graded_once(run):
    assert run["gradings"].count("sleeper") == 1
    assert stopped_at_a_limit(run["graded"]["sleeper"])
    assert run["info"]["regrade_budget"] >= 1
    # Nothing in this class keeps both processors busy: nobody starved.
    assert run["info"]["graded_again_alone"] == 0


@pytest.mark.slow
def test_a_loose_notebook_beside_a_folder_is_refused_clearly(run):
    rows = rows_of(run, "victim")
    (refused,) = [r for r in rows if not r.chapter]
    assert (refused.status, refused.code) == (REFUSED, "two-sources")
    # Kept on purpose: the row names both of the student's own sources,
    # which the instructor has to move or remove.
    assert "victim.ipynb" in refused.feedback and "victim/" in \
        refused.feedback
    assert "victim" not in run["graded"] or \
        run["graded"]["victim"].chapter is None


@pytest.mark.slow
def test_a_mixed_script_name_is_flagged_in_its_rows(run):
    mixed, plain = rows_of(run, MIXED), rows_of(run, "anna")
    assert mixed and plain
    # (Which scripts it names: test_mixed_scripts_are_found.)
    assert all(r.flags == ("mixed-scripts",) for r in mixed)
    assert not any(r.flags for r in plain)
    assert MIXED != "anna"


@pytest.mark.slow
def test_the_lms_files_have_one_column_per_assignment(run):
    canvas = list(csv.reader(io.StringIO(
        (run["out"] / "canvas.csv").read_text())))
    head = canvas[0]
    assert head[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID",
                        "Section"]
    assert len(head) == 6 and "01_definition" in head[5]
    assert canvas[1][0] == "Points Possible"
    honest = next(line for line in canvas if line[0] == "honest")
    untouched = next(line for line in canvas if line[0] == "untouched")
    possible = float(canvas[1][5])
    # The chapter's whole maximum, and the honest student's total (its
    # written parts count 0 until a scoresheet is merged).
    mine = rows_of(run, "honest")
    assert possible == sum(r.max_points for r in mine)
    assert float(honest[5]) == sum(r.points for r in mine) > 0
    assert honest[3] == "honest" and float(untouched[5]) == 0
    moodle = list(csv.reader(io.StringIO(
        (run["out"] / "moodle.csv").read_text())))
    assert moodle[0][0] == "Username" and moodle[0][1:] == head[5:]
    by_name = {line[0]: line[1:] for line in moodle[1:]}
    assert by_name["honest"] == [honest[5]]
    students = {r.student for r in run["rows"]}
    assert set(by_name) == students == {line[0] for line in canvas[2:]}


@pytest.mark.slow
def test_the_run_records_how_jobs_are_capped(run):
    note = run["info"]["cgroups"]
    assert note.startswith(("cgroup v1", "cgroup v2", "none:"))


# ------------------------------------------------------------ the pieces
# No sandbox needed: the rule of second gradings, the filter, the switches.

class _Timed:
    """A backend whose runs take the times and processor seconds given:
    (student, run) -> (report, seconds, cpu); runs start together."""

    name = "scripted"

    def __init__(self, plan):
        self.plan, self.runs, self.t0 = plan, {}, None

    def run(self, job, slot, limits, given=b""):
        from selfattention_course import wire
        from selfattention_course.sandbox import Outcome

        student = json.loads((job / "job.json").read_text())["student"]
        count = self.runs[student] = self.runs.get(student, 0) + 1
        report, seconds, cpu = self.plan[student][min(count, 2) - 1]
        nb = nbformat.read(job / "notebook.ipynb", as_version=4)
        start = 100.0 * count                # first runs overlap, wholly
        return Outcome(wire.pack([("report", json.dumps(report).encode()),
                                  ("executed", nbformat.writes(nb).encode())
                                  ]), cpu_seconds=cpu, started=start,
                       ended=start + seconds)

    def describe(self):
        return self.name


_WRITE_JOB = Grader._write_job


def _tagged_write_job(self, job, nb, student, chapter):
    cases, given = _WRITE_JOB(self, job, nb, student, chapter)
    spec = json.loads((job / "job.json").read_text())
    spec["student"] = student
    (job / "job.json").write_text(json.dumps(spec))
    return cases, given


def _grade(tmp_path, monkeypatch, plan, jobs=2, budget=None, cores=2):
    from selfattention_course.intake import Submission

    assign.build([CHAPTER], tmp_path / "a")
    monkeypatch.setattr(Grader, "_write_job", _tagged_write_job)
    backend = _Timed(plan)
    grader = Grader(tmp_path / "a" / "grader" / "manifest.json", backend,
                    Limits(), jobs=jobs, echo=lambda *a: None,
                    regrade_budget=budget)
    grader.cores = cores
    data = CHAPTER.read_bytes()
    graded = grader.grade_all([Submission(s, "nb.ipynb", data)
                               for s in plan])
    again = {s for s, n in backend.runs.items() if n == 2}
    return grader, {g.student: g for g in graded}, again


def _stopped(share):
    return {"stopped": {"cell": 3, "why": "timeout", "share": share}}


FINE = ({"stopped": None}, 4.0, 3.0)


@pytest.mark.slow                 # grades mocked runs of a whole chapter
def test_only_a_notebook_a_neighbour_starved_is_graded_again(
        tmp_path, monkeypatch):
    # Beside a hog that kept both processors busy (38 s of processor in
    # 20 s), a notebook stopped at a limit with little processor is graded
    # again; beside quiet neighbours, a sleeping one is not, nor one that
    # spun through its own limit.
    plan = {"hog": [({"stopped": None}, 20.0, 38.0), FINE],
            "starved": [(_stopped(0.05), 20.0, 1.0), FINE]}
    _, graded, again = _grade(tmp_path / "1", monkeypatch, plan)
    assert again == {"starved"}, {s: (g.problems, g.cut_short, g.started,
                                      g.ended, g.cpu)
                                  for s, g in graded.items()}
    assert not stopped_at_a_limit(graded["starved"])
    plan = {"quiet": [({"stopped": None}, 20.0, 6.0), FINE],
            "sleeper": [(_stopped(0.0), 20.0, 0.1), FINE],
            "died": [({"stopped": {"cell": 3, "why": "dead kernel"}},
                      20.0, 5.0), FINE]}
    grader, graded, again = _grade(tmp_path / "2", monkeypatch, plan)
    assert again == set() and grader.regraded == 0
    assert stopped_at_a_limit(graded["sleeper"])
    plan = {"hog": [({"stopped": None}, 20.0, 38.0), FINE],
            "spinner": [(_stopped(0.97), 20.0, 19.0), FINE]}
    _, _, again = _grade(tmp_path / "3", monkeypatch, plan)
    assert again == set()


@pytest.mark.slow                 # grades mocked runs of a whole chapter
def test_second_gradings_stay_within_their_budget(tmp_path, monkeypatch):
    plan = {"hog": [({"stopped": None}, 20.0, 38.0), FINE]}
    for i in range(3):
        plan[f"starved{i}"] = [(_stopped(0.05), 20.0, 1.0), FINE]
    grader, graded, again = _grade(tmp_path, monkeypatch, plan, budget=1,
                                   cores=2)
    assert len(again) == 1 and grader.regraded == 1
    assert grader.not_regraded == 2
    left = [g for s, g in graded.items() if s.startswith("starved")
            and s not in again]
    assert all(any(p.code == "regrade-budget-spent" for p in g.problems)
               for g in left)
    _, _, again = _grade(tmp_path / "one", monkeypatch, plan, jobs=1)
    assert again == set()


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_new_user_namespaces(machine):
    from selfattention_course.sandbox.seccomp import _KEY_CALLS, _USERNS_CALLS

    program = seccomp_program(machine)
    allow, deny, nosys = 0x7FFF0000, 0x00050001, 0x00050026
    for (arch, _), calls in zip(_KEY_CALLS[machine], _USERNS_CALLS[machine]):
        for call in ("clone", "unshare"):
            number = calls[call]
            assert run_bpf(program, arch, number, CLONE_NEWUSER) == deny
            assert run_bpf(program, arch, number,
                            CLONE_NEWUSER | 0x00020000 | 0x11) == deny
            # A thread, a fork, a new mount namespace: allowed (the last
            # fails anyway without a capability).
            for flags in (0x003D0F00, 0x11, 0x00020000):
                assert run_bpf(program, arch, number, flags) == allow
        assert run_bpf(program, arch, calls["clone3"]) == nosys
        assert run_bpf(program, arch, calls["setns"]) == deny
        assert run_bpf(program, arch, 0) == allow


@pytest.mark.slow
def test_inside_the_sandbox_no_user_namespace_can_be_made(tmp_path):
    """The filter, applied by bubblewrap, on a real process."""
    import subprocess

    if NO_SANDBOX:
        pytest.skip("bubblewrap cannot run here")
    program = seccomp_program()
    if program is None:
        pytest.skip("no filter for this machine")
    read, write = os.pipe()
    os.write(write, program)
    os.close(write)
    cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
           "/proc", "--unshare-pid", "--seccomp", str(read), "--",
           "unshare", "-Ur", "true"]
    done = subprocess.run(cmd, pass_fds=(read,), capture_output=True,
                          text=True, timeout=60)
    os.close(read)
    assert done.returncode != 0
    assert "Operation not permitted" in done.stderr, done.stderr


def test_a_job_group_caps_memory_and_processes(tmp_path):
    """A job's cgroup (v1 or v2) holds its limits and all of its processes,
    and removing it ends them."""
    import subprocess

    if cgroup_support()[0] is None:
        pytest.skip(f"no writable cgroup hierarchy: {cgroup_support()[1]}")
    limits = Limits(job_memory_bytes=256 * 2 ** 20, processes=20)
    group = JobGroup.make(f"selfattention-test-{os.getpid()}", limits)
    assert group is not None
    try:
        memory = (group.folders.get("") or group.folders["memory"])
        name = "memory.max" if group.version == "v2" else \
            "memory.limit_in_bytes"
        assert int((memory / name).read_text()) == 256 * 2 ** 20
        script = ("import os, time\n"
                  "n = 0\n"
                  "try:\n"
                  "    for _ in range(40):\n"
                  "        if os.fork() == 0:\n"
                  "            os.close(1); os.close(2)\n"
                  "            time.sleep(30); os._exit(0)\n"
                  "        n += 1\n"
                  "except OSError:\n"
                  "    pass\n"
                  "print(n, flush=True)\n"
                  "block = bytearray(400 * 2 ** 20)\n"
                  "for i in range(0, len(block), 4096): block[i] = 1\n"
                  "print('held', flush=True)\n")
        done = subprocess.run(group.enter(["python3", "-c", script]),
                              capture_output=True, text=True, timeout=60)
        lines = done.stdout.split()
        assert lines and int(lines[0]) < 20, done.stdout + done.stderr
        assert "held" not in lines                 # killed past the cap
        assert done.returncode != 0
    finally:
        group.remove()
    assert all(not f.exists() for f in group.folders.values())


def test_no_sandbox_needs_a_second_flag_naming_what_it_exposes(
        tmp_path, capsys):
    assign.build([CHAPTER], tmp_path / "a")
    manifest = str(tmp_path / "a" / "grader" / "manifest.json")
    subs = tmp_path / "subs"
    subs.mkdir()
    base = [str(subs), "--manifest", manifest, "--out",
            str(tmp_path / "book"), "--sandbox", "none"]
    assert main(base) == 2
    message = capsys.readouterr().err
    for word in EXPOSED:
        assert word in message
    assert main(base + ["--exposing", "network"]) == 2
    assert not (tmp_path / "book").exists()
    # Named in full, the run goes ahead (and finds nothing to grade).
    assert main(base + ["--exposing", ",".join(EXPOSED)]) == 1
    assert "no notebook" in capsys.readouterr().err


def test_lms_files_total_each_assignment_written_parts_included():
    from selfattention_course.gradebook import Row, canvas_csv, moodle_csv

    rows = [Row("ann", "01_definition", "ex-a", 2, 2, "Correct: x"),
            Row("ann", "01_definition", "ex-b (written)", 0, 3, "read"),
            Row("ann", "02_scaling", "ex-c", 0, 4, "Not yet: x"),
            Row("=bob", "01_definition", "ex-a", 0, 2, "Not yet: y"),
            Row("=bob", "02_scaling", "ex-c", 4, 4, "Correct: y"),
            Row("=bob", "", "", 0, 0, "Refused: z")]
    titles = {"01_definition": "Definition, in full", "02_scaling": "Scale"}
    canvas = list(csv.reader(io.StringIO(
        canvas_csv(rows, ["=bob", "ann"], titles))))
    assert canvas[0][5:] == ["Definition, in full (01_definition)",
                             "Scale (02_scaling)"]
    assert canvas[1][5:] == ["5", "4"]        # the written part's 3 too
    assert canvas[2] == ["'=bob", "", "", "'=bob", "", "0", "4"]
    assert canvas[3][5:] == ["2", "0"]
    moodle = list(csv.reader(io.StringIO(
        moodle_csv(rows, ["=bob", "ann"], titles))))
    assert moodle == [["Username"] + canvas[0][5:], ["'=bob", "0", "4"],
                      ["ann", "2", "0"]]


def test_one_source_per_student(tmp_path):
    from selfattention_course.intake import collect

    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "a.ipynb").write_text("{}")
    (tmp_path / "victim.ipynb").write_text("{}")
    (tmp_path / "solo.ipynb").write_text("{}")
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "a.ipynb").write_text("{}")
    found = collect(tmp_path)
    (victim,) = [s for s in found if s.student == "victim"]
    assert victim.data is None and victim.problem.code == "two-sources"
    # Kept on purpose: the problem names both of the student's own sources.
    assert "victim.ipynb" in victim.problem and "victim/" in victim.problem
    assert {s.student for s in found if s.data is not None} == {"solo",
                                                                "ann"}


@pytest.mark.parametrize("name, scripts", [
    ("\u0430nna", ["CYRILLIC", "LATIN"]), ("p\u0430ul", ["CYRILLIC", "LATIN"]),
    ("\u03bflga", ["GREEK", "LATIN"]), ("anna", []), ("Zoë-2", []),
    ("\u0410\u043d\u043d\u0430", []), ("\u5c71\u7530\u306f\u306a", []),
])
def test_mixed_scripts_are_found(name, scripts):
    from selfattention_course.intake import mixed_scripts

    assert mixed_scripts(name) == scripts


def test_a_v2_job_group_is_made_where_v2_allows(tmp_path, monkeypatch):
    """The files a cgroup v2 job group is made of, on a stand-in tree: the
    grader's own group holds processes and enables nothing, so jobs go
    below the nearest ancestor that enables memory and pids."""
    from selfattention_course.sandbox import cgroups

    root = tmp_path / "cgroup"
    own = root / "user.slice" / "session.scope"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (root / "user.slice" / "cgroup.subtree_control").write_text("cpu\n")
    (own / "cgroup.subtree_control").write_text("\n")
    monkeypatch.setattr(cgroups, "_mounts", lambda: {"": str(root)})
    monkeypatch.setattr(cgroups, "_own_groups",
                        lambda: {"": "/user.slice/session.scope"})
    monkeypatch.setattr(cgroups.sys, "platform", "linux")
    assert cgroups._v2_parent() == (root, "")
    group = JobGroup.make("job-1", Limits(job_memory_bytes=2 ** 30,
                                          processes=64))
    folder = root / "selfattention-grade" / "job-1"
    assert group.version == "v2" and group.folders == {"": folder}
    assert (folder / "memory.max").read_text() == str(2 ** 30)
    assert (folder / "pids.max").read_text() == "64"
    assert "+memory +pids" in (folder.parent /
                               "cgroup.subtree_control").read_text()
    cmd = group.enter(["true"])
    assert cmd[:2] == ["/bin/sh", "-c"] and \
        str(folder / "cgroup.procs") in cmd and cmd[-2:] == ["--", "true"]
    (folder / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 1\n")
    assert group.cpu_seconds() == 2.5
    (root / "user.slice" / "cgroup.subtree_control").write_text(
        "memory pids\n")
    assert cgroups._v2_parent() == (root / "user.slice", "")


def test_without_writable_cgroups_the_grader_says_so(monkeypatch, tmp_path):
    from selfattention_course import cli
    from selfattention_course.sandbox import cgroups

    monkeypatch.setattr(cgroups, "_mounts", lambda: {})
    version, why = cgroups.cgroup_support()
    assert version is None and "v2" in why and "v1" in why
    assert JobGroup.make("x", Limits()) is None
    monkeypatch.setattr(cli, "cgroup_support", cgroups.cgroup_support)
    note = cli._cgroup_note(Bubblewrap())
    assert note.startswith("none:") and "not capped" in note
