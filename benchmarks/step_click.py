"""Server time of a step click on the decode page (issue 3: <= 100 ms). Prints JSON.

On the shipped `reverse` model and its first example input, two ways in one run. Streamlit's ScriptRunner
is wrapped to time each script or fragment run: wall time, and the CPU time of the thread that ran it
(a fair figure on a busy machine, where other processes stretch the wall time).

AppTest (no browser), which reruns the whole script (sidebar included) on every click:
  apptest.first_open_ms     opening the decode page on empty caches: model load, first traced decode, render
  apptest.step_click_ms     step moves after warm-up, as the step player reports them (its callback sets the
                            step, then the page runs): the decode is cached, the page only re-renders
  apptest.force_click_ms    forcing another token: one new traced decode, then the render
  greedy_decode_ms          the library call alone (greedy_decode with trace), for comparison

A real server driven by Chromium (skipped when Chromium or Playwright is missing), where a step click reruns
only the page's step fragment. The server runs in a child process with the same timing, so the figures are
server time, not the browser's painting:
  server.first_open_ms      the first run of /decode on a fresh server (cold caches)
  server.step_click_ms      fragment reruns caused by clicking the step player's Next (the player redraws
                            its charts in the browser first, then tells the server)
and the same again on a server with Streamlit's default runner.postScriptGC = true (this app's config turns it
off): a full garbage collection after every run walks the whole heap (torch, plotly, pandas loaded), which was
most of a click.

    python benchmarks/step_click.py [--clicks 20] [--repeats 5] [--no-browser]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from serving import CHROMIUM, CHROMIUM_ARGS, PLAYER_STEP_JS, AppServer, time_script_runs, wait_idle  # noqa: E402


BUDGET_MS = 100.0
PAGE = "pages/explore/decode.py"
CHECKPOINT = ROOT / "assets" / "checkpoints" / "reverse.safetensors"
# Streamlit runs gc.collect() after every script or fragment run by default; .streamlit/config.toml turns it off,
# the peer server on again (an environment variable overrides the config file).
POST_SCRIPT_GC = {"STREAMLIT_RUNNER_POST_SCRIPT_GC": "true"}


def timed_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "max": round(max(values), 1), "n": len(values)}


def run_summary(entries: list[dict]) -> dict:
    return {"wall": summary([e["ms"] for e in entries]), "cpu": summary([e["cpu_ms"] for e in entries])}


# ------------------------------------------------------------------------------------------------ AppTest


def apptest_figures(clicks: int, repeats: int) -> tuple[dict, str]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from ui.tables.decode import DECODE

    view = DECODE.view()  # only for its key names
    step_key, force_key = DECODE.key("step"), DECODE.key("force")

    def state(at, key: str):
        return at.session_state[key] if key in at.session_state else None

    entries: list[dict] = []
    time_script_runs(entries.append)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()  # the home page: imports and the sidebar are paid here, not in first_open
    at.switch_page(PAGE)
    at.run()
    if at.exception:
        raise SystemExit(f"the decode page failed: {[e.value for e in at.exception]}")
    first_open = entries[-1]

    # A step move as the step player reports it: its callback sets the step, then the page runs. Walk to the
    # last step and back; the first two moves warm up.
    last = len(json.loads(next(el for el in at.get("bidi_component") if el.proto.id.endswith("-decode_player"))
                          .proto.json)["steps"])
    steps, step, direction = [], state(at, step_key) or last // 2 + 1, 1
    for _ in range(clicks + 2):
        if not 1 <= step + direction <= last:
            direction = -direction
        step += direction
        at.session_state[step_key] = step
        at.run()
        steps.append(entries[-1])
        assert not at.exception

    forces = []  # force the default alternative at steps 1, 2, ...: each a new decode, never a cache hit
    for step in range(repeats):
        if state(at, force_key):
            at.button(key="decode_reset").click().run()
        at.session_state[step_key] = step + 1
        at.run()
        at.button(key="decode_force_it").click().run()
        forces.append(entries[-1])
        assert state(at, force_key) and not at.exception
    figures = {"first_open_ms": {k: round(first_open[k], 1) for k in ("ms", "cpu_ms")},
               "step_click_ms": run_summary(steps[2:]), "force_click_ms": run_summary(forces)}
    return figures, at.text_input(key=view.widget_key("input")).value


# ------------------------------------------------------------------------------------------ a real server


def server_figures(clicks: int, env: dict[str, str]) -> dict:
    """Open /decode first on a fresh server (its environment updated with `env`), then click Next `clicks`
    times (going back to the first step at the end)."""
    from playwright.sync_api import sync_playwright

    server = AppServer(env=env, timed=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            pg = browser.new_page(viewport={"width": 1400, "height": 900})
            pg.goto(f"{server.url}/decode")
            wait_idle(pg)
            pg.locator(".js-plotly-plot").nth(2).wait_for()
            first_open = server.script_runs()[-1]
            if pg.get_by_role("dialog").count():
                pg.keyboard.press("Escape")
            pg.evaluate(PLAYER_STEP_JS, "first")
            wait_idle(pg)
            done = len(server.script_runs())
            for _ in range(clicks):
                if pg.evaluate(PLAYER_STEP_JS, "next")["disabled"]:
                    pg.evaluate(PLAYER_STEP_JS, "first")
                wait_idle(pg)
            browser.close()
        fragment_runs = [r for r in server.script_runs()[done:] if r["fragment"]]
        return {"first_open_ms": {k: round(first_open[k], 1) for k in ("ms", "cpu_ms")},
                "step_click_ms": run_summary(fragment_runs)}
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clicks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true", help="skip the real-server measurement")
    add_cpu_argument(parser)
    args = parser.parse_args()
    if not CHECKPOINT.exists():
        raise SystemExit(f"missing {CHECKPOINT}: train the shipped reverse model first")

    from ui.decodes import TOPK
    from transformer.store.checkpoints import load_bundle
    from transformer.network.decoding import greedy_decode

    apptest, text = apptest_figures(args.clicks, args.repeats)
    bundle = load_bundle(CHECKPOINT)
    library = [timed_ms(lambda: greedy_decode(bundle.model, bundle.tokenizer, text, k=TOPK))
               for _ in range(args.repeats + 1)][1:]
    browser_ok = Path(CHROMIUM).exists() and not args.no_browser
    skipped = "skipped (no Chromium, or --no-browser)"
    server = server_figures(args.clicks, {}) if browser_ok else skipped
    with_gc = server_figures(args.clicks, POST_SCRIPT_GC) if browser_ok else skipped
    cfg = bundle.config
    medians = [apptest["step_click_ms"]["cpu"]["median"]] + (
        [server["step_click_ms"]["cpu"]["median"]] if browser_ok else [])
    print(json.dumps({
        "model": f"reverse {cfg.n_enc_layers}+{cfg.n_dec_layers} layers x {cfg.n_heads} heads, d_model {cfg.d_model}",
        "input": text,
        "greedy_decode_ms": summary(library),
        "apptest": apptest,
        "server": server,
        "server_with_post_script_gc": with_gc,
        "budget_ms": BUDGET_MS,
        "step_click_cpu_within_budget": max(medians) <= BUDGET_MS,
        "machine": machine(),
    }, indent=2))


if __name__ == "__main__":
    main()
