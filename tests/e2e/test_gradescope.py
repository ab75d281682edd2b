"""The Gradescope autograder, run as Gradescope runs it.

``make gradescope``'s zip is unpacked into a temporary ``/autograder`` tree,
and a bubblewrap sandbox stands in for Gradescope's container: that tree
bound at ``/autograder``, no network, root with a container's capabilities.
In it ``setup.sh`` installs the zip's package into a fresh virtual
environment, and ``run_autograder`` grades one submission at a time: a
chapter's solutions (honest), its student notebook (untouched), two
hostile notebooks of tests/e2e/test_hostile_grading.py and one that goes for
the autograder's own tree. Each ``results.json`` must follow Gradescope's
specification and give the scores ``selfattention-grade`` gives the same
notebooks with the same seed.

What differs from Gradescope: the fresh environment sees the book's
``.venv`` (a ``.pth`` line) and installs only the zip's wheel, offline
(``--no-index --no-deps``); Gradescope installs the pinned versions from
the network.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from selfattention_course import assign, gradescope
from selfattention_course.cli import grade_folder
from selfattention_course.sandbox import Bubblewrap, Limits
from support import answers_only, sampled, stem
from hostile_routes import routes

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
SEED = 20261206
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
NO_SANDBOX = not Bubblewrap().works() and not os.environ.get("CI")
HOSTILE = ("patch-checks", "escape")
MARKER = "autograder-tree-7c1e"
#: The submission's id in Gradescope's metadata: the cases are drawn for
#: "<email>#<id>".
SUBMISSION = 4711

#: A notebook that goes for the autograder's tree: it reads the seed and
#: the judges, writes results.json, and leaves a process that keeps
#: rewriting it after the run.
TREE_ROUTE = f'''
import os, subprocess, sys
found = []
for path in ["/autograder/source/grader.json",
             "/autograder/source/run_autograder"]:
    try:
        found.append(open(path).read()[:40])
    except OSError as err:
        found.append(type(err).__name__)
import selfattention_course, pathlib
judges = pathlib.Path(selfattention_course.__file__).parent / "judges"
try:
    found.append(str(len(list(judges.iterdir()))))
except OSError as err:
    found.append(type(err).__name__)
forged = '{{"score": 99, "tests": []}}'
code = f"""
import time
for _ in range(100):
    try:
        open("/autograder/results/results.json", "w").write({{forged!r}})
    except OSError:
        pass
    time.sleep(0.1)
"""
subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
try:
    open("/autograder/results/results.json", "w").write(forged)
    found.append("wrote")
except OSError as err:
    found.append(type(err).__name__)
raise RuntimeError("{MARKER} " + " | ".join(found))
'''


def container(tree: Path, script: str, **env) -> subprocess.CompletedProcess:
    """Run ``script`` (bash) as root in a stand-in for Gradescope's
    container: ``tree`` at /autograder, no network, a private /tmp."""
    base = str(Path(sys.base_prefix).resolve())
    cmd = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc",
           "--unshare-uts", "--die-with-parent", "--new-session",
           "--cap-add", "ALL", "--clearenv",
           "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    cmd += ["--perms", "1777", "--tmpfs", "/tmp", "--dev", "/dev",
            "--proc", "/proc"]
    # This machine's Python (pyenv's, under /root; Gradescope's is under
    # /usr) and the book's .venv, readable by every user as there.
    for place in (base, str(ROOT / ".venv")):
        parts = Path(place).parts
        for depth in range(2, len(parts)):
            cmd += ["--perms", "0755", "--dir", str(Path(*parts[:depth]))]
        cmd += ["--ro-bind", place, place]
    cmd += ["--bind", str(tree), "/autograder", "--chdir", "/autograder"]
    for key, value in {"PATH": "/usr/bin:/bin", "HOME": "/root",
                       "LANG": "C.UTF-8", **env}.items():
        cmd += ["--setenv", key, value]
    return subprocess.run(cmd + ["bash", "-c", script], capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The assignments and autograders of every chapter, seed SEED."""
    tmp = tmp_path_factory.mktemp("gradescope")
    assign.build(CHAPTERS, tmp / "assignments")
    manifest = tmp / "assignments" / "grader" / "manifest.json"
    zips = gradescope.build(manifest, tmp / "gradescope", ROOT, seed=SEED,
                            echo=lambda *a: None)
    return tmp, manifest, zips


