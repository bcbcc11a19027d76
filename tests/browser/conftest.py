"""Real-browser tests: a headless Chromium driven by Playwright (Python), no internet needed.

What they need, beyond the course's own dependencies:

* Debian's ``chromium`` (or set ``COURSE_CHROMIUM`` to another Chromium binary). Playwright's own browser download
  (``playwright install``) is *not* used.
* the ``playwright`` Python package (in the ``dev`` extra);
* for the slide tests, the npm packages of ``slides/``.

``make browser-deps`` installs all of them. Without them the tests are skipped, and one line at the end of the run
says why and names ``make browser-deps``; in CI (``CI`` set) a missing piece is an error instead: CI runs
``make browser-deps`` first (``.ci/run``), so a skip there would hide a broken setup.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "slides" / "screenshots"

# Flags that work in containers and on CI machines: no sandbox (root), no GPU, and no background traffic.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


# Chinese text must be drawn with real glyphs. Without a font that has them, Chromium draws the same empty box
# (.notdef) for every character: draw several different characters from the page, with the element's own font,
# on a canvas; real glyphs give different, non-empty bitmaps, boxes give identical ones.
GLYPHS = """(selector) => {
  const el = document.querySelector(selector);
  const style = getComputedStyle(el);
  const chars = [...new Set([...el.textContent].filter(c => /[\\u4e00-\\u9fff]/.test(c)))].slice(0, 8);
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 64;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const bitmaps = chars.map(c => {
    ctx.clearRect(0, 0, 64, 64);
    ctx.font = `${style.fontStyle} ${style.fontWeight} 48px ${style.fontFamily}`;
    ctx.fillStyle = '#000';
    ctx.textBaseline = 'top';
    ctx.fillText(c, 4, 4);
    const data = ctx.getImageData(0, 0, 64, 64).data;
    let ink = 0, key = '';
    for (let i = 3; i < data.length; i += 4) { if (data[i] > 127) { ink++; key += (i >> 2).toString(36) + ','; } }
    return {char: c, ink: ink, key: key};
  });
  return {
    family: style.fontFamily,
    chars: chars.join(''),
    distinct: new Set(bitmaps.map(b => b.key)).size,
    empty: bitmaps.filter(b => b.ink === 0).map(b => b.char).join(''),
  };
}"""


FIX = "run `make browser-deps`"


def missing(reason: str):
    """Skip locally (the run's summary says so once, see below); fail in CI, where make browser-deps installed it."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason} (CI is set: .ci/run runs make browser-deps, so this is a broken setup)", pytrace=False)
    pytest.skip(f"{reason}: {FIX}")


def pytest_terminal_summary(terminalreporter):
    """One line for every browser test skipped for a missing piece, instead of one per test (shown only with -rs)."""
    reasons = [report.longrepr[2].removeprefix("Skipped: ") for report in terminalreporter.stats.get("skipped", [])
               if isinstance(report.longrepr, tuple) and report.longrepr[2].endswith(FIX)]
    if reasons:
        why = "; ".join(dict.fromkeys(r.removesuffix(f": {FIX}") for r in reasons))
        terminalreporter.write_line(f"tests/browser: {len(reasons)} browser tests skipped ({why}): {FIX} (chromium, "
                                    "an emoji font, slides/node_modules; or set COURSE_CHROMIUM), then make test again",
                                    yellow=True)


@pytest.fixture(scope="session")
def require():
    """``require(reason)``: skip the test locally, fail it in CI (see :func:`missing`)."""
    return missing


@functools.cache
def chromium_path() -> str | None:
    for candidate in (os.environ.get("COURSE_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


@pytest.fixture(scope="session")
def playwright_api():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the playwright Python package is not installed")
    if chromium_path() is None:
        missing("no Chromium found")
    with sync_playwright() as api:
        yield api


def launch(api, env: dict | None = None):
    """A fresh headless Chromium (Playwright gives it a new, empty --user-data-dir)."""
    return api.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True,
                               env=env, timeout=60_000)


@pytest.fixture(scope="session")
def browser(playwright_api):
    browser = launch(playwright_api)
    yield browser
    browser.close()


@pytest.fixture
def launch_browser(playwright_api):
    """``launch_browser(env=...)``: one more Chromium, e.g. with another font configuration; closed afterwards."""
    started = []

    def make(env: dict | None = None):
        started.append(launch(playwright_api, env))
        return started[-1]

    yield make
    for browser in started:
        browser.close()


class Network:
    """Records what a page asks for: every non-local request is aborted and kept in ``blocked``;
    failed local requests (missing files, HTTP errors) are kept in ``failed``."""

    def __init__(self, context, allowed_prefixes=()):
        # On the context, not the page: pop-ups (reveal's speaker view) are watched too.
        self.blocked: list[str] = []
        self.failed: list[str] = []
        self.allowed = tuple(allowed_prefixes)
        context.route("**/*", self._route)
        context.on("requestfailed", self._failed)
        context.on("response", self._response)

    def _local(self, url: str) -> bool:
        return url.startswith(LOCAL_SCHEMES) or (bool(self.allowed) and url.startswith(self.allowed))

    def _route(self, route):
        url = route.request.url
        if self._local(url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("internetdisconnected")

    def _failed(self, request):
        if self._local(request.url):
            self.failed.append(f"{request.url} ({request.failure})")

    def _response(self, response):
        if response.status >= 400 and self._local(response.url):
            self.failed.append(f"{response.url} (HTTP {response.status})")


@pytest.fixture
def new_page(browser):
    """``new_page(viewport=..., allowed=(prefix, ...))`` -> (page, network, page_errors); closed afterwards."""
    contexts = []

    def make(viewport=(1280, 800), allowed=()):
        context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        contexts.append(context)
        network = Network(context, allowed)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        return page, network, errors

    yield make
    for context in contexts:
        context.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def serve_folder():
    """``with serve_folder(path) as base_url:`` a local web server for a folder."""
    return serve


@contextlib.contextmanager
def serve(folder: Path):
    """Serve ``folder`` on 127.0.0.1 (a free port) for the duration; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
