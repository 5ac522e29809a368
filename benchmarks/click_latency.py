"""How fast does the app answer, as a learner sees it in Chromium (issues 12 and 25)? Prints JSON.

Four figures, each timed in the browser on a fresh server of this app (loopback, started and stopped here by its
pid; its script runs are timed too, so the server's share shows beside each figure), Chromium on the same cores:
  cold_start_ms   from `streamlit run` to the first chart drawn on the home page, in a new browser page
                  (the server's start and warm-up, the first script run, the page's JavaScript and the first
                  paint), as Playwright sees it. Target <= 3,000 ms (issue 25; 4,000 in issue 12). Beside it,
                  painted_ms: to the frame that painted the chart, by the page's own clock; frontend_loaded_ms:
                  from the page's navigation to its load event (Streamlit's frontend fetched and started);
                  cores_busy: how many of the machine's cores were busy on average until the chart was drawn
                  (/proc/stat: the server, Chromium and anything else).
                  Peer: the same server without its warm-up (ui/warm.py; --peer preload: without ui/preload's
                  chart preload; --peer gc: its first run with the garbage collector on, ui/runtime.py; --peer
                  uvloop: on the standard library's event loop and HTTP parser; --peer beacon: deaf to the browser's
                  word that it has drawn the page, the warm-up DELAY seconds after it; --peer glance: with nothing kept
                  of an earlier server, as at the first start after installing or changing the code: its first
                  page then imports torch and decodes, ui/glance.py), started in turn. Both servers but the
                  glance peer find the home page's decode kept by an earlier server, as every start after the
                  first does (a server started and stopped here before the timed ones keeps it).
  first_visit_ms  then, on that fresh server, each other page opened once through the sidebar, --pause seconds
                  after the first chart (0: at once; a learner reads the page first): ms to its first chart drawn
                  (to the end of its script run where it has no chart). Target <= 1,000 ms each. The peer's too,
                  and the server CPU time of each visit's script run.
  new_visitor_ms  then --visitors new browser pages (a student arriving at a running server, a new tab), each
                  opening the home page: ms to its first chart, as Playwright sees it and (new_visitor_painted_ms)
                  to the frame that painted it. No target; the peer's too (--peer uvloop: the server on the standard
                  library's event loop, Nagle's algorithm on, and uvicorn's pure-Python parser).
  page_switch_ms  from a click on a sidebar link to the first chart drawn on the page it opens, round the
                  pages that hold charts (all heads, masks, positions, home, decode), warm caches after the
                  first round. Target <= 400 ms median.
  step_click_ms   from a click on the decode page's Next button to the step player's charts showing the new
                  step, painted (serving.PLAYER_STEP_JS), on the shipped `reverse` model. Target <= 150 ms
                  median, and split by whether the charts had drawn the step ahead (in idle time) or drew it on
                  the click; then --jumps clicks on Last in new decodes (a step never drawn ahead). Beside it, the
                  click to the end of the script run the move causes (the player tells the server after it has
                  shown the step), and that run's server time.
Other processes slow every figure; the machine (timing.machine(): CPU, capability, load) is printed with them.
`--cpu avx2` caps the server's kernels to AVX2 (a laptop without AVX-512 or native bfloat16); `--throttle 2.5` slows
the browser's pages 2.5 times (Chromium's own CPU throttling), for a laptop's slower browser.

    python benchmarks/click_latency.py [--clicks 30] [--jumps 8] [--rounds 3] [--starts 5] [--visitors 3]
                                       [--peer warm|preload|gc|uvloop|beacon|glance] [--cpu avx2] [--throttle 2.5]
                                       [--cold-only] [--pause 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from serving import (  # noqa: E402
    CHART, CHROMIUM, CHROMIUM_ARGS, PLAYER_STEP_JS, AppServer, busy_seconds, chromium_missing, click_next, load_average,
    painted_at, percentiles, wait_idle, watch_paint,
)

from ui.catalog import PAGES  # noqa: E402  (no torch)
from ui.preload import PAGE_DRAWN_JS  # noqa: E402

TARGETS = {"cold_start_ms": 3000, "first_visit_ms": 1000, "page_switch_ms": 400, "step_click_ms": 150}
# what the peer server leaves out
PEERS = {"warm": "AP_BENCH_NO_WARM", "preload": "AP_BENCH_NO_PRELOAD", "gc": "AP_BENCH_NO_GC_PAUSE",
         "glance": "AP_FIRST_PAGE_CACHE", "uvloop": "AP_BENCH_NO_UVLOOP", "beacon": "AP_BENCH_NO_BEACON"}
INPUT = ".st-key-shared_input_widget input"  # the decode page's source text
# The page shows the decode of `word` (the server has written it to the address bar, its run is over) and the
# player's charts have drawn its first step
NEW_DECODE_JS = """(word) => new URLSearchParams(location.search).get('input') === word &&
  document.querySelector('[data-testid=stApp]').dataset.testScriptState === 'notRunning' &&
  [...document.querySelectorAll('[data-ap-chart]')].every(c => c.dataset.apStep === '1')"""
# Sources for the jumps, each of a length of its own (a new decode each, none the page's default)
JUMP_WORDS = tuple("abcdefghijklmnop"[i:i + n] for i, n in enumerate(range(16, 4, -1)))
# The pages that hold a chart, in the order the sidebar is walked from the decode page (link text, path).
ROUND = (("All attention heads", "attention"), ("Masks", "masks"), ("Positional encoding", "positions"),
         ("Home", ""), ("Step-by-step decoding", "decode"))
# In-page: click the sidebar link named `name`, then wait for the new page's first drawn chart (the old
# page's charts are gone or stale by then: only a chart that was not in the page before counts).
SWITCH_JS = """async (name) => {
  const link = [...document.querySelectorAll('[data-testid=stSidebarNav] a')]
    .find(a => a.innerText.trim().endsWith(name));  // its icon's name comes first
  if (!link) return null;
  const old = new Set(document.querySelectorAll('.js-plotly-plot'));
  const t0 = performance.now();
  link.click();
  while (performance.now() - t0 < 30000) {
    await new Promise(r => requestAnimationFrame(() => r()));
    if ([...document.querySelectorAll('.js-plotly-plot')].some(p => !old.has(p) && p.querySelector('.main-svg')))
      return performance.now() - t0;
  }
  return null;
}"""


# In-page: click the sidebar link named `name`, then wait for the new page's first chart (as SWITCH_JS) or, on a
# page without one, until it is drawn: its own heading shown, the app idle, every chart element drawn (ui/preload's
# test, whose charts' code draws them once the run has ended: the Train page's preview). Not the script state seen to
# run and then stop: once in six starts (2026-12-01) no frame showed the checkpoints page's short run, and the visit
# waited out its 30 s. null after 30 s.
VISIT_JS = """async (name) => {
  const link = [...document.querySelectorAll('[data-testid=stSidebarNav] a')]
    .find(a => a.innerText.trim().endsWith(name));
  if (!link) return null;
  const app = document.querySelector('[data-testid=stApp]');
  const heading = () => document.querySelector('[data-testid=stMainBlockContainer] h1')?.innerText;
  const drawn = () => %s;
  const before = heading();
  const old = new Set(document.querySelectorAll('.js-plotly-plot'));
  const t0 = performance.now();
  link.click();
  while (performance.now() - t0 < 30000) {
    await new Promise(r => requestAnimationFrame(() => r()));
    if ([...document.querySelectorAll('.js-plotly-plot')].some(p => !old.has(p) && p.querySelector('.main-svg')))
      return {ms: performance.now() - t0, chart: true};
    const now = heading();  // none while the frontend clears the last page
    if (now && now !== before && app.getAttribute('data-test-script-state') === 'notRunning' && drawn())
      return {ms: performance.now() - t0, chart: false};
  }
  return null;
}""" % PAGE_DRAWN_JS


def open_page(browser, throttle: float):
    """A new page at 1440x900; `throttle` > 1 slows its renderer that many times (DevTools' CPU throttling: a
    stand-in for a slower laptop's browser, where the server's side is --cpu's)."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    if throttle > 1:
        page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": throttle})
    return page


KEPT = tempfile.mkdtemp(prefix="ap-bench-first-page-")  # the home page's decode kept by an earlier server


def server_env(peer: str | None) -> dict[str, str]:
    """The environment of a server without what `peer` names; all but the glance peer's find the decode kept."""
    if peer == "glance":
        return {"AP_FIRST_PAGE_CACHE": tempfile.mkdtemp(prefix="ap-bench-first-page-")}  # nothing kept
    return {"AP_FIRST_PAGE_CACHE": KEPT, **({PEERS[peer]: "1"} if peer else {})}


def keep_first_page(browser) -> None:
    """A server that opens the home page once, so every later server finds its decode kept (ui/glance.py)."""
    server = AppServer(env=server_env(None))
    try:
        new_visitor(browser, 1.0, server)
    finally:
        server.stop()
    assert any(Path(KEPT).glob("*.json")), "the home page kept no decode"


def cold_start(browser, throttle: float, visitors: int, peer: str | None = None, pause: float = 0.0) -> dict:
    """Launch a server (without what `peer` names) and, as soon as it answers, open the home page; ms until its
    first chart is drawn. Then each other page's first visit, then `visitors` new visitors."""
    t0, t0_wall, busy = time.perf_counter(), time.time(), busy_seconds()
    server = AppServer(timed=True, env=server_env(peer))
    try:
        healthy = time.perf_counter()
        page = open_page(browser, throttle)
        watch_paint(page)
        page.goto(server.url)
        page.wait_for_selector(CHART, timeout=60_000)
        drawn, busy = time.perf_counter(), busy_seconds() - busy
        painted = painted_at(page)
        first = server.script_runs()[0] if server.script_runs() else {}
        out = {"ms": round((drawn - t0) * 1000), "painted_ms": round(painted - t0_wall * 1000),
               "server_up_ms": round((healthy - t0) * 1000), "frontend_loaded_ms": frontend_loaded(page),
               "cores_busy": round(busy / (drawn - t0), 2),
               "first_script_run_ms": round(first["ms"]) if first else None,
               "first_script_run_cpu_ms": round(first["cpu_ms"]) if first else None}
        wait_idle(page)
        page.wait_for_timeout(pause * 1000)  # a learner reading the home page before the first click
        out["first_visit_ms"], out["first_visit_server_cpu_ms"] = first_visits(page, server)
        page.close()
        out["new_visitor_ms"] = [new_visitor(browser, throttle, server) for _ in range(visitors)]
        return out
    finally:
        server.stop()


def frontend_loaded(page) -> int:
    """ms from the page's navigation to its load event: Streamlit's frontend (~60 files) fetched and started."""
    return round(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))


