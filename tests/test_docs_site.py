"""The documentation site builds strict and renders in a browser (issue 32).

``mkdocs build --strict`` fails on a broken link or anchor, a page missing from the nav and an
API entry mkdocstrings cannot resolve; CI runs it (this test, and the same line in .ci/run).
The built site is opened in headless Chromium (the system browser, as the viewer's browser
test does): the index and an API page render, and the search index answers a query.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from doc_examples import ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    return out


def test_the_site_builds_strict_with_every_page(site):
    """Every docs page became a page of the site, the API reference included."""
    pages = sorted(p.relative_to(ROOT / "docs") for p in (ROOT / "docs").rglob("*.md"))
    for page in pages:
        html = (
            (site / page.with_suffix("")).joinpath("index.html")
            if page.name != "index.md"
            else site / page.parent / "index.html"
        )
        assert html.is_file(), page
    api = (site / "reference" / "pushbench" / "index.html").read_text()
    for name in ("make", "make_vec", "list_tasks"):
        assert f'id="pushbench.{name}"' in api, name
    index = json.loads((site / "search" / "search_index.json").read_text())
    assert any("make_vec" in doc["text"] or "make_vec" in doc["title"] for doc in index["docs"])


def test_readme_links_resolve():
    """README is outside the site (mkdocs does not check it): its relative links must exist."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((?!https?:)([^)#]+)(?:#[^)]*)?\)", text)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == []


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request log in the test output
        pass


@pytest.mark.slow
def test_the_built_site_in_chromium(site):
    from pushbench.viewer.browser import chromium_path, headless_chromium

    if os.environ.get("PUSHBENCH_REQUIRE_BROWSER") != "1":
        if chromium_path() is None:
            pytest.skip("no Chromium executable (apt-get install -y chromium)")
        pytest.importorskip("playwright", reason="pip install 'pushbench[viewer]'")
    handler = functools.partial(_Quiet, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    errors: list[str] = []
    try:
        with headless_chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/")
            assert "PushBench" in page.title()
            assert page.locator("article h1").first.inner_text().startswith("PushBench")
            assert page.locator("nav.md-nav a", has_text="Metrics").count() >= 1
            page.goto(f"{base}/reference/pushbench/")
            heading = page.locator("[id='pushbench.make_vec']")
            assert heading.count() == 1 and "make_vec" in heading.inner_text()
            # the search runs in a web worker over search_index.json
            page.keyboard.press("/")  # Material's search shortcut opens and focuses the box
            page.fill("input.md-search__input", "make_vec")
            page.wait_for_selector(".md-search-result__item", timeout=30_000)
            assert page.locator(".md-search-result__item").count() >= 1
    finally:
        server.shutdown()
    assert errors == []


def test_the_viewer_screenshots_come_from_the_browser_test():
    """Every viewer picture the docs show is one tests/test_viewer_browser.py writes (with
    PUSHBENCH_DOCS_SCREENSHOTS=1) and has that test's viewport size, so none is hand-made."""
    import struct

    browser_test = (ROOT / "tests" / "test_viewer_browser.py").read_text()
    written = set(re.findall(r'_for_docs\(page, "([\w.]+)"\)', browser_test))
    width, height = map(
        int, re.search(r'viewport=\{"width": (\d+), "height": (\d+)\}', browser_test).groups()
    )
    shown = {
        m
        for p in (ROOT / "docs").rglob("*.md")
        for m in re.findall(r"\]\((?:\.\./)?(viewer_[\w]+\.png)\)", p.read_text())
    }
    assert shown and shown <= written, shown - written
    for name in shown:
        head = (ROOT / "docs" / name).read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n", name
        assert struct.unpack(">II", head[16:24]) == (width, height), name
