"""selfattention_book.book_assets: plain tab titles, and MathJax 4 fetched
only as pinned."""

import io
import tarfile

import pytest

from selfattention_book import book_assets as assets


@pytest.mark.parametrize("title, plain", [
    (r"Scaling by \(\sqrt{d_k}\)", "Scaling by √dₖ"),
    (r"Scaling by $\sqrt{d_k}$", "Scaling by √dₖ"),
    (r'<span class="math">\(d_{k}\)</span> and \(d_v\)', "dₖ and dᵥ"),
    (r"\(M \times M\) windows", "M × M windows"),
    (r"\(W_{Q}\)", "W_Q"),                 # no subscript capital: kept
    ("Windows &amp; shifted windows", "Windows &amp; shifted windows"),
])
def test_titles_lose_their_tex(title, plain):
    assert assets.plain_title(title) == plain


def tarball(files: dict) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Served:
    """urlopen's stand-in: the bytes of each URL."""

    def __init__(self, by_url):
        self.by_url = by_url

    def __call__(self, url, timeout=None):
        data = self.by_url[url]

        class Response(io.BytesIO):
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False
        return Response(data)


def test_mathjax_is_unpacked_only_when_its_integrity_holds(tmp_path,
                                                           monkeypatch):
    main = tarball({"package/package.json": b'{"version": "4"}',
                    "package/tex-mml-chtml.js": b"//",
                    "package/../escape.js": b"x"})
    font = tarball({"package/chtml/woff2/a.woff2": b"w"})
    packages = {"mathjax": ("u1", assets._integrity(main)),
                "mathjax-newcm-font": ("u2", assets._integrity(font))}
    monkeypatch.setattr(assets, "MATHJAX_PACKAGES", packages)
    monkeypatch.setattr("urllib.request.urlopen",
                        Served({"u1": main, "u2": font}))
    out = assets.mathjax_source(tmp_path / "mj")
    assert (out / "tex-mml-chtml.js").is_file()
    assert (out / "fonts" / "mathjax-newcm-font" / "chtml" / "woff2"
            / "a.woff2").read_bytes() == b"w"
    assert not (tmp_path / "escape.js").exists()
    # a tampered tarball is refused, and nothing is left half unpacked
    monkeypatch.setattr("urllib.request.urlopen",
                        Served({"u1": main + b"!", "u2": font}))
    with pytest.raises(RuntimeError):
        assets.mathjax_source(tmp_path / "other")
    assert not (tmp_path / "other" / ".complete").exists()