def first_visits(page, server: AppServer) -> tuple[dict, dict]:
    """Every page but home, opened once in the catalog's order: ms to its first chart (or its run's end), and the
    CPU time of the server's script run that drew it (which a busy machine inflates far less than the wall time)."""
    visits, cpu = {}, {}
    for info in PAGES[1:]:
        before = len(server.script_runs())
        seen = page.evaluate(VISIT_JS, info.title)
        if seen is None:
            raise RuntimeError(f"{info.title!r} did not open")
        visits[info.url_path] = round(seen["ms"])
        wait_idle(page)
        runs = [run for run in server.script_runs()[before:] if not run["fragment"]]
        cpu[info.url_path] = round(runs[0]["cpu_ms"]) if runs else None
    return visits, cpu


def new_visitor(browser, throttle: float, server: AppServer) -> dict:
    """A new browser page (new connections) opening the home page of a running server: ms to its first chart as
    Playwright sees it, and to the frame that painted it (`painted_ms`)."""
    page = open_page(browser, throttle)
    watch_paint(page)
    start = time.time()  # painted_at's clock
    page.goto(server.url)
    page.wait_for_selector(CHART, timeout=60_000)
    seen = {"ms": round((time.time() - start) * 1000), "painted_ms": round(painted_at(page) - start * 1000)}
    wait_idle(page)
    page.close()
    return seen


