"""A live Streamlit server on loopback and headless Chromium: start, open, wait, look."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from benchmarks.launch import end_process, free_port, run_args, wait_healthy  # the benchmarks' server, started alike
from benchmarks.timing import CHROMIUM  # the benchmarks' browser (and its flags: tests/conftest.py)

from .repo import ARTIFACTS, ROOT

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def offline(context) -> list[str]:
    """Cut `context` off from every host but loopback, as a machine without a network is: each request elsewhere
    (a font, icon or script CDN, an image in a model's name) is refused and recorded in the list returned."""
    asked: list[str] = []

    def only_loopback(route):
        url = urlparse(route.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOOPBACK:
            asked.append(f"{route.request.frame.url if route.request.frame else '?'}: {route.request.url}")
            route.abort("internetdisconnected")
        else:
            route.continue_()

    context.route("**/*", only_loopback)
    return asked


class Server:
    """A Streamlit server for app.py (or another `script` of the repository) on a free loopback port; stopped by
    its own pid. It shows a page's unexpected error as Streamlit does, traceback and all (ui/failure.py), for the
    tests to find."""

    def __init__(self, script: str = "app.py"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = ARTIFACTS / f"server-{self.port}.log"
        ARTIFACTS.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", *run_args(script, self.port), "--client.showErrorDetails=full"],
            cwd=ROOT, stdout=self.log.open("w"), stderr=subprocess.STDOUT,
        )
        if not wait_healthy(self.url, self.proc, 60, 0.3):
            self.stop()
            raise RuntimeError(f"streamlit did not start; see {self.log}")

    def stop(self):
        end_process(self.proc, 10)

    def tracebacks(self) -> str:
        """The server's log from its first traceback on (a page's error it showed, or one at its exit: Python's
        "Exception ignored in ..."); "" where it holds none."""
        log = self.log.read_text(errors="replace")
        return log[log.find("Traceback"):] if "Traceback" in log else ""


@contextlib.contextmanager
def serving(script: str = "app.py"):
    """A Server for `script` (skipping without Chromium, as the browser tests it serves must), stopped after; a
    traceback in its log fails the test that used it."""
    require_chromium()
    server = Server(script)
    try:
        yield server
    finally:
        server.stop()
    assert not (found := server.tracebacks()), f"the server's log ({server.log}) holds a traceback:\n{found[:3000]}"


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid`, all its threads, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def wait_quiet(pid: int, cpu_s: float = 0.25, timeout_s: float = 90) -> bool:
    """Until process `pid` (a server) uses under `cpu_s` CPU-seconds in a window of ui/warm.DELAY + 1 s; False if
    `timeout_s` passes first. A fresh server warms its other pages once, DELAY after its first page's run: a few
    CPU-seconds and ~100 MB, which a measurement of the server should not count. The window is longer than that
    delay, so one that begins before the warm-up does not end quiet."""
    from ui import warm  # function-local: only the tests that watch a server need streamlit's import here

    window_s = warm.DELAY + 1.0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(window_s)
        if cpu_seconds(pid) - before < cpu_s:
            return True
    return False


def require_chromium():
    if not Path(CHROMIUM).exists():
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but no Chromium at {CHROMIUM}")
        pytest.skip(f"no Chromium at {CHROMIUM} (install Debian's chromium package)")


SCRIPT_IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"  # no script run under way
# Before a page's own scripts (`count_runs`): count the script runs the page sees start (Streamlit marks its app
# element data-test-script-state="running"), so that `settle` waits for the run a click causes however late a busy
# machine's server starts it (a fixed pause of 300 ms let three tests read the page before it, in one CI run).
RUNS_JS = """(() => {
  window.apRuns = 0;
  new MutationObserver((changes) => {
    if (changes.some(c => c.target.getAttribute('data-test-script-state') === 'running')) window.apRuns += 1;
  }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
})();"""
# A run has started since the app was last found idle (or the page counts no runs)
RUN_STARTED_JS = "() => window.apRuns === undefined || window.apRuns > (window.apIdleAt ?? 0)"
RUN_START_MS = 2000  # after which `settle` takes it that the click causes no run


def count_runs(context) -> None:
    """Have every page of `context` count its script runs, for `settle`."""
    context.add_init_script(RUNS_JS)


def wait_for_app(pg, timeout: float = 60_000) -> None:
    """Wait until the Streamlit script run has finished and nothing is left running."""
    pg.wait_for_selector(SCRIPT_IDLE, timeout=timeout)
    pg.wait_for_timeout(300)
    pg.wait_for_selector(SCRIPT_IDLE, timeout=timeout)
    pg.evaluate("() => { window.apIdleAt = window.apRuns; }")


def query(pg) -> dict[str, str]:
    """The page's address's query parameters, {name: value} (a repeated one's last value)."""
    return {name: values[-1] for name, values in parse_qs(urlparse(pg.url).query).items()}


def settle(pg, pause_ms: int = 300, timeout: float = 60_000) -> None:
    """After a click: give the browser `pause_ms` to send it, wait for the run it causes to start (on a page that
    counts runs; up to RUN_START_MS, for a click that causes none), then for the app."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    pg.wait_for_timeout(pause_ms)
    with contextlib.suppress(PlaywrightTimeout):
        pg.wait_for_function(RUN_STARTED_JS, timeout=RUN_START_MS)
    wait_for_app(pg, timeout)


def open_app_page(pg, url: str, timeout: float = 120_000) -> None:
    """Open `url`, wait for the run to finish, and check Streamlit raised no "Page not found" notice (a fresh
    server's first request used to: see ui/legacy_entry.py) and that app.py's sidebar rendered (in either language)."""
    pg.goto(url)
    wait_for_app(pg, timeout)
    dialogs = pg.get_by_role("dialog")
    assert not dialogs.count(), dialogs.first.inner_text()
    assert pg.locator("[data-testid=stSidebar]").get_by_text(re.compile("^(Active model|当前模型)$")).is_visible()


def screenshot(pg, name: str, whole: bool | None = None) -> Path:
    """A PNG in test-artifacts/ to look at: the first screen, as the reader sees it, or with `whole` (default: the
    WHOLE_PAGES=1 environment variable) the whole page. Streamlit scrolls inside its main area, so a whole page
    grows the viewport to the content first, and every chart redraws at the new size and again after (1-2 s of
    CPU a shot: a tenth of the browser tests' time, so only when asked for)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if not (whole if whole is not None else os.environ.get("WHOLE_PAGES") == "1"):
        pg.screenshot(path=str(path))
        return path
    viewport = pg.viewport_size
    height = pg.evaluate("(document.querySelector('[data-testid=stMain]') || document.body).scrollHeight")
    pg.set_viewport_size({"width": viewport["width"], "height": max(viewport["height"], height + 40)})
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(path), full_page=True)
    pg.set_viewport_size(viewport)
    return path


def choose(pg, opener, option: str, tries: int = 5) -> None:
    """Pick `option` in the list that clicking `opener` opens (a selectbox or multiselect). A rerun that lands
    between the opening and the pick closes the list (seen in CI under load): then open it again. A click on a
    box that kept its focus does not open it; the arrow key does."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        opener.click()
        try:
            pg.get_by_role("listbox").first.wait_for(timeout=1_000)
        except PlaywrightTimeout:
            pg.keyboard.press("ArrowDown")
        try:
            pg.get_by_role("option", name=option, exact=True).click(timeout=5_000)
            return
        except PlaywrightTimeout:
            pg.keyboard.press("Escape")
    raise AssertionError(f"could not choose {option!r}")


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
    count_runs(context)
    try:
        fresh = context.new_page()
        fresh.set_default_timeout(30_000)
        open_app_page(fresh, link.replace(made_on, other.url))
        yield fresh
    finally:
        context.close()
        other.stop()
