"""The grader's parts that need no kernel: intake, wire, gradebook, sandbox.

tests/e2e/test_hostile_grading.py grades a hostile class end to end; these
tests pin each defence on its own, quickly.
"""

import csv
import io
import json
import os
from pathlib import Path

import nbformat
import numpy as np
import pytest

from selfattention_exercises.core import Opaque
from selfattention_course import assign, gradebook, wire
from selfattention_course.cli import NothingGraded, grade_folder, main
from selfattention_course.intake import IntakeError, collect, safe_file_name
from selfattention_course.names import COLUMNS
from selfattention_course.notebook import identify, load_manifest
from selfattention_course.sandbox import (Bubblewrap, Container, Limits,
                                          NoSandbox, Unisolated,
                                          choose_backend)

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "01_definition.ipynb"
SECRET = "secret-content-4b1d"


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("assignments")
    assign.build([CHAPTER], out)
    return out / "grader" / "manifest.json"


# ------------------------------------------------------------------ intake
def test_intake_reads_regular_notebooks_only(tmp_path):
    (tmp_path / "ann" / "sub").mkdir(parents=True)
    (tmp_path / "ann" / "sub" / "a.ipynb").write_text("{}")
    (tmp_path / "ann" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "ann" / ".ipynb_checkpoints" / "x.ipynb").write_text("{}")
    (tmp_path / "ann" / "notes.txt").write_text("ignored")
    os.mkfifo(tmp_path / "ann" / "pipe.ipynb")
    (tmp_path / "ann" / "link.ipynb").symlink_to("/etc/passwd")
    (tmp_path / "ann" / "folder-link").symlink_to(tmp_path / "ann" / "sub")
    (tmp_path / "bob.ipynb").write_text("{}")                 # flat layout
    (tmp_path / "cid").symlink_to(tmp_path / "ann")
    big = tmp_path / "dee"
    big.mkdir()
    with open(big / "big.ipynb", "wb") as out:
        out.truncate(3000)
    found = {(s.student, s.name): s for s in collect(tmp_path, 2000)}
    assert found["ann", "sub/a.ipynb"].data == b"{}"
    assert found["bob", "bob.ipynb"].data == b"{}"
    problems = {key: s.problem.code for key, s in found.items()
                if s.problem}
    assert problems == {("ann", "pipe.ipynb"): "not-a-file",
                        ("ann", "link.ipynb"): "symlink",
                        ("ann", "folder-link"): "symlink",
                        ("cid", "cid"): "symlink",
                        ("dee", "big.ipynb"): "too-large"}
    assert all(s.data is None for s in found.values() if s.problem)
    assert len(found) == 7