def page_switches(page, rounds: int) -> dict:
    """Walk the sidebar round the chart pages `rounds` times; the first round fills the caches."""
    cold, warm = [], []
    for r in range(rounds):
        for name, _ in ROUND:
            ms = page.evaluate(SWITCH_JS, name)
            if ms is None:
                raise RuntimeError(f"no chart drawn after opening {name!r}")
            (cold if r == 0 else warm).append(ms)
            wait_idle(page)
    return {"first_round": percentiles(cold), "warm": percentiles(warm)}


def step_clicks(page, server: AppServer, clicks: int, jumps: int) -> dict:
    """Next on the decode page `clicks` times (serving.click_next), then `jumps` clicks on Last, each in a new
    decode (a step no chart has drawn ahead); in-page ms, and the server's run of each Next."""
    page.goto(f"{server.url}/decode")
    wait_idle(page)
    page.wait_for_selector(CHART)
    times, heard, runs, unpainted = {True: [], False: []}, [], [], 0
    for _ in range(clicks):
        result = click_next(page)
        if result["repainted"]:
            times[result["drawn_ahead"]].append(result["ms"])
        else:
            unpainted += 1
        if result["heard_ms"] is not None:
            heard.append(result["heard_ms"])
        last = server.script_runs()[-1]  # the timed click's run (click_next waits until it is over)
        if last["fragment"]:
            runs.append(last["ms"])
    jumped = []
    for word in JUMP_WORDS[:jumps]:
        page.locator(INPUT).fill(word)
        page.keyboard.press("Enter")
        page.wait_for_function(NEW_DECODE_JS, arg=word)
        wait_idle(page)
        result = page.evaluate(PLAYER_STEP_JS, "last")
        if result["repainted"] and not result["drawn_ahead"]:
            jumped.append(result["ms"])
        wait_idle(page)
    return {"browser": percentiles(times[True] + times[False]), "browser_drawn_ahead": percentiles(times[True]),
            "browser_drawn_on_click": percentiles(times[False]), "not_repainted": unpainted,
            "jump_to_last_drawn_on_click": percentiles(jumped),
            "click_to_server_run_over": percentiles(heard), "server_fragment_run": percentiles(runs)}


