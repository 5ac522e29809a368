"""Training steps/s of one run while another browser session clicks through the app, against the same run
untouched, in one run (issue 10: target >= 90%). Prints JSON.

A fresh server (loopback, started and stopped here by its pid). Session A (a browser context) opens the Train
page and starts a long run of the default model on `reverse`, and keeps its page open: it redraws itself
every 0.75 s, as a user watching the run. Session B (a second context) first goes once round the pages
(warm-up: its first visits, and the spare worker its visit to the Train page starts). Then windows of
--window seconds alternate, untouched / clicking / untouched / ... (--rounds clicking windows, one more
untouched): in a clicking window B goes round the pages through the sidebar, clicking on each (Next x3 on
the decode page, the three attention kinds on the all-heads page, the others opened) until the window ends.
A window's steps/s: the step A's page shows at its end minus at its start, over its length. Figure: mean of
the clicking windows over mean of the untouched ones; each window is listed.

Chromium runs on this machine, so its rendering competes with training for the two cores; in a class the
browsers run on the students' machines. --split-cpus stands in for that: the server and its workers on
CPU 0, Chromium on the others (a one-core server). --nice-browser runs Chromium at nice 19 instead (it then
takes what the server and the run leave).

    python benchmarks/serve_train_clicks.py [--window 20] [--rounds 2] [--split-cpus | --nice-browser]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from serving import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, AppServer, CpuMeter, chromium_missing, descendants, load_average, shown_step,
    split_cpus, start_long_run, wait_idle,
)

TARGET = 0.90
TOUR = ("Step-by-step decoding", "All attention heads", "Masks", "Positional encoding", "Train live", "Checkpoints",
        "Home")
KINDS = ("Encoder self-attention", "Decoder self-attention", "Cross-attention")


def renice_browser() -> int:
    """Put every thread of every Chromium process under this one at nice 19 (a nice value belongs to a
    thread: renicing a process's pid changes only its first thread); how many processes were changed."""
    changed = 0
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"chrom" not in cmdline.read():
                    continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.setpriority(os.PRIO_PROCESS, int(tid), 19)
            changed += 1
        except OSError:
            continue
    return changed


def visit(page, title: str) -> int:
    """Open `title` through the sidebar and click around on it; the clicks made."""
    page.locator("[data-testid=stSidebarNav]").get_by_role("link", name=title, exact=True).click()
    wait_idle(page)
    clicks = 1
    if title == "Step-by-step decoding":
        for _ in range(3):
            name = "next" if page.locator("[data-ap-player] button[data-go=next]").is_enabled() else "first"
            page.locator(f"[data-ap-player] button[data-go={name}]").click()
            page.wait_for_timeout(300)  # the player tells the server a moment after it has drawn the step
            wait_idle(page)
            clicks += 1
    elif title == "All attention heads":
        for kind in KINDS:
            page.locator(".st-key-attention_kind_widget button:visible", has_text=kind).click()
            wait_idle(page)
            clicks += 1
    return clicks


def window(watched, seconds: float, meter: CpuMeter, clicker=None) -> dict:
    """Steps/s of the watched run over `seconds`, while `clicker` (a page) tours the app, if given; and the
    cores each part of the machine used meanwhile."""
    meter.cores()
    first, began = shown_step(watched), time.monotonic()
    clicks = 0
    if clicker is None:
        time.sleep(seconds)
    else:
        i = 0
        while time.monotonic() - began < seconds:
            clicks += visit(clicker, TOUR[i % len(TOUR)])
            i += 1
    last, ended = shown_step(watched), time.monotonic()
    return {"kind": "clicking" if clicker else "untouched", "seconds": round(ended - began, 2),
            "steps": last - first, "steps_per_s": round((last - first) / (ended - began), 2), "clicks": clicks,
            "cores_used": meter.cores()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds per window")
    parser.add_argument("--rounds", type=int, default=2, help="clicking windows (one more untouched)")
    parser.add_argument("--nice-browser", action="store_true", help="run Chromium at nice 19")
    parser.add_argument("--split-cpus", action="store_true", help="server and workers on CPU 0, Chromium on the rest")
    parser.add_argument("--worker-nice", type=int, help="AP_WORKER_NICE for the server (default: the app's)")
    add_cpu_argument(parser)
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    from playwright.sync_api import sync_playwright

    env = {"AP_WORKER_NICE": str(args.worker_nice)} if args.worker_nice is not None else {}
    placement = split_cpus(args.split_cpus)
    server = AppServer(env, cpus=placement["server_cpus"])
    report = {"window_seconds": args.window, "browser_nice": 19 if args.nice_browser else 0, "server_env": env,
              "cpus_of": {k: sorted(v) if isinstance(v, set) else v for k, v in placement.items()},
              "load_average_before": load_average()}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            watched = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            clicker = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            if args.nice_browser:
                report["browser_processes_reniced"] = renice_browser()
            start_long_run(watched, server.url)
            clicker.goto(server.url)
            wait_idle(clicker)
            warm_up = sum(visit(clicker, title) for title in TOUR)
            if args.nice_browser:
                report["browser_processes_reniced"] = renice_browser()
            meter = CpuMeter(server)
            windows = [window(watched, args.window, meter)]
            for _ in range(args.rounds):
                windows.append(window(watched, args.window, meter, clicker))
                windows.append(window(watched, args.window, meter))
            browser.close()
    finally:
        report |= server.stop()
    untouched = [w["steps_per_s"] for w in windows if w["kind"] == "untouched"]
    clicking = [w["steps_per_s"] for w in windows if w["kind"] == "clicking"]
    ratio = statistics.mean(clicking) / statistics.mean(untouched)
    mean_cores = {kind: {key: round(statistics.mean(w["cores_used"][key] for w in windows if w["kind"] == kind), 2)
                         for key in windows[0]["cores_used"]} for kind in ("untouched", "clicking")}
    report |= {
        "cores_used_mean": mean_cores,
        "untouched_steps_per_s": round(statistics.mean(untouched), 2),
        "clicking_steps_per_s": round(statistics.mean(clicking), 2),
        "ratio": round(ratio, 3), "target": TARGET, "within_target": ratio >= TARGET,
        "warm_up_clicks": warm_up, "windows": windows, "server_tracebacks": server.tracebacks(),
        "machine": machine(torch_threads=1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
