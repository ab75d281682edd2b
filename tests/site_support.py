"""The built book, as the tests of its pages and links read it.

Which pages ``_toc.yml`` promises and which file each is made from,
:func:`built_site` (``_build/html``, rebuilt when a source is newer), the
course edition's :func:`built_course_site`, and a parser of a page's tags,
links and launch links. Used by tests/book/test_launch_links.py,
test_plain_notebooks.py, test_course_edition.py and tests/e2e/test_browser.py,
test_layout.py, test_pdf.py.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

from selfattention_book.pages import chapter_of
from selfattention_book.plain import BookIndex

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO = CONFIG["repository"]
LAUNCH = CONFIG["launch_buttons"]
ORG, NAME = urlsplit(REPO["url"]).path.strip("/").split("/")[:2]
BRANCH = REPO["branch"]
BOOK_PATH = (REPO.get("path_to_book") or "").strip("/")
UI = {"classic": "tree", "jupyterlab": "lab/tree"}[LAUNCH["notebook_interface"]]
# Pages Sphinx writes besides the ones in _toc.yml.
GENERATED = ["index", "genindex", "search", "py-modindex"]
ASSET_DIRS = {"_static", "_sources", "_images", "_vendor"}
#: The book's chapters, appendices and labels, as the plain notebooks
#: number them.
INDEX = BookIndex(ROOT)
# What MyST source looks like when a client shows it as text.
RAW = re.compile(r"\{(numref|cite|eq|ref|doc|py:\w+)[^}]*\}`|^:{3,}|^`{3,}\{"
                 r"|^\([\w.:-]+\)=|^:(label|class|name):|\$\$\s*\([\w-]+\)",
                 re.M)


# ------------------------------------------------------------ the built site
def _files(entries) -> list[str]:
    """The files of toc entries and of their sections, in reading order."""
    return [name for entry in entries
            for name in [entry["file"], *_files(entry.get("sections", []))]]


def toc_documents() -> list[str]:
    """Document names of _toc.yml, in reading order (``chapters/01_x``,
    then its further pages ``chapters/01_x/practice``, ...)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"]]
    for part in toc.get("parts", []):
        names += _files(part.get("chapters", []))
    return names


def source_of(docname: str) -> Path | None:
    """The file a page is made from; for a chapter's further page, which
    the build writes (selfattention_book.book_pages), the chapter notebook."""
    docname = chapter_of(docname) or docname
    for ext in (".ipynb", ".md"):
        path = ROOT / BOOK_PATH / f"{docname}{ext}"
        if path.exists():
            return path
    return None


def notebook_documents() -> list[str]:
    """The toc's notebook pages: the ones with launch buttons."""
    return [d for d in toc_documents()
            if (s := source_of(d)) is not None and s.suffix == ".ipynb"]


def chapter_documents() -> list[str]:
    """The notebook pages of the toc's numbered parts: each chapter's page,
    then its further pages."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbered = set(_files(entry for part in toc.get("parts", [])
                          if part.get("numbered")
                          for entry in part["chapters"]))
    return [d for d in notebook_documents() if d in numbered]


def plain_notebook_of(docname: str) -> str:
    """The repository path of the plain notebook that a notebook page's
    launch buttons open (``selfattention_book.plain_launch``):
    ``notebooks/<name>``, the whole chapter's for each of its pages."""
    prefix = f"{BOOK_PATH}/" if BOOK_PATH else ""
    return f"{prefix}notebooks/{docname.split('/')[1]}.ipynb"


def expected_pages() -> list[str]:
    """Every page the site should have, as paths relative to its root."""
    return [f"{d}.html" for d in toc_documents() + GENERATED]


def _inputs() -> list[Path]:
    files = [ROOT / "_config.yml", ROOT / "_toc.yml", ROOT / "references.bib"]
    files += [s for d in toc_documents() if (s := source_of(d)) is not None]
    files += sorted((ROOT / "lib" / "selfattention_book").glob("*.py"))
    for folder in ("_templates", "_static"):    # theme overrides
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file())
    return files


def is_stale(site: Path, also: list[Path] = ()) -> bool:
    """Whether the HTML build ``site`` lacks a page or is older than a
    source of the book or a file of ``also``."""
    # selfattention_book.book_assets touches .nojekyll at the end of every
    # HTML build
    stamp = site / ".nojekyll"
    if not (site / "index.html").exists() or not stamp.exists():
        return True
    if any(not (site / page).exists() for page in expected_pages()):
        return True
    built = stamp.stat().st_mtime
    return any(p.stat().st_mtime > built for p in _inputs() + list(also))


