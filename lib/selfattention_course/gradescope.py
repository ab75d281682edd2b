"""Gradescope autograders: one zip per chapter, and the grading inside it.

``python -m selfattention_course.gradescope build`` (``make gradescope``)
writes ``gradescope/<chapter>/autograder.zip`` for every chapter of the
manifest, in the layout Gradescope documents:

* ``setup.sh``, run once as root when Gradescope builds the image: a
  virtual environment at ``/autograder/venv`` holding the book's package
  (its wheel, in the zip: the library, this grader and its judges) and the
  versions pinned in ``constraints.txt``, installed from the network;
* ``run_autograder``, run for each submission:
  ``python -m selfattention_course.gradescope run``, which grades
  ``/autograder/submission/*.ipynb`` and writes
  ``/autograder/results/results.json``;
* ``grader.json``: the chapter's part of the manifest and the **seed** of
  its hidden cases. ``selfattention-grade`` draws a secret seed for each run
  (and records it in the gradebook's ``run.json``); an autograder has one
  seed for all its runs, drawn when the zip is made, and it is in the zip
  only (the ``gradescope/`` folder is ignored by git).

Inside the container (:func:`run`) the grader is the one of
``selfattention-grade``: the same intake, hidden cases (drawn from the
seed, the chapter and :func:`submitter`, as ``selfattention-grade`` draws
them for a student folder of that name), runner, harvest, judges and source
review, and the gradebook's rows (:func:`~selfattention_course.cli.
assemble`) become the results (:func:`results`). There is no bubblewrap:
the container is the isolation (:class:`InContainer`). Each exercise is one
test whose output is the student's diagnosis, shown once grades are
published (``after_published``: a diagnosis may quote a hidden case); an
exercise sent for review is a ``hidden`` test, for the instructor only.
Written parts are Gradescope's manual questions
(:func:`selfattention_course.written.questions`).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import traceback
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .cli import assemble
from .grade import Graded, Grader
from .gradebook import clean_text
from .notebook import MAX_NOTEBOOK, load_manifest
from .intake import _Budget, _open_dir, _walk, student_name
from .names import FOR_REVIEW, TO_BE_READ, Problem
from .sandbox import Limits, Unisolated

__all__ = ["build", "run", "results", "InContainer", "GRADER_FILE",
           "ROOT_ENV"]

#: The zip's file that holds the chapter's manifest and seed.
GRADER_FILE = "grader.json"
#: Where the autograder's tree is (default ``/autograder``): a test lays it
#: out in a temporary folder.
ROOT_ENV = "AUTOGRADER_ROOT"
#: The user id the notebook runs as when the grader runs as root.
STUDENT_UID = 61_000
#: Characters of the results' top-level output.
MAX_OUTPUT = 4_000

SETUP = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
# The book's package (the library, the grader and its judges) and the versions
# pinned in constraints.txt go into a virtual environment of their own.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="${SELFATTENTION_VENV:-$ROOT/venv}"
# The first Python of 3.10 or later; Ubuntu's python3 otherwise.
PYTHON="${SELFATTENTION_PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for name in python3.13 python3.12 python3.11 python3.10 python3; do
    if command -v "$name" >/dev/null; then PYTHON="$name"; break; fi
  done
fi
if [ -z "$PYTHON" ] || ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null
then
  apt-get update
  apt-get install -y python3 python3-venv
  PYTHON=python3
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv ${SELFATTENTION_VENV_OPTIONS:-} "$VENV"
fi
# Default: the pinned versions from the network (PyTorch's CPU build).
# SELFATTENTION_PIP_OPTIONS replaces these options (a test installs offline).
"$VENV/bin/python" -m pip install --disable-pip-version-check \
  ${SELFATTENTION_PIP_OPTIONS:---constraint "$SOURCE/constraints.txt" \
  --extra-index-url https://download.pytorch.org/whl/cpu} \
  "$SOURCE"/selfattention-*.whl
# jsonschema's optional URI grammar costs ~3 s in every process that imports
# nbformat (the Makefile's install removes it too).
"$VENV/bin/python" -m pip uninstall --disable-pip-version-check -q -y \
  rfc3987-syntax 2>/dev/null || true
"$VENV/bin/python" -I -c 'import selfattention_course.gradescope'
# Readable by the user the notebooks run as (the judges are closed to it
# when a submission is graded).
chmod -R a+rX "$VENV"
"""