def set_up(zipped: Path, tree: Path) -> None:
    """Gradescope's build of the image: the zip in source/, setup.sh."""
    for part in ("source", "submission", "results"):
        (tree / part).mkdir(parents=True)
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(tree / "source")
    for name in ("setup.sh", "run_autograder"):
        (tree / "source" / name).chmod(0o755)
    shutil.copy(tree / "source" / "run_autograder", tree / "run_autograder")
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    python = Path(sys.base_prefix).resolve() / "bin" / \
        f"python{sys.version_info.major}.{sys.version_info.minor}"
    done = container(
        tree, f'set -e; "{python}" -m venv /autograder/venv\n'
              f'echo {site} > "$(echo /autograder/venv/lib/python3*/'
              f'site-packages)/book-venv.pth"\n'
              f'bash /autograder/source/setup.sh',
        SELFATTENTION_PYTHON=str(python), PIP_NO_CACHE_DIR="1",
        SELFATTENTION_PIP_OPTIONS="--no-index --no-deps --ignore-installed")
    assert done.returncode == 0, done.stderr[-3000:]


def submit(tree: Path, email: str, nb) -> dict:
    """One submission graded by run_autograder; its results.json."""
    for path in (tree / "submission").iterdir():
        path.unlink()
    results = tree / "results" / "results.json"
    results.unlink(missing_ok=True)
    nbformat.write(nb, tree / "submission" / "homework.ipynb")
    (tree / "submission_metadata.json").write_text(json.dumps(
        {"users": [{"email": email, "name": email}], "id": SUBMISSION}))
    done = container(tree, "/autograder/run_autograder")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(results.read_text())


def check_specification(data: dict) -> None:
    """``results.json`` as Gradescope documents it."""
    assert set(data) <= {"score", "output", "visibility",
                         "stdout_visibility", "tests"}
    assert isinstance(data["score"], (int, float))
    assert isinstance(data["output"], str)
    assert data["visibility"] in VISIBILITY
    assert data["stdout_visibility"] in VISIBILITY
    for test in data["tests"]:
        assert set(test) == {"name", "score", "max_score", "output",
                             "visibility"}
        assert isinstance(test["name"], str)
        assert 0 <= test["score"] <= test["max_score"]
        assert isinstance(test["output"], str)
        assert test["visibility"] in VISIBILITY
    assert data["score"] == pytest.approx(sum(t["score"]
                                              for t in data["tests"]))


def class_of(chapter: Path, student: Path, hostile: bool) -> dict:
    """The notebooks handed in, by the submitter's e-mail address."""
    notebooks = {
        "honest@example.edu": nbformat.read(chapter, as_version=4),
        "untouched@example.edu": nbformat.read(student, as_version=4)}
    if hostile:
        for name, source in [*[(r, routes(9, Path("/autograder/results"))[r])
                               for r in HOSTILE], ("tree", TREE_ROUTE)]:
            nb = answers_only(nbformat.read(student, as_version=4))
            nb.cells.append(nbformat.v4.new_code_cell(source.strip()))
            notebooks[f"{name}@example.edu"] = nb
    return notebooks


