"""How fast does the app answer, as a learner sees it in Chromium (issue 12, item 10)? Prints JSON.

Three figures, each timed in the browser on a fresh server of this app (loopback, started and stopped here
by its pid; its script runs are timed too, so the server's share shows beside each figure):
  cold_start_ms   from `streamlit run` to the first chart drawn on the home page, in a new browser page
                  (the Python imports, the first script run, the page's JavaScript and the first paint).
                  Target <= 4,000 ms. Peer: the same without ui/preload's chart preload, started in turn.
  page_switch_ms  from a click on a sidebar link to the first chart drawn on the page it opens, round the
                  pages that hold charts (all heads, masks, positions, home, decode), warm caches after the
                  first round. Target <= 400 ms median.
  step_click_ms   from a click on the decode page's Next button to the step player's charts showing the new
                  step, painted (serving.PLAYER_STEP_JS), on the shipped `reverse` model. Target <= 150 ms
                  median. Beside it, the click to the end of the script run the move causes (the player tells
                  the server after it has drawn the step), and that run's server time.
Other processes slow every figure; the load average is printed with them.

    python benchmarks/click_latency.py [--clicks 30] [--rounds 3] [--starts 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, AppServer, chromium_missing, click_next, load_average, percentiles, wait_idle,
)

TARGETS = {"cold_start_ms": 4000, "page_switch_ms": 400, "step_click_ms": 150}
CHART = ".js-plotly-plot .main-svg"
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


def cold_start(browser, preload: bool = True) -> dict:
    """Launch a server and, as soon as it answers, open the home page; ms until its first chart is drawn."""
    t0 = time.perf_counter()
    server = AppServer(timed=True, env=None if preload else {"AP_BENCH_NO_PRELOAD": "1"})
    try:
        healthy = time.perf_counter()
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(server.url)
        page.wait_for_selector(CHART, timeout=60_000)
        drawn = time.perf_counter()
        page.close()
        first_run = server.script_runs()[0]["ms"] if server.script_runs() else None
        return {"ms": round((drawn - t0) * 1000), "server_up_ms": round((healthy - t0) * 1000),
                "first_script_run_ms": round(first_run) if first_run else None}
    finally:
        server.stop()


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


def step_clicks(page, server: AppServer, clicks: int) -> dict:
    """Next on the decode page `clicks` times (serving.click_next); in-page ms, and the server's run of each."""
    page.goto(f"{server.url}/decode")
    wait_idle(page)
    page.wait_for_selector(CHART)
    times, heard, runs, unpainted = [], [], [], 0
    for _ in range(clicks):
        result = click_next(page)
        if result["repainted"]:
            times.append(result["ms"])
        else:
            unpainted += 1
        if result["heard_ms"] is not None:
            heard.append(result["heard_ms"])
        last = server.script_runs()[-1]  # the timed click's run (click_next waits until it is over)
        if last["fragment"]:
            runs.append(last["ms"])
    return {"browser": percentiles(times), "not_repainted": unpainted, "click_to_server_run_over": percentiles(heard),
            "server_fragment_run": percentiles(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--starts", type=int, default=5, help="cold starts, each on a new server")
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    from playwright.sync_api import sync_playwright

    out: dict = {"benchmark": "click_latency", "targets": TARGETS, "load_avg_before": load_average()}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        browser.new_page().close()  # Chromium's own start is not the app's
        starts = {True: [], False: []}
        for _ in range(args.starts):  # in turn, so that other load hits both alike
            for preload in (True, False):
                starts[preload].append(cold_start(browser, preload))
        for name, runs in (("cold_start_ms", starts[True]), ("cold_start_without_preload_ms", starts[False])):
            out[name] = {"runs": runs, "median": statistics.median(s["ms"] for s in runs)}
        server = AppServer(timed=True)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(server.url)
            wait_idle(page)
            out["step_click_ms"] = step_clicks(page, server, args.clicks)
            out["page_switch_ms"] = page_switches(page, args.rounds)
            out["server_tracebacks"] = server.tracebacks()
        finally:
            server.stop()
        browser.close()
    out["met"] = {"cold_start_ms": out["cold_start_ms"]["median"] <= TARGETS["cold_start_ms"],
                  "page_switch_ms": out["page_switch_ms"]["warm"]["p50"] <= TARGETS["page_switch_ms"],
                  "step_click_ms": out["step_click_ms"]["browser"]["p50"] <= TARGETS["step_click_ms"]}
    out["load_avg_after"] = load_average()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
