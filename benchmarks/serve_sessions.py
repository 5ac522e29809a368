"""A class on one server (issue 10). Prints JSON.

1. --sessions (20) concurrent browser sessions: each a context of its own that opens the decode page (the
   shipped `reverse` model) at the same moment, then clicks Next --clicks times (First at the end, not
   timed), all sessions at once. Each click is timed in its page, from the click until the step player's
   charts show the new step, painted, and until the script run it causes has ended (serving.PLAYER_STEP_JS).
   Reported: open and click p50 / p95, the server's RSS (after one warm-up session has loaded torch, the
   model and its decode; peak; 10 s after the 20 sessions closed), and errors: exceptions shown in a page,
   page script errors, tracebacks in the server's log, clicks that never finished.
2. --runs (8) sessions open the Train page with a small model (d_model 16, --steps steps, no early stop) and
   press Start at the same moment, on a server with AP_MAX_RUNS=2 (the default on 2 cores): two train, the
   others wait in line with their place shown. Each page is read every 0.25 s: the place it first shows,
   when it leaves the line, when it finishes. Reported: all finished, the line's order honoured (runs leave
   it in the order of the places they were shown), the total time from the clicks to the last finish.

One fresh server (loopback, started and stopped here by its pid) serves both parts. Chromium runs on this
machine too, so its painting shares the two cores with the server and the runs.

    python benchmarks/serve_sessions.py [--sessions 20] [--clicks 10] [--runs 8] [--steps 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from serving import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, IDLE, PLAYER_STEP_JS, AppServer, chromium_missing, load_average, percentiles,
)

SMALL_RUN = "/train?v=1&d_model=16&d_ff=32&n_heads=2&batch_size=16&stop_early=0&steps={steps}"
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 180_000  # a browser action's limit: 20 sessions at once on two cores are slow, not broken


async def idle(page, timeout_ms: float = 300_000) -> None:
    await page.wait_for_selector(IDLE, timeout=timeout_ms)
    await page.wait_for_timeout(300)
    await page.wait_for_selector(IDLE, timeout=timeout_ms)


async def sample_rss(server: AppServer, peak: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], server.rss_mb())
        await asyncio.sleep(0.5)


async def decode_session(browser, url: str, clicks: int, errors: list) -> dict:
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    began = time.perf_counter()
    await page.goto(f"{url}/decode", timeout=300_000)
    await idle(page)
    opened = (time.perf_counter() - began) * 1000
    results = []
    for _ in range(clicks):
        result = await page.evaluate(PLAYER_STEP_JS, "next")
        if result["disabled"]:  # the last step: First (not timed), then Next
            await page.evaluate(PLAYER_STEP_JS, "first")
            await idle(page)
            result = await page.evaluate(PLAYER_STEP_JS, "next")
        results.append(result)
        await idle(page)
    shown = await page.locator("[data-testid=stException]").count()
    if shown:
        errors.append(f"{shown} exception(s) shown in a page")
    await context.close()
    return {"open_ms": opened, "clicks": results}


async def many_sessions(browser, server: AppServer, sessions: int, clicks: int) -> dict:
    errors: list[str] = []
    await decode_session(browser, server.url, 1, errors)  # warm-up: imports, the model, the decode cached
    await asyncio.sleep(5)
    baseline = server.rss_mb()
    peak, stop = [baseline], asyncio.Event()
    sampler = asyncio.create_task(sample_rss(server, peak, stop))
    began = time.perf_counter()
    done = await asyncio.gather(*(decode_session(browser, server.url, clicks, errors) for _ in range(sessions)),
                                return_exceptions=True)
    seconds = time.perf_counter() - began
    stop.set()
    await sampler
    failed = [f"{type(r).__name__}: {r}" for r in done if isinstance(r, BaseException)]
    finished = [r for r in done if not isinstance(r, BaseException)]
    clicks_ms = [c["ms"] for r in finished for c in r["clicks"] if c["ms"] is not None]
    await asyncio.sleep(10)  # sessions closed: let the server drop them
    return {
        "sessions": sessions, "clicks_per_session": clicks, "seconds": round(seconds, 1),
        "open_ms": percentiles([r["open_ms"] for r in finished]),
        "click_to_repainted_ms": percentiles(clicks_ms),
        "click_to_script_end_ms": percentiles([c["heard_ms"] for r in finished for c in r["clicks"]
                                               if c["heard_ms"] is not None]),
        "clicks_repainted": sum(c["repainted"] for r in finished for c in r["clicks"]),
        "clicks_unfinished": sum(c["ms"] is None for r in finished for c in r["clicks"]),
        "server_rss_mb": {"after_one_warm_up_session": baseline, "peak": round(peak[0], 1),
                      "after_sessions_closed": server.rss_mb()},
        "errors": errors + failed,
    }


def status(text: str) -> tuple[str, int | None]:
    """(state, place in line) as the Train page shows it."""
    if "Waiting for a training slot" in text:
        if "yours is next" in text:
            return "waiting", 1
        ahead = re.search(r"([\d,]+) runs? ahead of yours", text)
        return "waiting", int(ahead[1].replace(",", "")) + 1 if ahead else None
    if "Finished:" in text:
        return "finished", None
    if "Training failed" in text:
        return "error", None
    if "Training…" in text or "Starting a training process" in text or "Paused." in text:
        return "training", None
    return "other", None


async def train_session(browser, url: str, steps: int) -> tuple:
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    page = await context.new_page()
    await page.goto(url + SMALL_RUN.format(steps=steps), timeout=300_000)
    await idle(page)
    return context, page


async def runs_at_once(browser, server: AppServer, runs: int, steps: int) -> dict:
    opened = await asyncio.gather(*(train_session(browser, server.url, steps) for _ in range(runs)))
    pages = [page for _, page in opened]
    await asyncio.gather(*(page.wait_for_timeout(2000) for page in pages[:1]))  # the spare worker started
    began = time.perf_counter()
    await asyncio.gather(*(page.get_by_role("button", name="Start", exact=True).click() for page in pages))
    seen = [{"place": None, "started": None, "finished": None, "state": None} for _ in pages]
    deadline = began + 600
    while time.perf_counter() < deadline and not all(s["state"] in ("finished", "error") for s in seen):
        texts = await asyncio.gather(*(page.locator("[data-testid=stMain]").inner_text() for page in pages))
        now = time.perf_counter() - began
        for record, text in zip(seen, texts):
            state, place = status(text)
            if state == "waiting" and record["place"] is None and record["started"] is None:
                record["place"] = place
            if state in ("training", "finished", "error") and record["started"] is None:
                record["started"] = round(now, 2)
            if state in ("finished", "error") and record["finished"] is None:
                record["finished"] = round(now, 2)
            record["state"] = state
        await asyncio.sleep(0.25)
    for context, _ in opened:
        await context.close()
    waited = sorted((s for s in seen if s["place"] is not None), key=lambda s: s["place"])
    starts = [s["started"] for s in waited]
    in_order = all(a is not None and b is not None and a <= b for a, b in zip(starts, starts[1:]))
    places = [s["place"] for s in waited]
    finished = [s["finished"] for s in seen]
    return {
        "runs": runs, "steps_each": steps, "all_finished": all(s["state"] == "finished" for s in seen),
        "waited_in_line": len(waited), "places_shown": places,
        "places_distinct_from_1": places == list(range(1, len(places) + 1)),
        "line_order_honoured": in_order,
        "total_seconds": max(finished) if all(f is not None for f in finished) else None,
        "sessions": seen,
    }


async def run(args) -> dict:
    from playwright.async_api import async_playwright

    server = AppServer({"AP_MAX_RUNS": "2"})
    report = {"load_average_before": load_average()}
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            report["concurrent_sessions"] = await many_sessions(browser, server, args.sessions, args.clicks)
            report["runs_at_once"] = await runs_at_once(browser, server, args.runs, args.steps)
            await browser.close()
        report["server_rss_mb_at_end"] = server.rss_mb()
    finally:
        report |= server.stop()
    report |= {"server_tracebacks": server.tracebacks(), "machine": machine(torch_threads=1)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--clicks", type=int, default=10, help="timed clicks per session")
    parser.add_argument("--runs", type=int, default=8, help="sessions that start a run at once")
    parser.add_argument("--steps", type=int, default=300, help="steps of each of those runs")
    add_cpu_argument(parser)
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