def rounds(text: str) -> int:
    """--rounds: at least two (the first round only fills the caches)."""
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError("at least 2: the first round fills the caches, the others are timed")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=30)
    parser.add_argument("--jumps", type=int, default=8, help="timed jumps to a step not drawn ahead")
    parser.add_argument("--rounds", type=rounds, default=3, help="sidebar rounds (the first fills the caches)")
    parser.add_argument("--starts", type=int, default=5, help="cold starts, each on a new server")
    parser.add_argument("--visitors", type=int, default=3, help="new visitors after each cold start's first visits")
    parser.add_argument("--peer", choices=tuple(PEERS), default="warm", help="what the peer's server leaves out")
    parser.add_argument("--cold-only", action="store_true", help="cold starts and first visits only")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds between the first chart and the first visits (a learner reading the page)")
    parser.add_argument("--throttle", type=float, default=1.0, help="slow the browser's pages this many times")
    add_cpu_argument(parser)
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    from playwright.sync_api import sync_playwright

    out: dict = {"benchmark": "click_latency", "targets": TARGETS, "cpu": args.cpu, "browser_throttle": args.throttle,
                 "pause_s": args.pause,
                 "load_avg_before": load_average()}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        browser.new_page().close()  # Chromium's own start is not the app's
        keep_first_page(browser)
        starts = {None: [], args.peer: []}
        for _ in range(args.starts):  # in turn, so that other load hits both alike
            for peer in starts:
                starts[peer].append(cold_start(browser, args.throttle, args.visitors, peer, args.pause))
        for peer, name in ((None, "cold_start_ms"), (args.peer, f"cold_start_without_{args.peer}_ms")):
            out[name] = {"runs": starts[peer], "median": statistics.median(s["ms"] for s in starts[peer]),
                         "painted_median": statistics.median(s["painted_ms"] for s in starts[peer]),
                         "frontend_loaded_median": statistics.median(s["frontend_loaded_ms"] for s in starts[peer]),
                         "cores_busy_median": round(statistics.median(s["cores_busy"] for s in starts[peer]), 2)}
        for name in ("first_visit_ms", "first_visit_server_cpu_ms"):
            for peer, suffix in ((None, ""), (args.peer, f"_without_{args.peer}")):
                visits = [s[name] for s in starts[peer]]
                out[name + suffix] = {path: percentiles([v[path] for v in visits if v[path] is not None])
                                      for path in visits[0]}
        for peer, suffix in ((None, ""), (args.peer, f"_without_{args.peer}")):
            seen = [visitor for s in starts[peer] for visitor in s["new_visitor_ms"]]
            out["new_visitor_ms" + suffix] = percentiles([v["ms"] for v in seen])
            out["new_visitor_painted_ms" + suffix] = percentiles([v["painted_ms"] for v in seen])
        server = None if args.cold_only else AppServer(timed=True, env=server_env(None))
        try:
            page = open_page(browser, args.throttle) if server else None
            if page is None:
                return finish(out, args.cpu)
            page.goto(server.url)
            wait_idle(page)
            out["step_click_ms"] = step_clicks(page, server, args.clicks, args.jumps)
            out["page_switch_ms"] = page_switches(page, args.rounds)
            out["server_tracebacks"] = server.tracebacks()
        finally:
            if server is not None:
                server.stop()
            browser.close()
    finish(out, args.cpu)


def finish(out: dict, cpu: str) -> None:
    """Print `out` with which targets its figures met, and the machine."""
    met = {"cold_start_ms": out["cold_start_ms"]["median"] <= TARGETS["cold_start_ms"],
           "first_visit_ms": all(v["p50"] <= TARGETS["first_visit_ms"] for v in out["first_visit_ms"].values())}
    if "step_click_ms" in out:
        met["page_switch_ms"] = out["page_switch_ms"]["warm"]["p50"] <= TARGETS["page_switch_ms"]
        met["step_click_ms"] = out["step_click_ms"]["browser"]["p50"] <= TARGETS["step_click_ms"]
    print(json.dumps({**out, "met": met, "machine": machine(torch_threads=1)}))  # the server's threads (ui/runtime)


if __name__ == "__main__":
    main()