@pytest.mark.skipif(NO_SANDBOX, reason="bubblewrap cannot run here")
@pytest.mark.parametrize("chapter", sampled(CHAPTERS, stem), ids=stem)
def test_the_autograder_grades_as_selfattention_grade(made, chapter,
                                                      tmp_path):
    tmp, manifest, zips = made
    tree = tmp_path / "autograder"
    set_up(zips[chapter.stem], tree)
    student = tmp / "assignments" / "student" / chapter.name
    hostile = chapter.stem == "01_definition"
    notebooks = class_of(chapter, student, hostile)
    # selfattention-grade grades the same notebooks (but the one that goes
    # for the autograder's tree) while the autograder runs.
    subs = tmp_path / "submissions"
    for email, nb in notebooks.items():
        if not email.startswith("tree@"):
            folder = subs / f"{email}#{SUBMISSION}"
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / "homework.ipynb")
    with ThreadPoolExecutor(1) as pool:
        graded = pool.submit(grade_folder, subs, manifest,
                             tmp_path / "gradebook", backend=Bubblewrap(),
                             limits=Limits(), seed=SEED,
                             echo=lambda *a: None)
        results = {email: submit(tree, email, nb)
                   for email, nb in notebooks.items()}
        rows, _ = graded.result()
    for email, data in results.items():
        check_specification(data)
        if email.startswith("tree@"):
            continue
        expected = {r.exercise: (r.points, r.max_points, r.status)
                    for r in rows if r.student == f"{email}#{SUBMISSION}"
                    and r.max_points > 0
                    and not r.exercise.endswith(" (written)")}
        got = {t["name"]: (t["score"], t["max_score"], t["visibility"])
               for t in data["tests"]}
        assert set(got) == set(expected), email
        for name, (points, top, status) in expected.items():
            assert got[name][:2] == (points, top), (email, name)
            # For review: the instructor's only; else after publication.
            assert got[name][2] == ("hidden" if status == "for review"
                                    else "after_published"), (email, name)
    auto = sum(t["max_score"] for t in results["honest@example.edu"]
               ["tests"])
    assert results["honest@example.edu"]["score"] == auto > 0
    assert results["untouched@example.edu"]["score"] == 0
    if hostile:
        for name in (*HOSTILE, "tree"):
            assert results[f"{name}@example.edu"]["score"] == 0, name
        # The notebook read neither the seed nor the judges, wrote no
        # results, and its detached writer did not outlive the run.
        output = results["tree@example.edu"]["output"]
        assert MARKER in output
        assert "PermissionError | PermissionError | PermissionError | " \
               "PermissionError" in output
        assert json.loads((tree / "results" / "results.json").read_text()) \
            == results["tree@example.edu"]


def test_each_zip_holds_gradescope_s_layout_and_its_chapter_only(made,
                                                                 tmp_path):
    tmp, manifest, zips = made
    chapters = json.loads(manifest.read_text())["chapters"]
    assert sorted(zips) == sorted(ch["file"] for ch in chapters)
    for chapter in chapters:
        zipped = zips[chapter["file"]]
        assert zipped.stat().st_mode & 0o077 == 0      # the seed is in it
        with zipfile.ZipFile(zipped) as archive:
            names = sorted(archive.namelist())
            modes = {i.filename: i.external_attr >> 16 & 0o777
                     for i in archive.infolist()}
            spec = json.loads(archive.read(gradescope.GRADER_FILE))
        wheel = [n for n in names if n.endswith(".whl")]
        assert names == sorted(["setup.sh", "run_autograder",
                                gradescope.GRADER_FILE, "constraints.txt",
                                *wheel]) and len(wheel) == 1
        assert modes["setup.sh"] == modes["run_autograder"] == 0o755
        assert spec["chapters"] == [chapter]
        assert spec["gradescope"] == {"chapter": chapter["file"],
                                      "seed": SEED}
        questions = (zipped.parent / "written.md").read_text()
        for ex in chapter["exercises"]:
            if ex.get("written"):
                assert f"{ex['label']} ({ex['written']['points']:g} " \
                       f"points)" in questions
    # Without a seed given, each chapter draws its own.
    again = gradescope.build(manifest, tmp_path, ROOT,
                             [c["file"] for c in chapters[:2]],
                             echo=lambda *a: None)
    seeds = []
    for zipped in again.values():
        with zipfile.ZipFile(zipped) as archive:
            seeds.append(json.loads(archive.read(gradescope.GRADER_FILE))
                         ["gradescope"]["seed"])
    assert len(set(seeds)) == 2 and SEED not in seeds
