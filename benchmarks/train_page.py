"""Start -> "Finished" on the Train page in Chromium, against the same preset trained through the CLI (issue 25,
items 3 and 4). Prints JSON.

Each round, in turn (so that load on the machine hits every case alike):
  cli        `python -m transformer train --task T --target-accuracy BAR` (the preset, seed 0): its summary's
             seconds (training with its evaluations: what the CLI calls its training time) and its wall time.
  page@N     a fresh server with AP_WORKER_NICE=N (for each N of --nice), Chromium on the same cores (as on a
             laptop; --browser-group says how it shares them: serving.chromium_here): open /train?task=T, wait
             until the spare worker the page starts has done its imports (a learner reading the page), click
             Start. Timed in the page (every 20 ms, textContent only: no forced
             layouts): the first status line after the click, the first progress line that shows a step done
             (`Step N of`, N >= 1), and "Finished:". Its training rate: steps from the first step shown to the
             end, over that time. Meanwhile, every 0.5 s, the cores used by the worker, the server, Chromium and
             the rest of the machine (/proc; medians over the run).
  bare@N     the same run through the page's own code (ui/runs.py: the spare worker, the probe, polls that build
             the figures) with no browser (app_train.py's "warm" mode), the peer of item 4's rate (measured the
             same way: steps from the first step seen to the end, over that time).
Figures (medians over rounds): page start_to_finished_s / the CLI's seconds (target <= 1.5), first_step_ms
(target <= 1,000), and the page's steps/s over the bare run's at the same nice (target >= 0.8). --fixed-steps N
trains N steps without the early stop instead (a longer, steadier rate for item 4).

    python benchmarks/train_page.py [--task reverse] [--rounds 3] [--nice 0,10] [--fixed-steps N] [--cpu avx2]
                                    [--browser-group shared|own] [--no-bare]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import PRESET_SECONDS, add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from serving import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, ROOT, AppServer, CpuMeter, chromium_here, chromium_missing, cpu_seconds, wait_idle,
    wait_until,
)

TARGETS = {"start_to_finished_s": PRESET_SECONDS, "start_to_finished_over_cli": 1.5, "first_step_ms": 1000,
           "page_rate_over_bare": 0.8}  # the rate at least its target, the others at most
# In-page: click Start, then read the status every 20 ms until "Finished:" (or the timeout); ms from the click.
START_JS = """async (timeout) => {
  const text = sel => { const el = document.querySelector(sel); return el ? el.textContent : ''; };
  const button = document.querySelector('.st-key-train_start button');
  const t0 = performance.now();
  button.click();
  const out = {status_ms: null, first_step_ms: null, first_step: null, finished_ms: null, finished: null};
  while (performance.now() - t0 < timeout) {
    await new Promise(r => setTimeout(r, 20));
    const now = performance.now() - t0, main = text('[data-testid=stMain]');
    const bar = text('[data-testid=stProgress]');
    if (out.status_ms === null && (bar || main.includes('Starting a training process'))) out.status_ms = now;
    const step = bar.match(/Step ([\\d,]+) of/);
    if (out.first_step_ms === null && step && +step[1].replace(/,/g, '') > 0) {
      out.first_step_ms = now; out.first_step = +step[1].replace(/,/g, '');
    }
    const done = main.match(/Finished:\\D*?([\\d,]+)[^(]*\\(([^)]*)\\)/);  // its steps, then its time
    if (done) { out.finished_ms = now; out.finished = {steps: +done[1].replace(/,/g, ''), text: done[2]}; break; }
  }
  return out;
}"""


def preset_target(task: str) -> float:
    sys.path.insert(0, str(ROOT))
    from transformer.training.presets import PRESETS

    return PRESETS[task].target


def cli_run(task: str, target: float, fixed_steps: int | None, seed: int) -> dict:
    """The preset through `python -m transformer train` (a fresh interpreter, as a learner runs it)."""
    with tempfile.TemporaryDirectory(prefix="ap-bench-cli-") as folder:
        command = [sys.executable, "-m", "transformer", "train", "--task", task, "--seed", str(seed),
                   "--out", str(Path(folder) / "model.safetensors")]
        command += ["--steps", str(fixed_steps)] if fixed_steps else ["--target-accuracy", str(target)]
        began = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"the CLI failed: {done.stderr[-500:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": summary["seconds"], "wall_s": round(wall, 2), "steps": summary["steps"],
            "steps_per_s": round(summary["steps"] / summary["seconds"], 1), "stopped": summary["stopped"],
            "exact_match": summary["exact_match"]}


# CPU seconds a spare worker's imports (the interpreter, torch, torch._dynamo) take at least: 2-4 s measured. Below
# this its flat CPU time is a worker still reading torch's libraries from disk (a cold start: 7.7 s to the first
# step once, 2026-12-02), not one that is done.
SPARE_IMPORT_CPU = 1.0


def spare_ready(server: AppServer, timeout: float = 120) -> float:
    """Wait until the server's spare worker has done its imports: its CPU time, at least SPARE_IMPORT_CPU, the same
    at two looks 0.2 s apart."""
    began, last = time.perf_counter(), -1.0

    def settled() -> bool:
        nonlocal last
        workers = server.children()
        now = sum(cpu_seconds(pid) for pid in workers)
        done = bool(workers) and now == last and now >= SPARE_IMPORT_CPU
        last = now
        return done

    wait_until(settled, timeout, "the spare worker")
    return round(time.perf_counter() - began, 2)


def page_run(browser, task: str, nice: int, fixed_steps: int | None, timeout: float) -> dict:
    query = f"/train?v=1&task={task}" + (f"&steps={fixed_steps}&stop_early=0" if fixed_steps else "")
    server = AppServer(env={"AP_WORKER_NICE": str(nice)})
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(server.url + query)
        wait_idle(page)
        page.wait_for_selector(".st-key-train_start button:not([disabled])")
        waited = spare_ready(server)
        meter, samples = CpuMeter(server), []
        page.evaluate(f"t => {{ window.apRun = ({START_JS})(t).then(r => window.apSeen = r); }}", timeout * 1000)
        while (seen := page.evaluate("window.apSeen || null")) is None:  # the cores used, every half second
            time.sleep(0.5)
            samples.append(meter.cores())
        cores = {part: median([s[part] for s in samples[:-1] or samples]) for part in samples[0]}
        page.close()
    finally:
        server.stop()
    if seen["finished_ms"] is None:
        return {"nice": nice, "finished": False, **seen}
    steps = seen["finished"]["steps"]
    rate = None
    if seen["first_step_ms"] is not None and seen["finished_ms"] > seen["first_step_ms"]:
        rate = (steps - seen["first_step"]) / ((seen["finished_ms"] - seen["first_step_ms"]) / 1000)
    return {"nice": nice, "finished": True, "start_to_finished_s": round(seen["finished_ms"] / 1000, 2),
            "first_status_ms": round(seen["status_ms"]) if seen["status_ms"] else None,
            "first_step_ms": round(seen["first_step_ms"]) if seen["first_step_ms"] else None,
            "steps": steps, "shown_training_time": seen["finished"]["text"],
            "steps_per_s": round(rate, 1) if rate else None, "spare_ready_s": waited, "cores_used": cores}


def bare_run(task: str, nice: int, fixed_steps: int | None, timeout: float) -> dict:
    """app_train.py's "warm" mode (the page's code, no browser) in a process of its own at AP_WORKER_NICE=nice."""
    command = [sys.executable, str(ROOT / "benchmarks" / "app_train.py"), "--task", task, "--modes", "warm",
               "--repeats", "1", "--timeout", str(timeout), "--no-peer", "--no-clicks"]
    command += ["--fixed-steps", str(fixed_steps)] if fixed_steps else []
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "AP_WORKER_NICE": str(nice)}, capture_output=True,
                          text=True, timeout=timeout + 120)
    if done.returncode != 0:
        raise RuntimeError(f"the run without a browser failed: {done.stderr[-800:]}")
    run = json.loads(done.stdout)["runs"][0]
    return {"nice": nice, "seconds_to_target": run["seconds_to_target"], "wall_s": run["wall_seconds"],
            "steps": run["steps"], "training_seconds": run["training_seconds"], "first_step_s": run["first_step_s"],
            "steps_per_s": run["steps_per_s_after_first"], "reason": run["reason"]}


def median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def summarise(rounds: list[dict], nices: list[int]) -> dict:
    cli = median([r["cli"]["seconds"] for r in rounds])
    out = {"cli_seconds": cli, "cli_steps_per_s": median([r["cli"]["steps_per_s"] for r in rounds])}
    for nice in nices:
        pages = [r[f"page@{nice}"] for r in rounds]
        finished = median([p.get("start_to_finished_s") for p in pages])
        rate = median([p.get("steps_per_s") for p in pages])
        bare = median([r[f"bare@{nice}"]["steps_per_s"] for r in rounds if f"bare@{nice}" in r])
        out[f"nice {nice}"] = {
            "start_to_finished_s": finished,
            "start_to_finished_over_cli": round(finished / cli, 2) if finished else None,
            "first_step_ms": median([p.get("first_step_ms") for p in pages]),
            "first_status_ms": median([p.get("first_status_ms") for p in pages]),
            "page_steps_per_s": rate, "bare_steps_per_s": bare,
            "page_rate_over_bare": round(rate / bare, 2) if rate and bare else None,
            "browser_cores": median([p.get("cores_used", {}).get("browser") for p in pages]),
            "worker_cores": median([p.get("cores_used", {}).get("workers") for p in pages]),
        }
        out[f"nice {nice}"]["met"] = met(out[f"nice {nice}"])
    return out


def met(shown: dict) -> dict:
    """Which of TARGETS one nice level's summary meets (a figure it has not got meets none)."""
    return {name: shown[name] is not None and (shown[name] >= target if name == "page_rate_over_bare"
                                               else shown[name] <= target) for name, target in TARGETS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reverse")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nice", default="0,10", help="AP_WORKER_NICE values, comma-separated")
    parser.add_argument("--fixed-steps", type=int, default=None, help="train N steps, no early stop")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--no-bare", action="store_true", help="skip the runs without a browser")
    parser.add_argument("--browser-group", choices=("shared", "own"), default="shared",
                        help="shared: Chromium competes with the server and its workers thread by thread (macOS, "
                             "Windows); own: in a Linux scheduling group of its own (a Linux desktop's browser)")
    add_cpu_argument(parser)
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    from playwright.sync_api import sync_playwright

    nices = [int(n) for n in args.nice.split(",") if n.strip()]
    target = preset_target(args.task)
    rounds = []
    with sync_playwright() as p, (chromium_here(p) if args.browser_group == "shared" else
                                  p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)) as browser:
        browser.new_page().close()
        for _ in range(args.rounds):
            result = {"cli": cli_run(args.task, target, args.fixed_steps, args.seed)}
            for nice in nices:
                result[f"page@{nice}"] = page_run(browser, args.task, nice, args.fixed_steps, args.timeout)
                if not args.no_bare:
                    result[f"bare@{nice}"] = bare_run(args.task, nice, args.fixed_steps, args.timeout)
            rounds.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "train_page", "task": args.task, "browser_group": args.browser_group,
                      "target": target, "fixed_steps": args.fixed_steps, "targets": TARGETS,
                      "summary": summarise(rounds, nices), "rounds": rounds,
                      "machine": machine(torch_threads=1)}))


if __name__ == "__main__":
    main()