RUN = r"""#!/usr/bin/env bash
# Gradescope runs this for each submission: grade the notebooks in
# /autograder/submission/, write /autograder/results/results.json.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
VENV="${SELFATTENTION_VENV:-$ROOT/venv}"
exec "$VENV/bin/python" -I -m selfattention_course.gradescope run \
  --root "$ROOT"
"""


# ------------------------------------------------------------------ building
def wheel(out: Path, project: Path) -> Path:
    """Build the book's wheel (no dependencies) into ``out``, from a copy of
    the package's files: setuptools writes its ``build/`` and
    ``*.egg-info`` beside the sources it builds, and the instructor's
    checkout stays as it was."""
    with tempfile.TemporaryDirectory(prefix="selfattention-src-") as tmp:
        source = Path(tmp)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(project / name, source / name)
        shutil.copytree(project / "lib", source / "lib", ignore=(
            shutil.ignore_patterns("__pycache__", "*.egg-info")))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet",
                        "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "-w", str(out),
                        str(source)], check=True)
    (made,) = sorted(out.glob("selfattention-*.whl"))
    return made


def _add(archive: zipfile.ZipFile, name: str, data: bytes,
         mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def build(manifest: Path, out: Path, project: Path, chapters=None,
          seed: int | None = None, echo=print) -> dict[str, Path]:
    """Write ``out/<chapter>/autograder.zip`` (and the chapter's written
    questions beside it); return the zips by chapter.

    Each chapter gets its own secret seed unless ``seed`` is given.
    """
    from .written import questions

    chapters_by_stem, modules = load_manifest(manifest)
    wanted = list(chapters or chapters_by_stem)
    unknown = [c for c in wanted if c not in chapters_by_stem]
    if unknown:
        raise ValueError(f"unknown chapters {unknown}; known: "
                         f"{sorted(chapters_by_stem)}")
    out = Path(out)
    made: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="selfattention-wheel-") as tmp:
        built = wheel(Path(tmp), project)
        constraints = (Path(project) / "constraints.txt").read_bytes()
        for stem in wanted:
            chapter = chapters_by_stem[stem]
            data = {"chapters": [chapter], "modules": modules,
                    "gradescope": {"chapter": stem, "seed": secrets.randbits(
                        64) if seed is None else int(seed)}}
            folder = out / stem
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / "autograder.zip"
            fresh = folder / f".autograder.{secrets.token_hex(4)}.zip"
            try:
                with zipfile.ZipFile(fresh, "w") as archive:
                    _add(archive, "setup.sh", SETUP.encode(), 0o755)
                    _add(archive, "run_autograder", RUN.encode(), 0o755)
                    _add(archive, GRADER_FILE,
                         json.dumps(data, indent=1).encode())
                    _add(archive, "constraints.txt", constraints)
                    _add(archive, built.name, built.read_bytes())
                os.chmod(fresh, 0o600)         # the seed is in it
                os.replace(fresh, target)
            finally:
                fresh.unlink(missing_ok=True)
            (folder / "written.md").write_text(questions(chapter),
                                               encoding="utf-8")
            made[stem] = target
            echo(f"{target} ({target.stat().st_size / 2 ** 20:.1f} MB)")
    return made


