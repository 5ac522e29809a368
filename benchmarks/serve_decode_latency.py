"""Decode page step click -> charts repainted in the browser, p50 / p95, with 0, 1 and 2 training runs on the
same server (issue 10: target p95 with 2 runs <= 1.2x idle). Prints JSON.

A fresh server (loopback, started and stopped here by its pid; AP_MAX_RUNS=2, the default on 2 cores). Two
browser contexts start a long run each on the Train page (the default model on `reverse`) and keep their
pages open (a running run's page redraws itself every 0.75 s); Pause and Resume on those pages set how
many train. A third context opens the decode page (the shipped `reverse` model) and clicks Next (First when
at the end, not timed). Each click is timed in the page, from the click until the step player's charts show
the new step, painted, and until the script run it causes has ended (serving.PLAYER_STEP_JS). The server is
the timed one (serving.serve): the wall and CPU time
of each decode-page fragment run it served are reported beside, so the server's share of a click shows
apart from the browser's painting. The conditions run in the order 0, 1, 2, 2, 1, 0 runs training
(--clicks clicks each time), so a machine whose load drifts weighs on each alike.

Chromium runs on this machine: the training pages' redraws and the decode page's painting share the two
cores with the server and the runs. In a class each browser runs on its student's machine; --split-cpus
stands in for that: the server and both runs on CPU 0, Chromium on the others, and the two training pages
leave for the home page between Pause/Resume clicks (their runs go on; they no longer redraw).

    python benchmarks/serve_decode_latency.py [--clicks 15] [--split-cpus]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from serving import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, AppServer, chromium_missing, click_next, load_average, percentiles, shown_step,
    split_cpus, start_long_run, wait_idle, wait_until,
)

TARGET = 1.2
ORDER = (0, 1, 2, 2, 1, 0)


def set_training(trainers: list, count: int, leave: bool = False) -> None:
    """Resume the first `count` runs and pause the others; return once each is in that state. With `leave`,
    the pages go to the Train page first and to the home page after (their runs go on)."""
    for i, page in enumerate(trainers):
        if leave:
            go_to(page, "Train live")
        running = page.get_by_text("Training…").count() > 0
        if i < count and not running:
            page.get_by_role("button", name="Resume", exact=True).click()
            before = shown_step(page) or 0
            wait_until(lambda page=page, before=before: (shown_step(page) or 0) > before + 5, 120, "a resumed run")
        elif i >= count and running:
            page.get_by_role("button", name="Pause", exact=True).click()
            wait_until(lambda page=page: page.get_by_text("Paused.").count(), 60, "a paused run")
            wait_idle(page)
        if leave:
            go_to(page, "Home")


def go_to(page, title: str) -> None:
    """Open a page through the sidebar (the same session)."""
    page.locator("[data-testid=stSidebarNav]").get_by_role("link", name=title, exact=True).click()
    wait_idle(page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=15, help="timed clicks per condition and pass")
    parser.add_argument("--worker-nice", type=int, help="AP_WORKER_NICE for the server (default: the app's)")
    parser.add_argument("--split-cpus", action="store_true", help="server and runs on CPU 0, Chromium on the rest")
    add_cpu_argument(parser)
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    from playwright.sync_api import sync_playwright

    env = {"AP_MAX_RUNS": "2"} | ({"AP_WORKER_NICE": str(args.worker_nice)} if args.worker_nice is not None else {})
    placement = split_cpus(args.split_cpus)
    server = AppServer(env, timed=True, cpus=placement["server_cpus"])
    report = {"clicks_per_pass": args.clicks, "order": ORDER, "server_env": env,
              "cpus_of": {k: sorted(v) if isinstance(v, set) else v for k, v in placement.items()},
              "load_average_before": load_average()}
    times: dict[int, list[dict]] = {count: [] for count in set(ORDER)}
    server_ms: dict[int, list[dict]] = {count: [] for count in set(ORDER)}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            trainers = [browser.new_context(viewport={"width": 1400, "height": 900}).new_page() for _ in range(2)]
            for page in trainers:
                start_long_run(page, server.url)
            set_training(trainers, 0, args.split_cpus)
            decode = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            decode.goto(f"{server.url}/decode")
            wait_idle(decode)
            before = len(server.script_runs())
            for _ in range(4):  # warm-up: the decode is cached, the figures built once
                click_next(decode)
            # the decode page's script hash (both runs are paused: every fragment run now is the decode page's)
            hashes = Counter(run["page"] for run in server.script_runs()[before:] if run["fragment"])
            page_hash = hashes.most_common(1)[0][0]
            for count in ORDER:
                set_training(trainers, count, args.split_cpus)
                time.sleep(2)
                before = len(server.script_runs())
                times[count] += [click_next(decode) for _ in range(args.clicks)]
                server_ms[count] += [run for run in server.script_runs()[before:]
                                     if run["page"] == page_hash and run["fragment"]]
            for page in trainers if args.split_cpus else ():
                go_to(page, "Train live")
            steps = [shown_step(page) for page in trainers]
            browser.close()
    finally:
        report |= server.stop()
    conditions = {}
    for count, results in sorted(times.items()):
        conditions[f"{count}_runs"] = {
            "click_to_repainted_ms": percentiles([r["ms"] for r in results if r["ms"] is not None]),
            "click_to_script_end_ms": percentiles([r["heard_ms"] for r in results if r["heard_ms"] is not None]),
            "server_run_wall_ms": percentiles([r["ms"] for r in server_ms[count]]),
            "server_run_cpu_ms": percentiles([r["cpu_ms"] for r in server_ms[count]]),
            "repainted": sum(r["repainted"] for r in results), "timed_out": sum(r["ms"] is None for r in results)}
    idle, busy = (conditions[f"{n}_runs"]["click_to_repainted_ms"]["p95"] for n in (0, 2))
    report |= {"conditions": conditions, "p95_ratio_2_runs_over_idle": round(busy / idle, 2), "target": TARGET,
               "within_target": busy / idle <= TARGET, "training_steps_at_end": steps,
               "server_tracebacks": server.tracebacks(), "machine": machine(torch_threads=1)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
