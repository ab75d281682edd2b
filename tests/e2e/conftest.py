"""Fixtures of the tests that open the built site in Chromium
(test_browser.py, test_layout.py): the site, served from 127.0.0.1, and
``visit``, which opens one of its pages (:class:`browser_support.Visit`)."""

import functools
import http.server
import threading
from pathlib import Path

import pytest

from browser_support import QuietHandler, Visit
from site_support import built_site


@pytest.fixture(scope="module")
def site() -> Path:
    return built_site()


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def visit(browser, server):
    opened = []

    def open_page(page_path: str) -> Visit:
        opened.append(Visit(browser, server, page_path))
        return opened[-1]

    yield open_page
    for v in opened:
        v.close()