def test_intake_refuses_a_linked_or_missing_folder(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for bad in (tmp_path / "link", tmp_path / "none", CHAPTER):
        with pytest.raises(IntakeError):
            collect(bad)


def test_a_fifo_does_not_block_the_grader(tmp_path):
    (tmp_path / "ann").mkdir()
    os.mkfifo(tmp_path / "ann" / "x.ipynb")
    (sub,) = collect(tmp_path)                   # returns at once
    assert sub.data is None and sub.problem.code == "not-a-file"


def test_what_intake_leaves_unread_has_a_row_with_its_code(tmp_path,
                                                          monkeypatch):
    from selfattention_course import intake

    monkeypatch.setattr(intake, "MAX_PER_STUDENT", 3)
    monkeypatch.setattr(intake, "MAX_STUDENT_BYTES", 2500)
    (tmp_path / "many").mkdir()
    for i in range(5):
        (tmp_path / "many" / f"{i}.ipynb").write_text("{}")
    (tmp_path / "heavy").mkdir()
    for name in ("a.ipynb", "b.ipynb"):
        (tmp_path / "heavy" / name).write_bytes(b" " * 1500)
    (tmp_path / "twice").mkdir()
    (tmp_path / "twice" / "a.ipynb").write_text("{}")
    (tmp_path / "twice.ipynb").write_text("{}")
    found = collect(tmp_path)
    codes = sorted((s.student, s.name, s.problem.code) for s in found
                   if s.problem)
    assert codes == [("heavy", "b.ipynb", "too-large-in-all"),
                     ("many", "", "too-many-entries"),
                     ("twice", "", "two-sources")]
    assert sum(s.student == "many" and s.data is not None
               for s in found) == 3


def graded_with_a_chapter(student):
    """A notebook of chapter 1 graded for ``student``, one row."""
    from selfattention_course.grade import Graded

    return Graded(student, "x.ipynb", chapter="01_definition",
                  rows=[gradebook.Row(student, "01_definition", "ex", 1.0,
                                      1.0, "Correct: ok", code="correct")])


def test_notebooks_the_grader_cannot_place_get_a_code(manifest, tmp_path):
    from selfattention_course.cli import assemble
    from selfattention_course.grade import Grader
    from selfattention_course.notebook import MAX_CELLS
    from selfattention_course.intake import Submission
    from selfattention_course.names import Problem

    grader = Grader(manifest, Unisolated(), Limits(), echo=lambda *a: None)
    notes = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# My notes")])
    crowded = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("1") for _ in range(MAX_CELLS + 1)])
    subs = [Submission("ann", "a.ipynb", b"{not json"),
            Submission("ann", "b.ipynb", nbformat.writes(notes).encode()),
            Submission("ann", "c.ipynb", nbformat.writes(crowded).encode()),
            Submission("ann", "d.ipynb", problem=Problem("a FIFO",
                                                         "not-a-file"))]
    graded = [grader.grade_one(sub, 0, tmp_path) for sub in subs]
    assert [[p.code for p in g.problems] for g in graded] == [
        ["not-a-notebook"], ["unknown-chapter"], ["too-many-cells"],
        ["not-a-file"]]
    assert [g.refused for g in graded] == [False, False, True, True]
    # A student whose name mixes scripts, with no notebook of a chapter
    # that another student handed in.
    other = graded_with_a_chapter("\u0430nn")
    rows, *_ = assemble(graded + [other], grader.chapters)
    placed = [(r.status, r.code) for r in rows if r.student == "ann"]
    assert placed == [("not graded", "no-notebook")] * len(
        grader.chapters["01_definition"]["exercises"]) + [
        ("not graded", "not-a-notebook"), ("not graded", "unknown-chapter"),
        ("refused", "too-many-cells"), ("refused", "not-a-file")]
    assert not any(r.flags for r in rows if r.student == "ann")
    assert all(r.flags == ("mixed-scripts",) for r in rows
               if r.student == "\u0430nn")


def test_file_names_for_the_gradebook_are_safe():
    for name in ("ann", "=cmd|'/C calc'!A0", "../../etc", "a/b", "é"):
        safe = safe_file_name(name)
        assert "/" not in safe and not safe.startswith(".")
    assert safe_file_name("ann") == "ann"
    assert safe_file_name("a b") != safe_file_name("a_b")


# ------------------------------------------------------------------ matching
def test_notebooks_are_matched_by_metadata_labels_or_check_calls(manifest):
    chapters, _ = load_manifest(manifest)
    chapter = nbformat.read(CHAPTER, as_version=4)
    assert identify(chapter, chapters) == ("01_definition", "exercise labels")
    # The student version without its notebook metadata (cells copied into
    # a new notebook): its exercise headings' cell metadata names them.
    student = nbformat.read(manifest.parents[1] / "student" / CHAPTER.name,
                            as_version=4)
    student.metadata = {}
    assert identify(student, chapters) == ("01_definition", "exercise labels")
    for cell in student.cells:
        cell.metadata.pop("selfattention", None)
    assert identify(student, chapters)[1] == "check calls"
    tagged = nbformat.v4.new_notebook(
        metadata={"selfattention": {"chapter": "ch-definition"}})
    assert identify(tagged, chapters)[1] == "notebook metadata"
    only_code = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("checks.check_tempered_attention(f)")])
    assert identify(only_code, chapters) == ("01_definition", "check calls")
    other = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# My own notes"),
        nbformat.v4.new_code_cell("print(1)")])
    assert identify(other, chapters) == (None, "")


