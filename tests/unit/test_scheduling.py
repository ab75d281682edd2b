"""The groups in which `make test` hands tests to its two workers
(``conftest.py`` at the top of the repository)."""

import subprocess
import sys
from pathlib import Path

import pytest
from support import module_from_file

ROOT = Path(__file__).resolve().parents[2]
scheduling = module_from_file("conftest.py", "book_scheduling")


def test_a_notebook_s_cells_and_a_file_s_tests_stay_together():
    group = scheduling.group
    assert group("chapters/04_masks.ipynb::Cell 0") == \
        group("chapters/04_masks.ipynb::Cell 37") == "chapters/04_masks.ipynb"
    assert group("tests/unit/test_masks.py::test_a") == \
        group("tests/unit/test_masks.py::test_b[1-2]")
    assert group("tests/unit/test_masks.py::test_a") != \
        group("tests/unit/test_x.py::a")


def test_the_sandboxed_classes_share_a_worker_and_spread_cases_do_not():
    group = scheduling.group
    assert len({group(f"{path}::test_a") for path in scheduling.SANDBOX}) == 1
    spread = [f"{prefix}{case}]" for prefix in scheduling.SPREAD
              for case in ("01_definition", "02_scaling")]
    assert len({group(nodeid) for nodeid in spread}) == len(spread)


def _collected() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
         "no:randomly", "tests/book/test_exercises.py",
         "tests/e2e/test_clients.py",
         *scheduling.SANDBOX],
        cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.slow                                  # collects three files
def test_every_name_it_uses_is_a_test_or_a_group():
    """A renamed test or file would leave a name that matches nothing."""
    nodeids = _collected()
    for prefix in scheduling.SPREAD:
        assert any(n.startswith(prefix) for n in nodeids), prefix
    for path in scheduling.SANDBOX:
        assert (ROOT / path).exists(), path
    for name in scheduling.SECONDS:
        assert name == "sandbox" or name.startswith(scheduling.SPREAD) and \
            name in nodeids or (ROOT / name).exists(), name
