"""Links in the built book: launch buttons and assets.

Every notebook page (the chapters and the appendices written as notebooks)
must offer Colab and Binder links, and JupyterHub links when ``_config.yml``
names a hub, that name the repository and branch of ``_config.yml`` and a
notebook that exists in this repository; Live code (Thebe) only where its
cells can run: on a notebook's own page, not on a chapter's further pages,
which continue its first page. No page may load a script, style
sheet, image or frame from another host, so the site works offline.

The pages are parsed from the built book, ``_build/html`` (``make test``
builds it first; ``BOOK_HTML`` names another folder). When that folder is
missing or older than the sources, it is rebuilt here (non-strictly: the
strict build is ``make book``'s job), so the checks never look at a stale site.
tests/test_browser.py loads the same pages in Chromium.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from selfattention_course.pages import chapter_of
from support import module_from_file

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
    the build writes (_ext/book_pages.py), the chapter notebook."""
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
    launch buttons open (``_ext/plain_launch.py``): ``notebooks/<name>``,
    the whole chapter's for each of its pages."""
    prefix = f"{BOOK_PATH}/" if BOOK_PATH else ""
    return f"{prefix}notebooks/{docname.split('/')[1]}.ipynb"


def expected_pages() -> list[str]:
    """Every page the site should have, as paths relative to its root."""
    return [f"{d}.html" for d in toc_documents() + GENERATED]


def _inputs() -> list[Path]:
    files = [ROOT / "_config.yml", ROOT / "_toc.yml", ROOT / "references.bib"]
    files += [s for d in toc_documents() if (s := source_of(d)) is not None]
    files += sorted((ROOT / "_ext").glob("*.py"))
    for folder in ("_templates", "_static"):    # theme overrides
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file())
    return files


def is_stale(site: Path, also: list[Path] = ()) -> bool:
    """Whether the HTML build ``site`` lacks a page or is older than a
    source of the book or a file of ``also``."""
    # _ext/book_assets.py touches .nojekyll at the end of every HTML build
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


def built_pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if not ASSET_DIRS & set(p.relative_to(site).parts))


@pytest.fixture(scope="module")
def site() -> Path:
    return built_site()


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
def launch_services() -> set[str]:
    """The services whose launch links every notebook page must offer:
    Colab, Binder, and JupyterHub when _config.yml names a hub."""
    return {key.split("_")[0] for key in ("colab_url", "binderhub_url",
                                          "jupyterhub_url")
            if LAUNCH.get(key)}


def test_configuration_asks_for_every_launch_service():
    for key in ("colab_url", "binderhub_url"):
        assert LAUNCH.get(key, "").startswith("https://"), key
    # a hub of the book's choosing would admit none of its readers: the
    # JupyterHub button is there only when the configuration names one
    assert not LAUNCH.get("jupyterhub_url") or LAUNCH[
        "jupyterhub_url"].startswith("https://")
    assert LAUNCH.get("thebe") is True
    # Jupyter Book's default branch is "master": name the real one
    assert REPO.get("branch"), "set repository.branch in _config.yml"


def test_every_page_of_the_toc_was_built(site):
    pages = built_pages(site)
    missing = [p for p in expected_pages() if p not in pages]
    assert not missing, f"pages not built: {missing}"
    assert chapter_documents(), "the toc lists no notebook chapter"