# ------------------------------------------------------------------ wire
def test_plain_data_makes_the_round_trip():
    value = ((1, 2.5, float("nan"), -np.inf), [np.arange(6).reshape(2, 3),
             np.array(["a"]), True, None, "s"], Opaque("dict"))
    back = wire.load(wire.dump(value))
    assert back[0][:2] == (1, 2.5) and np.isnan(back[0][2])
    assert back[0][3] == -np.inf and isinstance(back[0], tuple)
    assert np.array_equal(back[1][0], value[1][0]) and back[1][2:] == \
        [True, None, "s"]
    assert back[2] == Opaque("dict")
    cases = [{"S": np.ones((2, 3)), "n": 3, "grid": (3, 5)}]
    again = wire.load_cases(wire.dump_cases(cases))
    assert again[0]["grid"] == (3, 5) and again[0]["S"].shape == (2, 3)
    # a run that stopped keeps its diagnosis code on the way to the grader
    result = {"outcomes": [{"output": 1.5}, {"wrong": "raised KeyError",
                                             "code": "raised"}],
              "called": [], "tampered": False}
    back = wire.load_result(wire.dump_result(result), 2)
    assert back["outcomes"][1] == {"wrong": "raised KeyError",
                                   "code": "raised"}


def npy(array, pickle=False):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=pickle)
    return buffer.getvalue()


def bundle(tree, *blobs):
    parts = [("tree", json.dumps(tree).encode())]
    parts += [(f"a{i}", b) for i, b in enumerate(blobs)]
    return wire.pack(parts)


def lying_header(shape):
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
    header["shape"] = shape
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + b"\0" * 8


@pytest.mark.parametrize("data", [
    b"",
    b"not a frame",
    wire.MAGIC + b"tree 5\n[1]",                               # cut short
    wire.MAGIC + b"tree 3\n[1]end\ntrailing",
    wire.MAGIC + b"tree 3\n[1]tree 3\n[1]end\n",               # repeated
    wire.MAGIC + b"../x 1\nxend\n",                            # bad name
    wire.MAGIC + b"tree 99999999999\n",                        # too large
    bundle({"array": 0}, npy(np.array([object()]), pickle=True)),
    bundle({"array": 0}, npy(np.zeros(2, dtype=[("a", "f8")]))),
    bundle({"array": 0}, lying_header((10 ** 12,))),
    bundle({"array": 0}, lying_header((3,))),
    bundle({"array": 1}, npy(np.ones(2))),
    bundle({"dict": {}}),
    bundle({"tuple": [{"list": []}], "x": 1}),
    bundle(2 ** 70),
    bundle("x" * 20_000),
    bundle({"float": "1e999"}),
    wire.pack([("tree", b"NaN")]),
    wire.pack([("tree", b"[" * 100_000)]),
])
def test_hostile_bundles_are_refused(data):
    with pytest.raises(wire.WireError):
        wire.load(data)


@pytest.mark.parametrize("tree", [
    [],
    {"outcomes": [], "called": [], "tampered": False},
    {"outcomes": [{"output": 1}] * 3, "called": [], "tampered": False},
    {"outcomes": [{"wrong": "x"}, {"output": 1}], "called": [],
     "tampered": False},
    {"outcomes": [{"correct": "x"}], "called": [], "tampered": False},
    {"outcomes": [{"output": 1}], "called": [1], "tampered": False},
    {"outcomes": [{"output": 1}], "called": [], "tampered": "no"},
    {"outcomes": [{"output": 1}], "called": [], "tampered": False,
     "points": 1},
    # a diagnosis code only beside "wrong", as a short string
    {"outcomes": [{"output": 1, "code": "raised"}], "called": [],
     "tampered": False},
    {"outcomes": [{"code": "raised"}], "called": [], "tampered": False},
    {"outcomes": [{"not_done": "x", "code": "raised"}], "called": [],
     "tampered": False},
    {"outcomes": [{"wrong": "x", "code": 3}], "called": [],
     "tampered": False},
    {"outcomes": [{"wrong": "x", "code": "x" * 41}], "called": [],
     "tampered": False},
    {"outcomes": [{"wrong": "x", "code": "raised", "points": 1}],
     "called": [], "tampered": False},
])
def test_malformed_results_are_refused(tree):
    with pytest.raises(wire.WireError):
        wire.load_result(bundle(tree), n_cases=2)


