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
tests/e2e/test_browser.py loads the same pages in Chromium.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from selfattention_book.pages import chapter_of
from site_support import (BRANCH, LAUNCH, NAME, ORG, REPO, ROOT, Tags,
                          built_pages, built_site, chapter_documents,
                          expected_pages, launch_links, notebook_documents,
                          notebook_in_launch_link, parse, plain_notebook_of,
                          UI)


@pytest.fixture(scope="module")
def site() -> Path:
    return built_site()


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
    # selfattention_book.plain_launch: the launch buttons open the plain
    # notebook
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
    from selfattention_book import plain_launch

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
