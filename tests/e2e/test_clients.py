"""The plain notebooks in a real client: JupyterLab, as a student opens them.

A JupyterLab server (the pinned ``jupyterlab`` of the dev extra) runs on
127.0.0.1 with its own settings folders; Debian's Chromium, driven by
playwright with every other host blocked, opens each notebook of
``notebooks/`` as a student would: from disk, so not trusted. The test reads
what the page shows, not the file: no MyST markup or label in any rendered
Markdown cell, the explorers show a picture rather than an empty box, and
Run All of a chapter for each kind of figure ends without an error or a
warning. A student notebook of ``make assignments`` shows no markup either,
and its checks' feedback wraps between words. make test opens chapter 1's
notebook (tests/support.py), make sweep the others.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser_support import CHROMIUM, missing
from support import SAMPLE_CHAPTER, sampled

from selfattention_course import assign

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RAW = re.compile(r"\{(numref|cite|eq|ref|doc|py:\w+)[^}]*\}|^:{3,}|^`{3,}\{"
                 r"|^\([\w.:-]+\)=|^:(label|class|name):", re.M)
# The chapter whose explorer's arrow keys are tried after Run All (the
# chapter make test runs everything on).
KEYS = f"{SAMPLE_CHAPTER}.ipynb"


def _figure_kinds(path: Path) -> set[str]:
    """The kinds of kernel-free figure in a notebook's stored outputs
    (``sa-explorer``, ``sa-bars``, ...: the second class of ``sa-fig``)."""
    return set(re.findall(r'class="sa-fig (sa-[\w-]+)', path.read_text(
        ).replace('\\"', '"')))


def _run_all_set(notebooks: list[Path]) -> list[Path]:
    """The notebooks Run All is tried on in JupyterLab: the one whose arrow
    keys are tried, then, in order, each that brings a kind of figure not
    yet run. nbval runs every notebook's code and compares its outputs,
    stderr included; what only the client adds is the figures' scripts, so
    running each script once in the client covers it."""
    chosen = [p for p in notebooks if p.name == KEYS]
    seen = set().union(*map(_figure_kinds, chosen))
    for path in notebooks:
        if not _figure_kinds(path) <= seen:
            chosen.append(path)
            seen |= _figure_kinds(path)
    return sorted(chosen)


RUN_ALL = _run_all_set(NOTEBOOKS)
# The chapter whose student notebook (make assignments) the client opens.
STUDENT = KEYS


def file_name(path: Path) -> str:
    """A notebook's case id."""
    return path.name

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path_factory, app: str, what: str):
    """Run the Jupyter ``app`` (``jupyter-lab``, ``jupyter-notebook``) on
    127.0.0.1 over a copy of notebooks/ and a student notebook; yield its
    URL, token and the folder it serves."""
    app_bin = Path(sys.executable).parent / app
    if not app_bin.exists():
        missing(what)
    if not CHROMIUM.exists():
        missing("chromium")
    home = tmp_path_factory.mktemp(app)
    settings = home / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # Render every cell, not only those in view, so the page can be read
    # whole; no news pop-up.
    (settings / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    # Never write the notebooks back (Run All would otherwise be saved).
    docs = home / "settings" / "@jupyterlab" / "docmanager-extension"
    docs.mkdir(parents=True)
    (docs / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosave": False}))
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    # A copy, as a student's download would be: the repository's files are
    # never opened for writing.
    served = home / "served"
    shutil.copytree(ROOT / "notebooks", served / "notebooks")
    # and a student notebook of `make assignments`, as a class receives it
    assign.build([ROOT / "chapters" / STUDENT], home / "assignments")
    shutil.copytree(home / "assignments" / "student", served / "student")
    port, token = _free_port(), "client-test"
    log = open(home / "server.log", "w")
    server = subprocess.Popen(
        [str(app_bin), "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={served}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}")
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"{what} did not start: "
                        + (home / "server.log").read_text()[-2000:])
        yield base, token, served
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab (the pinned ``jupyterlab`` of the dev extra)."""
    yield from _serve(tmp_path_factory, "jupyter-lab", "jupyterlab")


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory):
    """A Notebook 7 (the pinned ``notebook`` of the dev extra)."""
    yield from _serve(tmp_path_factory, "jupyter-notebook", "notebook")


def _open(browser, lab, name: str, folder: str = "notebooks",
          width: int = 1366, client: str = "lab"):
    base, token, _ = lab
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.route("**/*", lambda route: route.continue_()
               if route.request.url.startswith(("http://127.0.0.1", "data:",
                                                "blob:", "ws://127.0.0.1"))
               else route.abort())
    # A workspace of its own, reset: JupyterLab would otherwise reopen the
    # notebooks earlier pages opened, beside this one.
    space = f"{Path(name).stem}-{time.monotonic_ns()}"
    if client == "lab":
        page.goto(f"{base}/lab/workspaces/{space}/tree/{folder}/{name}"
                  f"?reset&token={token}")
    else:                                # Notebook 7: one notebook a tab
        page.goto(f"{base}/notebooks/{folder}/{name}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-MarkdownOutput",
                           timeout=120_000)
    # Markdown renders cell by cell; wait until the count settles.
    count, stable = -1, 0
    while stable < 3:
        now = page.locator(".jp-MarkdownOutput").count()
        stable = stable + 1 if now == count else 0
        count = now
        time.sleep(0.5)
    return page


def _shut_kernels(lab) -> None:
    base, token, _ = lab
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}") as r:
        sessions = json.load(r)
    for session in sessions:
        req = urllib.request.Request(
            f"{base}/api/sessions/{session['id']}?token={token}",
            method="DELETE")
        urllib.request.urlopen(req).close()


def _assert_markdown_is_plain(page, path: Path) -> None:
    """Every Markdown cell of ``path`` rendered, and none shows markup."""
    cells = json.loads(path.read_text())["cells"]
    markdown = sum(c["cell_type"] == "markdown" for c in cells)
    shown = page.locator(".jp-MarkdownOutput")
    assert shown.count() == markdown, "a Markdown cell did not render"
    text = page.evaluate(
        "() => Array.from(document.querySelectorAll("
        "'.jp-MarkdownOutput')).map(e => e.innerText).join('\\n')")
    found = RAW.search(text)
    assert not found, f"{path.name} shows {found.group(0)!r}"
    assert "$$" not in text, f"{path.name}: unrendered display maths"


def _run_all(page, path: Path) -> None:
    """Run All Cells from the menu and wait until every shown cell ran."""
    # (attached, not visible: a narrow window folds the indicator into the
    # toolbar's overflow menu)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator"
                           "[data-status='idle']", state="attached",
                           timeout=120_000)
    page.keyboard.press("Escape")
    page.click("text=Run", timeout=30_000)
    page.click("text=Run All Cells", timeout=30_000)
    cells = json.loads(path.read_text())["cells"]
    # Folded cells (solutions, the Colab cell) show no prompt.
    shown = sum(c["cell_type"] == "code" and not c["metadata"].get(
        "jupyter", {}).get("source_hidden") for c in cells)
    deadline = time.time() + 300
    while time.time() < deadline:
        prompts = [p.strip() for p in page.evaluate(
            "() => Array.from(document.querySelectorAll("
            "'.jp-CodeCell .jp-InputPrompt')).map(e => e.innerText)")]
        done = [p for p in prompts if re.fullmatch(r"\[\d+\]:", p)]
        if len(done) == shown and "[*]:" not in prompts:
            return
        time.sleep(1)
    pytest.fail(f"Run All did not finish: {prompts}")


def _assert_no_error_or_warning(page) -> None:
    errors = page.locator(
        ".jp-OutputArea-output[data-mime-type="
        "'application/vnd.jupyter.stderr'], .jp-OutputArea-output"
        "[data-mime-type='application/vnd.jupyter.error']")
    assert errors.count() == 0, errors.first.inner_text()[:500]


@pytest.mark.parametrize("path", sampled(NOTEBOOKS, file_name), ids=file_name)
def test_a_student_sees_prose_maths_and_figures(lab, browser, path):
    page = _open(browser, lab, path.name)
    try:
        _assert_markdown_is_plain(page, path)
        # Every kernel-free figure shows its first state while untrusted:
        # each canvas has the still of that state as its background
        # (selfattention._stills); a figure without a canvas (chapter 7's
        # cost table) is written out in its HTML, every cell filled in; and
        # the note on how to explore it shows.
        figures = page.locator(".jp-OutputArea .sa-fig")
        for k in range(figures.count()):
            figure = figures.nth(k)
            stills = figure.evaluate(
                "f => Array.from(f.querySelectorAll('canvas')).map(c => "
                "getComputedStyle(c).backgroundImage)")
            cells = figure.evaluate(
                "f => Array.from(f.querySelectorAll('td')).map(c => "
                "c.innerText.trim())")
            shown = all(s.startswith('url("data:image/png') for s in stills)
            assert (stills and shown) or (not stills and cells
                                          and all(cells)), (
                f"{path.name}: explorer {k + 1} is an empty box")
            assert figure.locator(".sa-still-note").is_visible(), path.name
    finally:
        page.close()
        _shut_kernels(lab)


def test_run_all_tries_every_kind_of_figure():
    kinds = set().union(*map(_figure_kinds, NOTEBOOKS))
    assert {"sa-explorer", "sa-bars"} <= kinds       # the pattern still reads
    assert set().union(*map(_figure_kinds, RUN_ALL)) == kinds
    assert len(RUN_ALL) < len(NOTEBOOKS)


@pytest.mark.parametrize("path", sampled(RUN_ALL, file_name), ids=file_name)
def test_run_all_ends_without_an_error_or_a_warning(lab, browser, path):
    """A chapter as the client runs it, for each kind of figure (nbval runs
    every notebook and compares its outputs; this is the student's view of
    the figures' scripts running)."""
    page = _open(browser, lab, path.name)
    try:
        _run_all(page, path)
        _assert_no_error_or_warning(page)
        # Run, the figures' scripts ran and took their notes away.
        assert page.locator(".sa-still-note").count() == 0
        if path.name == KEYS:
            # The arrow keys move the query of the first explorer
            # (Lumino's shortcuts would otherwise take them).
            canvas = page.locator(".sa-fig canvas[tabindex]").first
            caption = page.locator(".sa-fig [aria-live]").first
            before = caption.inner_text()
            canvas.focus()
            page.keyboard.press("ArrowDown")   # bound to "next cell" in Lab
            assert caption.inner_text() != before, "the arrow key did nothing"
    finally:
        page.close()
        _shut_kernels(lab)


# Where each visible line of an element starts a new line box, the two
# characters around the break, and how many lines it takes.
LINE_BREAKS = """el => {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  let text = '';
  const tops = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rects = range.getClientRects();
      tops.push(rects.length ? rects[0].top : null);
      text += node.data[i];
    }
  }
  const breaks = [];
  for (let i = 1; i < text.length; i++) {
    if (tops[i] !== null && tops[i - 1] !== null && tops[i] > tops[i - 1] + 1)
      breaks.push([text[i - 1], text[i], text.slice(Math.max(0, i - 12), i)
                   + '|' + text.slice(i, i + 12)]);
  }
  return breaks;
}"""


def test_a_student_notebook_reads_plainly_and_its_feedback_wraps_at_words(
        lab, browser):
    """A student notebook of `make assignments` in JupyterLab: no markup
    shows; after Run All, each check's feedback ("Not attempted: ...") wraps
    between words in a window narrow enough to make it wrap."""
    path = lab[2] / "student" / STUDENT
    page = _open(browser, lab, STUDENT, folder="student", width=900)
    try:
        _assert_markdown_is_plain(page, path)
        _run_all(page, path)
        feedback = page.locator(".jp-OutputArea .sa-feedback")
        assert feedback.count() >= 1, "no check showed its feedback"
        wrapped = 0
        for k in range(feedback.count()):
            breaks = feedback.nth(k).evaluate(LINE_BREAKS)
            wrapped += bool(breaks)
            inside = [b[2] for b in breaks
                      if not (b[0].isspace() or b[1].isspace())]
            assert not inside, f"feedback {k + 1} breaks inside {inside}"
        assert wrapped, "no feedback was long enough to wrap: narrow it"
        _assert_no_error_or_warning(page)
    finally:
        page.close()
        _shut_kernels(lab)


# The chapter a fresh install runs: one that loads trained weights and shows
# kernel-free figures, so that the package data (the weights of `make train`,
# the figures' scripts and styles) is tested as an install ships it.
FRESH = "01_definition.ipynb"


def test_an_installed_package_runs_a_chapter_like_colab(tmp_path):
    """What Colab's install cell gives: the package built and installed from
    the repository (not editable: a wheel, with its package data), and the
    plain notebook run top to bottom in a folder of its own. The other
    packages are this environment's, as Colab brings its own."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--target", str(site),
                    str(ROOT)], check=True, cwd=tmp_path)
    work = tmp_path / "student"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / FRESH, work / FRESH)
    script = (
        "import nbformat, nbclient, sys\n"
        f"nb = nbformat.read({FRESH!r}, as_version=4)\n"
        "nbclient.NotebookClient(nb, timeout=300, kernel_name='python3',"
        " resources={'metadata': {'path': '.'}}).execute()\n"
        "bad = [o for c in nb.cells for o in c.get('outputs', [])"
        " if o.get('output_type') == 'error' or o.get('name') == 'stderr']\n"
        "print(len(bad)); sys.exit(1 if bad else 0)\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    done = subprocess.run([sys.executable, "-c", script], cwd=work, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    probe = subprocess.run(
        [sys.executable, "-c", "import selfattention; "
         "print(selfattention.__file__)"], cwd=work, env=env,
        capture_output=True, text=True, check=True)
    assert probe.stdout.startswith(str(site)), probe.stdout
    assert sorted(p.name for p in work.iterdir()) == [FRESH], \
        "the chapter wrote files beside itself"


def test_notebook_7_shows_plain_markdown_and_the_explorers_take_keys(
        notebook7, browser):
    """Notebook 7 (JupyterLab's components in a one-notebook page): no
    markup shows, and once the notebook has run, the arrow keys move the
    first explorer's query as in JupyterLab."""
    path = ROOT / "notebooks" / KEYS
    page = _open(browser, notebook7, KEYS, client="notebook")
    try:
        _assert_markdown_is_plain(page, path)
        _run_all(page, path)
        canvas = page.locator(".sa-fig canvas[tabindex]").first
        caption = page.locator(".sa-fig [aria-live]").first
        before = caption.inner_text()
        canvas.focus()
        page.keyboard.press("ArrowDown")
        assert caption.inner_text() != before, "the arrow key did nothing"
        _assert_no_error_or_warning(page)
    finally:
        page.close()
        _shut_kernels(notebook7)