# ------------------------------------------------------------------ running
@dataclass
class InContainer(Unisolated):
    """The job in the autograder's own container: no namespaces of its
    own (the container is the isolation), the runner's resource limits, and,
    when the grader runs as root (as on Gradescope), a user id of its own
    with no capabilities, so that the notebook cannot read the seed, the
    judges or the results, and its processes are counted apart and ended
    with the job."""

    name: str = "container"
    uid: int | None = field(default_factory=lambda: STUDENT_UID
                            if os.geteuid() == 0 else None)
    setpriv: str = field(default_factory=lambda: shutil.which("setpriv") or
                         "setpriv")

    def command(self, job: Path, slot: int, limits: Limits,
                filter_fd: int | None = None) -> list[str]:
        if self.uid is None:
            return self.runner(str(job))
        uid = str(self.uid)
        return [self.setpriv, f"--reuid={uid}", f"--regid={uid}",
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                "--no-new-privs"] + self.runner(str(job))

    def environment(self, job: Path) -> dict:
        env = super().environment(job)
        if self.uid is not None:
            scratch = Path(env["SELFATTENTION_SCRATCH"])
            os.chown(scratch, self.uid, self.uid)
        return env

    def run(self, job: Path, slot: int, limits: Limits, given: bytes = b""):
        if self.uid is not None:
            # The job's folder (and no other) is reachable by its user.
            job.parent.chmod(0o711)
        try:
            outcome = super().run(job, slot, limits, given)
        finally:
            self.end_strays()
        if outcome.returncode:            # for the instructor's log only
            print("the runner's last words: " + clean_text(
                outcome.stderr.decode("utf-8", "replace")[-2000:], 2000),
                file=sys.stderr)
        return outcome

    def end_strays(self) -> None:
        """Kill every process of the job's user left running."""
        if self.uid is None:
            return
        for _ in range(5):
            left = [int(p) for p in os.listdir("/proc") if p.isdigit()
                    and _owner(int(p)) == self.uid]
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def collect_one(folder: Path, student: str) -> list:
    """The notebooks under ``folder``, handed in by ``student``, read as
    :func:`~selfattention_course.intake.collect` reads a student folder."""
    found: list = []
    fd = _open_dir(str(folder))
    try:
        _walk(fd, student, "", 1, MAX_NOTEBOOK, found, _Budget())
    finally:
        os.close(fd)
    return found


