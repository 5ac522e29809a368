"""Helpers of the "serving a class" benchmarks (serve_train_clicks.py, serve_decode_latency.py, serve_sessions.py):
a Streamlit server of this app on a free loopback port, started and stopped by its own pid; what /proc says
about it (RSS, child processes); Chromium through Playwright (executable_path, never a download); the Train
page's progress as the browser shows it; and the in-page timing of a click until its charts are repainted.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from launch import end_process, free_port, run_args, wait_healthy
from timing import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[1]
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
CHART = ".js-plotly-plot .main-svg"  # a plotly chart drawn (its first SVG layer is in the page)
# Before the page's own scripts: the wall-clock time (ms since the epoch) of the frame after the first element that
# matches a selector appears, painted. Playwright hears of a new visitor's chart 0-0.5 s later (0.3-0.4 s in the
# median on a Zen 4, 2026-11-29), when the page's main thread goes on to the preload's later chunks (ui/preload.py).
PAINTED_JS = """(() => {
  const watch = new MutationObserver(() => {
    if (!document.querySelector(%s)) return;
    watch.disconnect();
    requestAnimationFrame(() => setTimeout(() => {
      window.__apFirstPainted = performance.timeOrigin + performance.now();
    }));
  });
  watch.observe(document, {childList: true, subtree: true});
})();"""
# A training run that outlasts any benchmark window (a link fills the Train page with it; Start trains it).
LONG_RUN = "/train?v=1&steps=100000&stop_early=0"
# In-page: click the decode page's step player's `name` button (first, prev, next, last), then wait until every
# chart of the player shows the new step (ui/step_player.js stamps data-ap-step once the step's graph is drawn and
# shown; the chart elements stay, not replaced) and one more animation frame has run (the paint), checked every frame;
# then until the script run the move causes (the player tells the server afterwards) has ended: the app's script
# state seen to run and stop, or, where React folded both into one render (a browser busy drawing a chart ahead
# keeps it from rendering the run's start), the address bar holding the step the run writes, the app idle. Milliseconds
# from the click: `ms` to the charts painted, `heard_ms` to the server's run over; `drawn_ahead`: whether every
# chart had drawn the new step before the click (in idle time: the click only swapped graphs). When the button is
# disabled nothing is clicked and `disabled` is true; when the charts are not all drawn within 30 s, `repainted` is
# false.
PLAYER_STEP_JS = """async (name) => {
  const app = document.querySelector('[data-testid=stApp]');
  const player = document.querySelector('[data-ap-player]');
  const button = player && player.querySelector(`button[data-go=${name}]`);
  if (!button || button.disabled) return {ms: null, heard_ms: null, repainted: false, disabled: true};
  const now = Number(player.dataset.step), steps = Number(player.querySelector('input').max);
  const goal = {first: 1, prev: now - 1, next: now + 1, last: steps}[name];
  const ahead = [...document.querySelectorAll('[data-ap-chart]')].every(
    c => c.querySelector(`:scope > [data-step='${goal}']`));
  let ran = false, done = null;
  const watch = new MutationObserver(records => {  // a run may start and end before the observer is called
    const state = app.getAttribute('data-test-script-state');
    if (state !== 'notRunning' || records.some(r => r.oldValue && r.oldValue !== 'notRunning')) ran = true;
    if (ran && state === 'notRunning' && done === null) done = performance.now();
  });
  watch.observe(app, {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state']});
  const frame = () => new Promise(r => requestAnimationFrame(() => r()));
  const charts = [...document.querySelectorAll('[data-ap-chart]')];
  const t0 = performance.now();
  button.click();
  const target = player.dataset.step;  // the player moves within the click
  let painted = null;
  while (performance.now() - t0 < 30000) {
    if (painted === null && charts.every(c => c.dataset.apStep === target)) {
      await frame();
      painted = performance.now();
    } else {
      await frame();
    }
    if (done === null && app.getAttribute('data-test-script-state') === 'notRunning' &&
        new URLSearchParams(location.search).get('step') === target) done = performance.now();
    if (painted !== null && done !== null) break;
  }
  watch.disconnect();
  return {ms: painted === null ? null : painted - t0, heard_ms: done === null ? null : done - t0,
          repainted: painted !== null, disabled: false, drawn_ahead: ahead};
}"""



# How often a starting server's health is asked for: the cold start opens the browser on the first answer, and a
# 0.3 s poll added 0-0.3 s (0.15-0.2 s measured) of waiting to every cold start's figure that no user sees.
HEALTH_POLL_SECONDS = 0.02


class AppServer:
    """`streamlit run app.py` (or `script`) on 127.0.0.1 at a free port, with `env` added to its environment (and
    a model store of its own); stopped by its pid. With `timed`, every script or fragment run of app.py is timed
    (wall and CPU: benchmarks/step_click.py's server) and script_runs() reads them. With `cpus`, the server and
    the workers it starts run on those CPUs only."""

    def __init__(self, env: dict[str, str] | None = None, timed: bool = False, cpus: set[int] | None = None,
                 script: str = "app.py"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder = Path(tempfile.mkdtemp(prefix="ap-bench-"))
        self.log, self.runs_log = folder / "server.log", folder / "runs.jsonl"
        self.store = store = tempfile.mkdtemp(prefix="ap-bench-store-")
        if timed:
            command = [sys.executable, str(Path(__file__).resolve()), str(self.port), str(self.runs_log)]
        else:
            command = [sys.executable, "-m", "streamlit", *run_args(script, self.port)]
        environment = {**os.environ, "AP_MODEL_STORE": store, **(env or {})}
        # Python keeps each module it compiles (__pycache__) unless told not to, as this project's machines tell it:
        # the server then compiled the app's own ~100 modules at every start (60 ms of its first run), which a
        # learner's Python does once. The server runs as theirs does.
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
        self.proc = subprocess.Popen(command, cwd=ROOT, env=environment,
                                     stdout=self.log.open("w"), stderr=subprocess.STDOUT,
                                     preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        if not wait_healthy(self.url, self.proc, 120, HEALTH_POLL_SECONDS):
            self.stop()
            raise RuntimeError(f"streamlit did not start; see {self.log}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def script_runs(self) -> list[dict]:
        """The timed server's runs so far, oldest first: {"at": when it began (time.time()), "ms": wall, "cpu_ms": CPU
        of the thread that ran it, "fragment": a fragment run, "page": the page's script hash}."""
        if not self.runs_log.exists():
            return []
        return [json.loads(line) for line in self.runs_log.read_text().splitlines() if line.strip()]

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def children(self) -> list[int]:
        return children(self.pid)

    def tracebacks(self) -> int:
        """How many tracebacks the server logged."""
        return self.log.read_text(errors="replace").count("Traceback")

    def stop(self) -> dict:
        """Stop the server (SIGTERM, then SIGKILL after 15 s), say whether its workers ended with it, and remove
        its model store (its log stays)."""
        workers = self.children()
        end_process(self.proc)
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        shutil.rmtree(self.store, ignore_errors=True)
        return {"workers_at_stop": len(workers), "workers_left_after_stop": sum(alive(pid) for pid in workers)}


def split_cpus(enabled: bool) -> dict:
    """With `enabled` (2+ CPUs): CPU 0 for the server and its workers, the others for this script and the
    Chromium it starts, standing in for a class whose browsers run on the students' own machines. Returns
    the server's CPUs (None: shared) and the report's description."""
    if not enabled:
        return {"server_cpus": None, "browser_cpus": "shared with the server"}
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--split-cpus needs two CPUs or more")
    os.sched_setaffinity(0, cpus[1:])  # inherited by Playwright's driver and Chromium
    return {"server_cpus": {cpus[0]}, "browser_cpus": cpus[1:]}


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (a server's training workers), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@contextmanager
def chromium_here(playwright):
    """A headless Chromium started by this process, in its session, and Playwright's browser connected to it over
    the DevTools protocol (loopback). Playwright's own launch starts Chromium in a session of its own: on Linux a
    scheduling group (autogroup) apart from the server and its workers, which then share the CPU with it group
    against group, whatever their nice values. Started here, it shares this session's group with the servers this
    process starts, and competes with them thread by thread, as every program does on macOS and Windows."""
    folder = Path(tempfile.mkdtemp(prefix="ap-bench-chromium-"))
    log = folder / "stderr.log"
    proc = subprocess.Popen([CHROMIUM, "--headless=new", "--remote-debugging-address=127.0.0.1",
                             "--remote-debugging-port=0", f"--user-data-dir={folder / 'profile'}", *CHROMIUM_ARGS,
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        found = wait_until(lambda: [line for line in log.read_text().splitlines()
                                    if line.startswith("DevTools listening on ")], 60, "Chromium's DevTools port")
        browser = playwright.chromium.connect_over_cdp(found[0].split(" on ", 1)[1].strip())
        yield browser
        browser.close()
    finally:
        end_process(proc)


def chromium_missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "Playwright is not installed"
    return None


def watch_paint(page, selector: str = CHART) -> None:
    """Have every page `page` opens from now on note when the first `selector` is painted (PAINTED_JS)."""
    page.add_init_script(PAINTED_JS % json.dumps(selector))


def painted_at(page, timeout_ms: float = 60_000) -> float:
    """When the page watched by watch_paint painted its first `selector`: ms since the epoch (time.time() * 1000)."""
    return page.wait_for_function("window.__apFirstPainted", timeout=timeout_ms).json_value()


def wait_idle(page, timeout_ms: float = 120_000) -> None:
    """The script run is over (twice, 300 ms apart: a click's run may start just after the first look)."""
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=timeout_ms)


def click_next(page) -> dict:
    """A timed click on the decode page's Next (at the last step: First, untimed, then Next)."""
    result = page.evaluate(PLAYER_STEP_JS, "next")
    if result["disabled"]:
        page.evaluate(PLAYER_STEP_JS, "first")
        wait_idle(page)
        result = page.evaluate(PLAYER_STEP_JS, "next")
    wait_idle(page)
    return result


def shown_step(page) -> int | None:
    """The step the Train page's progress bar shows (None before it has one)."""
    bar = page.locator("[data-testid=stProgress]")
    if not bar.count():
        return None
    text = bar.first.inner_text()
    if "Step " not in text:
        return None
    return int(text.split("Step ", 1)[1].split(" ", 1)[0].replace(",", ""))


def start_long_run(page, url: str) -> None:
    """Open the Train page with a long run's settings and press Start; return once it trains."""
    page.goto(url + LONG_RUN)
    wait_idle(page)
    page.get_by_role("button", name="Start", exact=True).click()
    wait_until(lambda: (shown_step(page) or 0) > 0, 180, "the run to train")


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def percentiles(values: list[float]) -> dict:
    """p50 / p95 / max / n of milliseconds (p95: nearest rank)."""
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(0.95 * len(ordered) + 0.5) - 1))
    return {"p50": round(statistics.median(ordered), 1), "p95": round(ordered[rank], 1),
            "max": round(ordered[-1], 1), "n": len(ordered)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads; 0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (every core, /proc/stat)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def descendants(pid: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = []
    for child in parents:
        up, hops = child, 0
        while up in parents and up != pid and hops < 12:
            up, hops = parents[up], hops + 1
        if up == pid and child != pid:
            found.append(child)
    return found


class CpuMeter:
    """Where the CPU went between two reads: the server's training workers, the server itself, Chromium (the
    processes under this one), this script, and everything else on the machine."""

    def __init__(self, server: "AppServer"):
        self.server = server
        self.last = self.read()

    def read(self) -> dict:
        browser = [pid for pid in descendants(os.getpid()) if pid not in self.server.children()
                   and pid != self.server.pid]
        return {"workers": sum(cpu_seconds(pid) for pid in self.server.children()),
                "server": cpu_seconds(self.server.pid), "browser": sum(cpu_seconds(pid) for pid in browser),
                "this_script": cpu_seconds(os.getpid()), "machine": busy_seconds(), "time": time.monotonic()}

    def cores(self) -> dict:
        """Cores used by each since the last call (a worker that ended meanwhile is not counted)."""
        now, last = self.read(), self.last
        self.last = now
        span = now["time"] - last["time"]
        used = {key: max(0.0, now[key] - last[key]) / span for key in now if key != "time"}
        used["others"] = max(0.0, used["machine"] - sum(v for k, v in used.items() if k != "machine"))
        return {key: round(value, 2) for key, value in used.items()}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def time_script_runs(record) -> None:
    """Wrap Streamlit's ScriptRunner so that every script or fragment run calls `record(entry)`: when it began
    (`at`, time.time()), its wall time, the CPU time of the thread that ran it (which other processes on a busy
    machine do not inflate), whether it was a fragment's and its page's script hash."""
    from streamlit.runtime.scriptrunner import script_runner

    run_script = script_runner.ScriptRunner._run_script

    def timed_run(self, rerun_data):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return run_script(self, rerun_data)
        finally:
            spent = time.perf_counter() - wall
            record({"at": time.time() - spent, "ms": spent * 1000, "cpu_ms": (time.thread_time() - cpu) * 1000,
                    "fragment": bool(rerun_data.fragment_id_queue), "page": rerun_data.page_script_hash})

    script_runner.ScriptRunner._run_script = timed_run


def serve(port: int, log: str) -> None:
    """The timed server (`python benchmarks/serving.py PORT LOG`): Streamlit's CLI on app.py, every script or fragment
    run's start, wall time, CPU time of its thread and page appended to LOG as a JSON line. With
    AP_BENCH_NO_PRELOAD=1 in its environment, app.py leaves out ui/preload's preload of the frontend's element code;
    with AP_BENCH_NO_WARM=1, the server's warm-up (ui/warm.py); with AP_BENCH_NO_BEACON=1, its ear for the browser's
    word that the page is drawn (it waits DELAY seconds after each view); with AP_BENCH_NO_GC_PAUSE=1, the first
    run's pause of the garbage collector (ui/runtime.py); with AP_BENCH_NO_UVLOOP=1, the standard library's event
    loop and uvicorn's pure-Python HTTP parser instead of uvloop and httptools (requirements.txt): the peers of
    click_latency's cold start."""
    from streamlit.web.cli import main as streamlit_cli

    def record(entry: dict) -> None:
        with open(log, "a") as f:
            f.write(json.dumps(entry) + "\n")

    time_script_runs(record)
    sys.path.insert(0, str(ROOT))
    if os.environ.get("AP_BENCH_NO_PRELOAD") == "1":
        import ui.preload

        ui.preload.preload_charts = lambda: None
    if os.environ.get("AP_BENCH_NO_WARM") == "1":  # a server as before ui/warm.py
        import ui.warm

        ui.warm.start = lambda: None
    if os.environ.get("AP_BENCH_NO_BEACON") == "1":  # the warm-up DELAY seconds after the first run, as before
        import ui.warm

        ui.warm.drawn = lambda: None
    if os.environ.get("AP_BENCH_NO_GC_PAUSE") == "1":  # the collector on in every run, what each leaves frozen
        import ui.runtime

        @contextmanager
        def first_run():
            yield
            gc.freeze()

        ui.runtime.first_run = first_run
    if os.environ.get("AP_BENCH_NO_UVLOOP") == "1":  # a server installed without them: neither can be imported
        sys.modules["uvloop"] = sys.modules["httptools"] = None
    os.chdir(ROOT)
    streamlit_cli(run_args("app.py", port))


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
