"""Imports run one way between the packages of lib/.

Each package serves one audience, a room: the readers' library
(``selfattention``), the students' checks (``selfattention_exercises``),
the instructors' grader (``selfattention_course``), and beside them the
trained models (``selfattention_models``: their architectures, data sets,
weights and loader), the book's tooling (``selfattention_book``) and the
training recipes (``selfattention_training``). Readers <- students <-
instructors: a room imports its own and the rooms below it, never one
above. The models import the readers' library alone, and the readers never
import the models; students, instructors, the book's tooling and training
may import them. The book's tooling imports the readers' and the students'
packages (it never runs the grader: the course edition reads what
``selfattention-assign`` wrote), and training the readers'. The grader
converts chapters into student notebooks with the book's plain conversion,
the one arrow into the tooling. The rooms above the readers' may name the
training recipes: an exercise forbids a recipe as a shortcut, the grader's
review trusts what the chapters import, the code sync shows chapter 6's
training loop.

Every import counts, also one inside a function, and so does a string that
is a module's dotted name (``importlib`` reads it: an exercise's references,
the review's trusted roots). The students' checks find their judges through
the entry point group ``selfattention_exercises.judges``, which the grader's
package registers (``pyproject.toml``): no module of the checks names the
grader. The chapters import the readers', models', students' and training
rooms only. Sizes are kept too: the readers' library at most 4,000 lines
and 400 a module, the grader 600 a module.
"""

import json
import re

import ast
from pathlib import Path

import pytest
from setuptools.config.pyprojecttoml import read_configuration

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib"

#: The room of each package, the longest name first.
ROOMS = {
    "selfattention_exercises": "students",
    "selfattention_course": "instructors",
    "selfattention_book": "book",
    "selfattention_training": "training",
    "selfattention_models": "models",
    "selfattention": "readers",
}
#: The rooms each room may import.
MAY_IMPORT = {
    "readers": {"readers"},
    "models": {"readers", "models"},
    "students": {"readers", "models", "students", "training"},
    "instructors": {"readers", "models", "students", "instructors", "book",
                    "training"},
    "book": {"readers", "models", "students", "book", "training"},
    "training": {"readers", "models", "training"},
}
#: Arrows against the rooms that are known and on their way out: each is
#: removed by the change that removes its import (a stale entry fails).
KNOWN: set[tuple[str, str]] = set()


def room_of(module: str) -> str | None:
    """The room of a module of lib/; None for any other module."""
    for package, room in ROOMS.items():
        if module == package or module.startswith(package + "."):
            return room
    return None


def module_name(path: Path, lib: Path) -> str:
    parts = list(path.relative_to(lib).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, lib: Path) -> bool:
    path = lib.joinpath(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


#: A string that is a dotted name in one of the rooms.
DOTTED = re.compile(r"selfattention\w*(?:\.\w+)*")


def imported(path: Path, lib: Path) -> set[str]:
    """The modules the file ``path`` imports, as absolute names: a relative
    import resolved against its package, ``from package import module`` as
    the module; and every string that is such a name."""
    name = module_name(path, lib)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            head = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split("."))
                                          - (node.level - 1)]
                head = ".".join(base + ([head] if head else []))
            for alias in node.names:
                inner = f"{head}.{alias.name}"
                found.add(inner if is_module(inner, lib) else head)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and DOTTED.fullmatch(node.value):
            found.add(node.value)
    return found


def arrows_against_the_rooms(lib: Path) -> set[tuple[str, str]]:
    """Every (importer, imported) pair of lib/ that a room may not have."""
    wrong = set()
    for path in sorted(lib.rglob("*.py")):
        importer = module_name(path, lib)
        source = room_of(importer)
        if source is None:
            continue
        wrong |= {(importer, target) for target in imported(path, lib)
                  if room_of(target) not in MAY_IMPORT[source] | {None}}
    return wrong


def test_no_import_runs_against_the_rooms():
    found = arrows_against_the_rooms(LIB)
    assert found - KNOWN == set()
    assert KNOWN - found == set(), "stale entries of KNOWN: remove them"