def submitter(root: Path) -> str:
    """The name the hidden cases are drawn for: the first submitter's
    e-mail address and the submission's id in Gradescope's
    ``submission_metadata.json`` (``<email>#<id>``), so that every
    submission meets cases of its own: cases a notebook sends out over the
    container's network are of no use to the next one."""
    try:
        meta = json.loads((root / "submission_metadata.json").read_text(
            encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    users = meta.get("users")
    first = users[0] if isinstance(users, list) and users else {}
    email = first.get("email") if isinstance(first, dict) else None
    number = meta.get("id")
    name = email if isinstance(email, str) and email else "submission"
    if isinstance(number, (int, str)) and str(number):
        name += f"#{number}"
    else:
        name += f"#{secrets.token_hex(8)}"
    return student_name(name)


def results(rows, graded, stem: str, title: str) -> dict:
    """Gradescope's ``results.json`` for one chapter's rows.

    One test per exercise with auto-points (the written parts are manual
    questions): its points, its maximum and the student's diagnosis, shown
    when grades are published; an exercise sent for review is hidden from
    the student, its output the instructor's. The top-level output, shown
    at once, names the notebook graded and what happened while it ran.
    """
    tests = []
    for row in rows:
        if row.chapter != stem or row.max_points <= 0 or \
                row.exercise.endswith(" (written)"):
            continue
        review = row.status == FOR_REVIEW
        tests.append({
            "name": row.exercise, "score": row.points,
            "max_score": row.max_points,
            "output": clean_text(row.feedback if review else
                                 row.student_text, 2_000),
            "visibility": "hidden" if review else "after_published"})
    lines = [f"{title} ({stem})"]
    counted = [g for g in graded if g.counted]
    for g in counted:
        lines.append(f"Graded: {g.name} (recognised by its "
                     f"{g.matched_by}).")
        lines += [f"While it ran: {p}" for p in g.problems]
    if not counted:
        lines.append("No notebook of this chapter was graded.")
    for row in rows:
        if not row.chapter:                  # refused or not recognised
            lines.append(row.student_text)
    if any(row.status == TO_BE_READ or row.exercise.endswith(" (written)")
           for row in rows if row.chapter == stem):
        lines.append("Written answers are graded by hand, as questions of "
                     "their own.")
    held = sum(t["visibility"] == "hidden" for t in tests)
    if held:
        lines.append(f"{held} exercise(s) are held for your instructor's "
                     f"review.")
    lines.append("Each exercise's score and diagnosis on the hidden cases "
                 "appear when grades are published.")
    return {"score": sum(t["score"] for t in tests),
            "output": clean_text("\n".join(lines), MAX_OUTPUT),
            "visibility": "visible", "stdout_visibility": "hidden",
            "tests": tests}


def _write_json(path: Path, data: dict) -> None:
    fresh = path.parent / f".{path.name}.{secrets.token_hex(4)}"
    fresh.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(fresh, path)


def _lock_down(root: Path) -> None:
    """Run as root: what the notebook's user must not read or write."""
    import selfattention_course

    judges = Path(selfattention_course.__file__).resolve().parent / "judges"
    for path in (root / "source", root / "results", root / "submission",
                 judges):
        if path.is_dir():
            path.chmod(0o700)


def run(root: Path, limits: Limits | None = None, echo=None) -> dict:
    """Grade the submission under ``root`` and write its results; return
    them."""
    root = Path(root)
    echo = echo or (lambda *a: print(*a, file=sys.stderr))
    (root / "results").mkdir(parents=True, exist_ok=True)
    backend = InContainer()
    if backend.uid is not None:
        _lock_down(root)
    spec = root / "source" / GRADER_FILE
    setting = json.loads(spec.read_text(encoding="utf-8"))["gradescope"]
    stem = setting["chapter"]
    grader = Grader(spec, backend, limits or Limits(), setting["seed"],
                    jobs=1, echo=echo)
    student = submitter(root)
    submissions = collect_one(root / "submission", student)
    graded = grader.grade_all(submissions)
    if not graded:
        nothing = Graded(student, "")
        nothing.problems.append(Problem(
            "no notebook (.ipynb) was handed in", "no-notebook"))
        graded = [nothing]
    rows, _, _, _ = assemble(graded, grader.chapters, [stem])
    data = results(rows, graded, stem, grader.chapters[stem]["title"])
    _write_json(root / "results" / "results.json", data)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m selfattention_course.gradescope",
        description="Gradescope autograders: build the zips, or grade one "
                    "submission inside Gradescope's container.")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build", help="one autograder.zip per chapter")
    make.add_argument("--manifest", type=Path,
                      default=Path("assignments/grader/manifest.json"))
    make.add_argument("--out", type=Path, default=Path("gradescope"))
    make.add_argument("--project", type=Path, default=Path("."),
                      help="the book's checkout (its wheel goes in the zip)")
    make.add_argument("--chapters", nargs="*")
    make.add_argument("--seed", type=int,
                      help="one seed for every chapter (default: a secret "
                           "one per chapter)")
    grade = sub.add_parser("run", help="inside the container: grade "
                                       "ROOT/submission")
    grade.add_argument("--root", type=Path, default=Path(
        os.environ.get(ROOT_ENV, "/autograder")))
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.manifest, args.out, args.project, args.chapters,
              args.seed)
        return 0
    try:
        run(args.root)
    except Exception:
        # For the instructor's log; the student sees a plain failure.
        traceback.print_exc()
        _write_json(args.root / "results" / "results.json", {
            "score": 0, "output": "The autograder could not grade this "
                                  "submission; your instructor has its log.",
            "visibility": "visible", "stdout_visibility": "hidden",
            "tests": []})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