# ------------------------------------------------------------------ gradebook
@pytest.mark.parametrize("cell", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1",
                                  "\r=1"])
def test_csv_cells_cannot_start_a_formula(cell):
    assert gradebook.neutral(cell).startswith("'")
    assert gradebook.neutral("Correct: =1") == "Correct: =1"


def test_markdown_and_fences_render_nothing_a_student_wrote():
    text = gradebook.md_text("![x](http://e) <img src=x> [a](b) `c`")
    assert "<" not in text and "](" not in text.replace("\\](", "")
    fenced = gradebook.fenced("a ``````` b\n```\nc")
    fence = fenced.split("text")[0]
    assert len(fence) == 8 and fenced.endswith(fence)


def write_book(out, rows):
    gradebook.write(out, rows, ["ann"], [], {}, {}, {}, {"run": 1})


def test_a_gradebook_replaces_the_previous_one_whole(tmp_path):
    out = tmp_path / "gradebook"
    row = gradebook.Row("ann", "c", "e", 1.0, 1.0, "Correct: ok")
    write_book(out, [row])
    (out / "feedback" / "stale.md").write_text("old")
    write_book(out, [row])
    assert not (out / "feedback" / "stale.md").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["gradebook"]
    with open(out / "gradebook.csv", newline="") as f:
        assert tuple(next(csv.reader(f))) == COLUMNS


def test_the_gradebook_names_each_row_s_diagnosis(tmp_path):
    out = tmp_path / "gradebook"
    write_book(out, [
        gradebook.Row("ann", "c", "e", 0.0, 2.0, "Not yet: no root",
                      code="sqrt-missing"),
        gradebook.Row("ann", "c", "f", 1.0, 1.0, "Correct: ok",
                      code="correct")])
    with open(out / "gradebook.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["diagnosis"] for r in table] == ["sqrt-missing", "correct"]
    assert gradebook.status_code("not graded") == "not-graded"


def test_a_run_that_grades_nothing_changes_nothing(manifest, tmp_path):
    out = tmp_path / "gradebook"
    write_book(out, [gradebook.Row("ann", "c", "e", 1.0, 1.0, "Correct")])
    before = (out / "gradebook.csv").read_bytes()
    subs = tmp_path / "subs"
    (subs / "eve").mkdir(parents=True)
    os.mkfifo(subs / "eve" / "a.ipynb")
    (subs / "eve" / "b.ipynb").write_text(f"{{not json {SECRET}")
    (subs / "eve" / "c.ipynb").write_text(nbformat.writes(
        nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_markdown_cell(SECRET)])))
    with pytest.raises(NothingGraded) as err:
        grade_folder(subs, manifest, out, backend=Unisolated(),
                     echo=lambda *a: None)
    assert SECRET not in str(err.value) and "FIFO" in str(err.value)
    assert (out / "gradebook.csv").read_bytes() == before
    unisolated = ["--sandbox", "none", "--exposing",
                  "instructor-files,network,other-submissions"]
    code = main([str(subs), "--manifest", str(manifest), "--out", str(out),
                 *unisolated])
    assert code == 1 and (out / "gradebook.csv").read_bytes() == before
    (subs / "eve" / "c.ipynb").unlink()
    (subs / "eve" / "b.ipynb").unlink()
    os.unlink(subs / "eve" / "a.ipynb")
    assert main([str(subs), "--manifest", str(manifest), "--out",
                 str(out), *unisolated]) == 1      # no notebook