def _write(lib: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = lib / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        for folder in path.relative_to(lib).parents:
            if folder != Path("."):
                (lib / folder / "__init__.py").touch()


def test_an_arrow_against_the_rooms_is_found(tmp_path):
    _write(tmp_path, {
        "selfattention/attention.py": "import numpy\n",
        "selfattention/grading.py": "from selfattention_course import grade\n",
        "selfattention/exercises/core.py":
            "def f():\n    import selfattention_course.judges\n",
        "selfattention_exercises/checks.py":
            "from selfattention import attention\n"
            "from selfattention_book.plain import x\n",
        "selfattention_book/pages.py": "from . import META\n",
        "selfattention_book/build.py":
            "from selfattention import attention\nfrom . import pages\n"
            "def f():\n    from selfattention_course.assign import g\n",
        "selfattention_training/recipes.py":
            "from selfattention_exercises import checks\n"
            "from selfattention_models import trained\n",
        "selfattention/vit.py": "from selfattention_models import trained\n",
        "selfattention/names.py":
            'TRUSTED = "selfattention_training.recipes"\n'
            'TEXT = "see selfattention_course.judges"\n',
        "selfattention_models/trained.py": "import numpy\n",
        "selfattention_models/mnist.py":
            "from selfattention.vit import TinyViT\nfrom . import trained\n"
            "def f():\n    import selfattention_exercises.core\n",
        "selfattention_models/photo_vit.py":
            "from selfattention_training.recipes import weight_arrays\n",
        "selfattention_exercises/photographs.py":
            "from selfattention_models import photo_vit\n",
        "selfattention_course/judges.py":
            "from selfattention_exercises import checks\n"
            "from selfattention_book import pages\n"
            "from ..selfattention import attention\n",
        "selfattention_course/grade.py": "from .judges import f\n",
    })
    assert arrows_against_the_rooms(tmp_path) == {
        ("selfattention.grading", "selfattention_course.grade"),
        ("selfattention.exercises.core", "selfattention_course.judges"),
        ("selfattention_exercises.checks", "selfattention_book.plain"),
        ("selfattention_book.build", "selfattention_course.assign"),
        ("selfattention_training.recipes",
         "selfattention_exercises.checks"),
        ("selfattention.vit", "selfattention_models.trained"),
        ("selfattention.names", "selfattention_training.recipes"),
        ("selfattention_models.mnist", "selfattention_exercises.core"),
        ("selfattention_models.photo_vit",
         "selfattention_training.recipes"),
    }


@pytest.mark.parametrize("module, room", [
    ("selfattention.attention", "readers"),
    ("selfattention.exercises.core", "readers"),
    ("selfattention_exercises", "students"),
    ("selfattention_course.judges.definition", "instructors"),
    ("selfattention_book.plain", "book"),
    ("selfattention_training.mnist", "training"),
    ("selfattention_models.trained", "models"),
    ("selfattention_modelsx", None),
    ("selfattentionx", None), ("numpy", None),
])
def test_each_package_has_its_room(module, room):
    assert room_of(module) == room


def test_the_installed_package_leaves_the_book_tooling_out():
    """The wheel (``pip install .``, Colab's first cell) carries no build
    extension and no diagram drawing; the editable install of ``make
    install`` still imports them from the checkout."""
    config = read_configuration(ROOT / "pyproject.toml")
    packages = set(config["tool"]["setuptools"]["packages"])  # as found
    assert "selfattention" in packages
    assert not {p for p in packages if room_of(p) == "book"}
    import selfattention_book.diagrams

    assert Path(selfattention_book.diagrams.__file__).resolve() == \
        LIB / "selfattention_book" / "diagrams" / "__init__.py"


def chapter_imports() -> set[tuple[str, str]]:
    """(notebook, module) of every import in the code cells of the
    chapters and the appendices' notebooks."""
    found = set()
    for path in sorted([*ROOT.glob("chapters/*.ipynb"),
                        *ROOT.glob("appendices/*.ipynb")]):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            lines = [line for line in source.splitlines()
                     if not line.lstrip().startswith(("%", "!"))]
            try:
                tree = ast.parse("\n".join(lines))
            except SyntaxError:              # an exercise's unfinished cell
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found |= {(path.name, a.name) for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module:
                    found.add((path.name, node.module))
    return found


def test_the_chapters_import_no_grader_and_no_tooling():
    """A chapter runs in Colab from the installed package: the readers',
    models', students' and training rooms, never the grader or the book's
    tooling (which a student's install does not have)."""
    imports = chapter_imports()
    assert {m for _, m in imports if room_of(m) == "readers"}
    wrong = {(nb, m) for nb, m in imports
             if room_of(m) in ("instructors", "book")}
    assert wrong == set()


def python_lines(package: str) -> dict[str, int]:
    return {str(p.relative_to(LIB)): len(p.read_text(
        encoding="utf-8").splitlines())
        for p in sorted((LIB / package).rglob("*.py"))}


def test_each_room_keeps_its_size():
    """The readers' library stays thin: at most 4,000 lines of Python and
    about 400 a module; no module of the grader over about 600."""
    readers = python_lines("selfattention")
    assert sum(readers.values()) <= 4000
    assert {p: n for p, n in readers.items() if n > 400} == {}
    assert {p: n for p, n in python_lines("selfattention_course").items()
            if n > 600} == {}