@pytest.mark.parametrize("docname", notebook_documents())
def test_launch_links_open_this_chapter_in_this_repository(site, docname):
    tags = parse(site / f"{docname}.html")
    links = launch_links(tags)
    assert set(links) == launch_services(), (
        f"{docname}: launch links found for {sorted(links)}")
    # _ext/plain_launch.py: the launch buttons open the plain notebook
    want = plain_notebook_of(docname)
    for service, notebook in links.items():
        assert notebook == want, f"{service} opens {notebook}, not {want}"
        assert (ROOT / notebook).is_file(), f"{service} link: no {notebook}"
    thebe = [text for attrs, text in tags.scripts
             if attrs.get("type") == "text/x-thebe-config"]
    live = [a for tag, a in tags.tags
            if "initThebe" in a.get("onclick", "")
            or "btn-launch-thebe" in a.get("class", "").split()]
    if chapter_of(docname):
        # a further page continues its chapter's notebook: its cells need
        # the names that earlier pages define, so no Live code is offered
        assert not live and not thebe, f"{docname}: Live code offered"
        return
    assert live, f"{docname}: no Live code button"
    assert len(thebe) == 1, f"{docname}: {len(thebe)} Thebe configurations"
    assert f'repo: "{ORG}/{NAME}"' in thebe[0], f"{docname}: Thebe repository"
    assert f'ref: "{BRANCH}"' in thebe[0], f"{docname}: Thebe branch"


def test_the_launch_link_parser_reads_a_hub_that_the_book_names(
        monkeypatch):
    """The book names no hub; once _config.yml does, its links are read
    (and checked) like Colab's and Binder's."""
    from urllib.parse import urlencode

    monkeypatch.setitem(LAUNCH, "jupyterhub_url", "https://hub.example.edu")
    query = {"repo": REPO["url"], "branch": BRANCH,
             "urlpath": f"{UI}/{NAME}/notebooks/01_definition.ipynb"}
    link = ("https://hub.example.edu/hub/user-redirect/git-pull?"
            + urlencode(query))
    assert notebook_in_launch_link(link) == "notebooks/01_definition.ipynb"
    with pytest.raises(AssertionError):
        notebook_in_launch_link(link.replace(
            urlencode({"branch": BRANCH}), "branch=other"))


def test_live_code_is_dropped_from_every_group_of_buttons():
    plain_launch = module_from_file("_ext/plain_launch.py")
    live = {"type": "javascript", "label": "launch-thebe",
            "javascript": "initThebeSBT()"}
    colab = {"type": "link", "url": "https://colab.research.google.com/x"}
    download = {"type": "link", "url": "../_sources/x.ipynb"}
    buttons = [download, {"type": "group", "buttons": [colab, live]}, live]
    assert plain_launch.without_live_code(buttons) == [
        download, {"type": "group", "buttons": [colab]}]
    assert buttons[1]["buttons"] == [colab, live]       # a copy, not edited


def test_the_launch_link_parser_rejects_another_repository():
    colab = LAUNCH["colab_url"].rstrip("/")
    good = f"{colab}/github/{ORG}/{NAME}/blob/{BRANCH}/chapters/x.ipynb"
    assert notebook_in_launch_link(good) == "chapters/x.ipynb"
    with pytest.raises(AssertionError):
        notebook_in_launch_link(good.replace(f"/{NAME}/", "/elsewhere/"))
    with pytest.raises(AssertionError):
        notebook_in_launch_link(
            good.replace(f"/blob/{BRANCH}/", "/blob/other/"))
    assert notebook_in_launch_link("https://example.org/x.ipynb") is None


def asset_urls(tags: Tags) -> list[str]:
    """URLs a browser fetches by itself when it renders the page."""
    urls = []
    for tag, a in tags.tags:
        if tag in ("script", "img", "iframe", "source", "video", "audio",
                   "embed"):
            urls.append(a.get("src", ""))
        elif tag == "link" and a.get("rel", "").lower() not in (
                "", "canonical"):
            urls.append(a.get("href", ""))
        elif tag == "object":
            urls.append(a.get("data", ""))
    return [u for u in urls if u]


@pytest.mark.parametrize("page", expected_pages())
def test_page_loads_nothing_from_another_host(site, page):
    tags = parse(site / page)
    outside = [u for u in asset_urls(tags)
               if urlsplit(u).scheme in ("http", "https") or u.startswith("//")]
    assert not outside, f"{page} loads assets from other hosts: {outside}"
    text = (site / page).read_text(encoding="utf-8")
    for needle in ("require.js", "require.min.js", "html-manager",
                   "embed-amd", "cdn.jsdelivr.net"):
        assert needle not in text, f"{page} refers to {needle}"
