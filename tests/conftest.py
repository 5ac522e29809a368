"""Shared fixtures: AppTest runs of the app, a live Streamlit server on loopback, headless Chromium."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REVERSE = ROOT / "assets" / "checkpoints" / "reverse.safetensors"
needs_reverse = pytest.mark.skipif(not REVERSE.is_file(), reason=f"the shipped model {REVERSE} is missing")
ARTIFACTS = ROOT / "test-artifacts"
# Models trained or uploaded by the tests (and the servers they start) go to a store of their own, not the
# repository's .model_store/; the app reads this when it is first imported.
os.environ.setdefault("AP_MODEL_STORE", tempfile.mkdtemp(prefix="ap-test-store-"))
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class Payload:
    """Unpickling this creates the file `marker`: the proof that a loader ran code from a hostile file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


SUITES = ("unit", "app", "browser")  # markers declared in pyproject.toml; `-m "not browser"` is the fast run


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything
def pytest_collection_modifyitems(config, items):
    """Mark each test by its file name (browser: test_browser_*; app: the AppTest page tests; unit: the rest),
    unless it already carries one of the three (e.g. the @pytest.mark.browser test in test_app_frame.py)."""
    for item in items:
        if any(item.get_closest_marker(name) for name in SUITES):
            continue
        filename = item.path.name
        if filename.startswith("test_browser_"):
            item.add_marker(pytest.mark.browser)
        elif filename.startswith(("test_page_", "test_app_frame", "test_pages_")):
            item.add_marker(pytest.mark.app)
        else:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """The app and the trainer run torch on one thread (ui/runtime.py); so do the tests. On a busy
    2-core machine the model tests ran 2x faster and the beam tests 100x faster than with two threads."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def bundle():
    """The shipped reverse model, loaded independently of the app (test files may override this)."""
    from transformer.store.checkpoints import load_bundle

    return load_bundle(REVERSE)


@pytest.fixture
def clean_caches():
    """Streamlit's caches and the app's decode cache outlive an AppTest instance: start and end each app test
    with them empty."""
    import streamlit as st

    from ui import decodes

    for clear in (st.cache_data.clear, st.cache_resource.clear, decodes.clear):
        clear()
    yield
    for clear in (st.cache_data.clear, st.cache_resource.clear, decodes.clear):
        clear()


@pytest.fixture
def app(clean_caches):
    """`app(page)` -> an AppTest of app.py already run on `page` (a path like "pages/explore/decode.py")."""
    from streamlit.testing.v1 import AppTest

    def run(page: str | None = None):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.run()
        if page:
            at.switch_page(page)
            at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A Streamlit server for app.py on a free loopback port; stopped by its own pid."""

    def __init__(self):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = ARTIFACTS / f"server-{self.port}.log"
        ARTIFACTS.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless=true",
             "--server.address=127.0.0.1", f"--server.port={self.port}", "--browser.gatherUsageStats=false"],
            cwd=ROOT, stdout=self.log.open("w"), stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2).read() == b"ok":
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"streamlit did not start; see {self.log}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def require_image_export() -> None:
    """Skip a test of server-side PNG/SVG export where it is unavailable (no Chromium for kaleido); under
    REQUIRE_BROWSER=1 (CI) fail instead."""
    from transformer.charts.export import image_export_available

    ok, reason = image_export_available()
    if not ok:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but server-side export is unavailable: {reason}")
        pytest.skip(reason)


def _require_chromium():
    if not Path(CHROMIUM).exists():
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but no Chromium at {CHROMIUM}")
        pytest.skip(f"no Chromium at {CHROMIUM} (install Debian's chromium package)")


@pytest.fixture
def fresh_server():
    """A new server per test: its first request is whatever the test opens."""
    _require_chromium()
    server = Server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _browser():
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(_browser):
    """A fresh browser page (1400x900) with downloads accepted."""
    context = _browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


SCRIPT_IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"  # no script run under way


def wait_for_app(pg, timeout: float = 60_000) -> None:
    """Wait until the Streamlit script run has finished and nothing is left running."""
    pg.wait_for_selector(SCRIPT_IDLE, timeout=timeout)
    pg.wait_for_timeout(300)
    pg.wait_for_selector(SCRIPT_IDLE, timeout=timeout)


def settle(pg, pause_ms: int = 300, timeout: float = 60_000) -> None:
    """After a click: give the browser `pause_ms` to send it and start the run, then wait for the app."""
    pg.wait_for_timeout(pause_ms)
    wait_for_app(pg, timeout)


def open_app_page(pg, url: str, timeout: float = 120_000) -> None:
    """Open `url`, wait for the run to finish, and check Streamlit raised no "Page not found" notice (a fresh
    server's first request used to: see ui/legacy_entry.py) and that app.py's sidebar rendered."""
    pg.goto(url)
    wait_for_app(pg, timeout)
    dialogs = pg.get_by_role("dialog")
    assert not dialogs.count(), dialogs.first.inner_text()
    assert pg.locator("[data-testid=stSidebar]").get_by_text("Active model").is_visible()


def screenshot(pg, name: str) -> Path:
    """The whole page: Streamlit scrolls inside its main area, so grow the viewport to the content first."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    viewport = pg.viewport_size
    height = pg.evaluate("(document.querySelector('[data-testid=stMain]') || document.body).scrollHeight")
    pg.set_viewport_size({"width": viewport["width"], "height": max(viewport["height"], height + 40)})
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(path), full_page=True)
    pg.set_viewport_size(viewport)
    return path


def open_link(page: str, query: dict[str, str]):
    """An AppTest of `page` (a script path like "pages/explore/decode.py") opened by a link with `query` as
    its parameters, as a new session opens it."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(page)
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def read_settled(pg, read, expected, timeout_s: float = 15.0):
    """`read(pg)` once it equals `expected`, or the last reading when the time is up. On a page just opened
    a number box may show its minimum for a moment before its value arrives (seen in CI under load), so a
    test comparing what a page shows reads until it has settled."""
    deadline = time.monotonic() + timeout_s
    value = read(pg)
    while value != expected and time.monotonic() < deadline:
        pg.wait_for_timeout(200)
        value = read(pg)
    return value


@contextlib.contextmanager
def on_a_fresh_server(browser, link: str, made_on: str):
    """Open `link` (copied from the server at `made_on`) in a new browser context on a second, freshly started
    server, where nothing of the first session exists; yields the page once the app has run."""
    other = Server()
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        fresh = context.new_page()
        fresh.set_default_timeout(30_000)
        open_app_page(fresh, link.replace(made_on, other.url))
        yield fresh
    finally:
        context.close()
        other.stop()