# ------------------------------------------------------------------ sandbox
def test_the_bubblewrap_command_isolates_as_described(tmp_path):
    limits = Limits()
    root = Bubblewrap(privileged=True, uid_base=60000).command(tmp_path, 3,
                                                                limits)
    text = " ".join(root)
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc",
                 "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in root
    assert f"--ro-bind {tmp_path} /job" in text
    assert "--reuid=60003" in text and "--bounding-set=-all" in text
    assert "--unshare-user" not in root
    binds = [root[i + 1] for i, a in enumerate(root) if a == "--ro-bind"]
    assert not any(b in ("/", "/root", "/home", str(ROOT)) for b in binds)
    assert str(ROOT / "chapters") not in binds
    assert all(b.startswith(("/usr", "/etc/ld.so.cache", "/root/.pyenv",
                             str(ROOT / "lib"), str(ROOT / ".venv"),
                             str(tmp_path))) or not b.startswith(str(ROOT))
               for b in binds)
    user = Bubblewrap(privileged=False).command(tmp_path, 3, limits)
    assert "--unshare-user" in user and "setpriv" not in " ".join(user)
    for cmd in (root, user):            # the runner is the first process
        assert "--as-pid-1" in cmd and "--seccomp" not in cmd
    filtered = " ".join(Bubblewrap().command(tmp_path, 0, limits, 7))
    assert "--seccomp 7 " in filtered


def test_the_container_command_isolates_as_described(tmp_path):
    cmd = Container(engine="podman").command(tmp_path, 0, Limits())
    text = " ".join(cmd)
    for part in ("--network none", "--read-only", "--cap-drop ALL",
                 "--pids-limit 128", "--user 65534:65534", "--interactive",
                 f"source={tmp_path},target=/job,readonly"):
        assert part in text
    assert cmd[0] == "podman" and cmd[-2:] == ["selfattention_course.runner",
                                               "/job"]


def test_without_a_sandbox_the_grader_refuses_unless_told(monkeypatch,
                                                          manifest, capsys):
    monkeypatch.setattr(Bubblewrap, "works", lambda self: False)
    monkeypatch.setattr(Container, "works", lambda self: False)
    with pytest.raises(NoSandbox, match="--sandbox none"):
        choose_backend("auto")
    assert isinstance(choose_backend("none"), Unisolated)
    assert main(["x", "--manifest", str(manifest)]) == 2
    assert "your files" in capsys.readouterr().err



@pytest.mark.skipif(not Bubblewrap().works(), reason="no bubblewrap here")
def test_an_environment_under_tmp_stays_visible_in_the_sandbox(tmp_path):
    # The sandbox mounts its own /tmp; a checkout or a virtualenv under
    # /tmp must still be bound on top of it (and /tmp stay writable).
    import shutil
    import subprocess
    import tempfile

    env = Path(tempfile.mkdtemp(prefix="env-", dir="/tmp"))
    try:
        env.chmod(0o755)                  # readable by the job's user
        (env / "probe_under_tmp.py").write_text("X = 42\n")
        (env / "probe_under_tmp.py").chmod(0o644)
        (tmp_path / "job").mkdir(mode=0o755)
        backend = Bubblewrap(python_path=[str(env)])
        cmd = backend.command(tmp_path / "job", 0, Limits())
        code = (f"import sys; sys.path.insert(0, {str(env)!r}); "
                f"import probe_under_tmp as p; "
                f"print(p.X, open('/tmp/w', 'w').write('ok'))")
        inside = cmd[:cmd.index("-I")] + ["-I", "-c", code]
        done = subprocess.run(inside, capture_output=True, text=True,
                              timeout=60)
        assert done.stdout.split() == ["42", "2"], done.stderr
    finally:
        shutil.rmtree(env)