def built_site() -> Path:
    """The built HTML book; (re)built here if missing or out of date."""
    if os.environ.get("BOOK_HTML"):
        site = Path(os.environ["BOOK_HTML"]).resolve()
        assert (site / "index.html").exists(), (
            f"BOOK_HTML={site} has no index.html")
        return site
    site = ROOT / "_build" / "html"
    site.parent.mkdir(exist_ok=True)
    with open(site.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time (pytest -n 2)
        if is_stale(site):
            jb = Path(sys.executable).parent / "jupyter-book"
            done = subprocess.run([str(jb), "build", str(ROOT), "-q"],
                                  capture_output=True, text=True)
            assert (site / "index.html").exists(), (
                "the book did not build:\n" + done.stdout[-3000:]
                + done.stderr[-3000:])
    return site


#: The Makefile's COURSE_BUILD: the course edition (make book
#: SOLUTIONS=hidden) and the student notebooks its pages offer.
COURSE = ROOT / "_build" / "course"


def built_course_site() -> Path:
    """The course edition's site, ``_build/course/_build/html``; built
    here afresh if missing or older than a source of the book or a module
    of the course package (an incremental build would keep pages that only
    a change of the course package makes out of date)."""
    import shutil

    from selfattention_course import assign

    site = COURSE / "_build" / "html"
    site.parent.parent.parent.mkdir(exist_ok=True)
    with open(ROOT / "_build" / ".course-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_stale(site, sorted(Path(assign.__file__).parent.glob("*.py"))):
            shutil.rmtree(COURSE, ignore_errors=True)
            made = COURSE / "assignments"    # as make book SOLUTIONS=hidden
            assign.build(sorted((ROOT / "chapters").glob("*.ipynb")), made)
            env = dict(os.environ, SELFATTENTION_SOLUTIONS="hidden",
                       SELFATTENTION_ASSIGNMENTS=str(made))
            jb = Path(sys.executable).parent / "jupyter-book"
            done = subprocess.run(
                [str(jb), "build", str(ROOT), "-W", "-n", "--keep-going",
                 "--path-output", str(COURSE)], env=env,
                capture_output=True, text=True)
            assert done.returncode == 0, (done.stdout[-3000:]
                                          + done.stderr[-3000:])
    return site


def built_pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if not ASSET_DIRS & set(p.relative_to(site).parts))




# ------------------------------------------------------------ parsing
class Tags(HTMLParser):
    """Collect (tag, attributes) of every start tag, and inline script text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append((self.tags[-1][1], ""))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


def parse(path: Path) -> Tags:
    tags = Tags()
    tags.feed(path.read_text(encoding="utf-8"))
    return tags


def hrefs(tags: Tags) -> list[str]:
    return [a["href"] for tag, a in tags.tags if tag == "a" and "href" in a]


def notebook_in_launch_link(href: str) -> str | None:
    """The repository path of the notebook a launch link opens.

    Returns None if ``href`` is not a launch link; raises AssertionError if
    it is one but names another repository or branch.
    """
    url = urlsplit(href)
    base = f"{url.scheme}://{url.netloc}"
    query = parse_qs(url.query)
    if base == LAUNCH["colab_url"].rstrip("/"):
        prefix = f"/github/{ORG}/{NAME}/blob/{BRANCH}/"
        assert url.path.startswith(prefix), f"Colab link {href} is not {prefix}"
        return url.path[len(prefix):]
    if base == LAUNCH["binderhub_url"].rstrip("/"):
        assert url.path == f"/v2/gh/{ORG}/{NAME}/{BRANCH}", (
            f"Binder link {href} is not for {ORG}/{NAME}@{BRANCH}")
        (urlpath,) = query["urlpath"]
        assert urlpath.startswith(f"{UI}/"), href
        return urlpath[len(UI) + 1:]
    if base == LAUNCH.get("jupyterhub_url", "").rstrip("/"):
        assert url.path == "/hub/user-redirect/git-pull", href
        assert query["repo"] == [REPO["url"]], f"JupyterHub link {href}: repo"
        assert query["branch"] == [BRANCH], f"JupyterHub link {href}: branch"
        (urlpath,) = query["urlpath"]
        prefix = f"{UI}/{NAME}/"  # nbgitpuller clones into a folder NAME
        assert urlpath.startswith(prefix), href
        return urlpath[len(prefix):]
    return None


def launch_links(tags: Tags) -> dict[str, str]:
    """{service: notebook path} of the launch links on one page."""
    found = {}
    for href in hrefs(tags):
        notebook = notebook_in_launch_link(href)
        if notebook is not None:
            host = urlsplit(href).netloc
            service = {urlsplit(LAUNCH[k]).netloc: k.split("_")[0]
                       for k in ("colab_url", "binderhub_url", "jupyterhub_url")
                       if LAUNCH.get(k)}[host]
            found[service] = notebook
    return found


# ------------------------------------------------------------ tests
