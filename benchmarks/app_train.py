"""How long does pressing Start on the Train page take to reach 99% held-out exact match on `reverse`? Prints JSON.

Drives the page's own code path (ui/runs.py): the page's default settings, its
TrainingJob with the page's probe (greedy decode + cross-attention every PROBE_EVERY steps, in the training
thread), and, every POLL_SECONDS as the page's live fragment does, a snapshot, a heartbeat and the live
figures (built through the page's FigureCache, then serialised as st.plotly_chart does). In the same run:
  app        the page's path, as above
  bare_job   the same settings as a TrainingJob with no probe and no polling (the peer: what the app adds)
  clicks     the server time of widget clicks on the Train page (AppTest, whole-script reruns) while a run
             trains: the page must stay responsive
Seconds are wall time from job.start() until the job finishes with "target reached" (confirmed on
confirm_samples held-out pairs). Other processes on the machine slow every figure; load_avg is reported.

    python benchmarks/app_train.py [--task reverse] [--timeout 180] [--no-peer] [--no-clicks]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ui.runtime import configure_torch  # noqa: E402  (after the sys.path insert)

configure_torch()

import plotly.io as pio  # noqa: E402  (after configure_torch)
import torch  # noqa: E402

from ui import runs  # noqa: E402
from ui.run_settings import RunSettings  # noqa: E402
from ui.tables.train import ALL_HEADS, TRAIN  # noqa: E402
from transformer.charts.training import curves_figure, progress  # noqa: E402
from transformer.job import TRAINING_THREADS, TrainingJob  # noqa: E402


def poll(run: runs.Run, cache: runs.FigureCache) -> None:
    """What one refresh of the page's live fragment does, minus the websocket."""
    snapshot = run.job.snapshot()
    run.job.heartbeat()
    progress(snapshot, run.settings.target)
    figures = [cache.get("curves", len(snapshot.history), lambda: curves_figure(snapshot, run.task.name))]
    timeline = run.timeline(snapshot)
    if timeline and timeline[-1][1].error is None:
        step, result = timeline[-1]
        figures.append(cache.get("probe", id(result), lambda: runs.probe_figure(result, step, 0, None)))
    for fig in figures:
        pio.to_json(fig, validate=False)


def summary(job: TrainingJob, wall: float) -> dict:
    snapshot = job.snapshot()
    last = snapshot.history[-1] if snapshot.history else {}
    return {
        "reached": snapshot.finished_reason == "target reached",
        "seconds_to_target": round(wall, 2) if snapshot.finished_reason == "target reached" else None,
        "wall_seconds": round(wall, 2),
        "training_seconds": round(snapshot.elapsed, 2),
        "steps": snapshot.step,
        "steps_per_s": round(snapshot.step / wall, 2),
        "final_exact_match": last.get("exact_match"),
        "final_eval_samples": last.get("samples"),
        "state": snapshot.state,
        "reason": snapshot.finished_reason,
        "error": snapshot.error,
    }


def run_app(settings: RunSettings, timeout: float) -> dict:
    run, cache, poll_ms = runs.new_run(settings), runs.FigureCache(), []
    start = time.perf_counter()
    run.job.start()
    while not run.job.join(runs.POLL_SECONDS) and time.perf_counter() - start < timeout:
        began = time.perf_counter()
        poll(run, cache)
        poll_ms.append((time.perf_counter() - began) * 1000)
    wall = time.perf_counter() - start
    run.job.stop()
    run.job.join()
    return {**summary(run.job, wall), "probes": len(run.job.snapshot().probes),
            "polls": len(poll_ms), "poll_ms_median": round(statistics.median(poll_ms), 1) if poll_ms else None,
            "poll_ms_max": round(max(poll_ms), 1) if poll_ms else None}


def run_bare(settings: RunSettings, timeout: float) -> dict:
    job = TrainingJob(runs.new_run(settings).job.trainer, target_exact_match=settings.target)
    start = time.perf_counter()
    job.start()
    job.join(timeout)
    wall = time.perf_counter() - start
    job.stop()
    job.join()
    return summary(job, wall)


def click_times(clicks: int = 8, wait: float = 1.0) -> dict:
    """Server time of widget clicks (the probe's Head picker, All heads <-> Head 1) on the Train page while
    it trains with its defaults. AppTest reruns the whole script on every click, so this bounds what a
    browser click costs (there, a pick inside the live fragment reruns only the fragment)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/models/train.py")
    at.run()
    at.button(key="train_start").click().run()
    time.sleep(wait)
    at.run()
    job = at.session_state[runs.RUN].job
    first, times = job.snapshot().step, []
    for i in range(clicks):
        time.sleep(wait)
        began = time.perf_counter()
        at.selectbox(key=TRAIN.view().widget_key("head")).set_value(1 if i % 2 == 0 else ALL_HEADS).run()
        times.append((time.perf_counter() - began) * 1000)
        assert not at.exception, [e.value for e in at.exception]
    last = job.snapshot().step
    job.stop()
    job.join()
    return {"clicks": clicks, "median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1),
            "steps_during_clicks": last - first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reverse")
    parser.add_argument("--timeout", type=float, default=180.0, help="give up after this many seconds")
    parser.add_argument("--no-peer", action="store_true", help="skip the bare-job peer")
    parser.add_argument("--no-clicks", action="store_true", help="skip the click-latency measurement")
    args = parser.parse_args()
    defaults = RunSettings()
    settings = RunSettings(dataclasses.replace(defaults.train, task=args.task), defaults.model, defaults.target)
    out = {
        "task": args.task,
        "target_exact_match": settings.target,
        "settings": json.loads(settings.key()),
        "probe_every": runs.PROBE_EVERY,
        "poll_seconds": runs.POLL_SECONDS,
        "app": run_app(settings, args.timeout),
    }
    if not args.no_peer:
        out["bare_job"] = run_bare(settings, args.timeout)
    if not args.no_clicks:
        out["clicks_while_training"] = click_times()
    out["machine"] = {"cpus": os.cpu_count(), "torch_threads": TRAINING_THREADS, "torch": torch.__version__,
                      "python": platform.python_version(), "load_avg": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
