"""How long does pressing Start on the Train page take to reach the task's bar (`reverse`: 99% held-out exact
match)? Prints JSON. benchmarks/train_page.py times the real page in Chromium; this one, the page's code alone.

Drives the page's own code path (ui/runs.py): the page's default settings (the task's preset), its run (runs.new_run: a
ProcessJob, the run in a worker process of its own) with the page's probe (greedy decode + cross-attention
every PROBE_EVERY steps, in the worker), and, every POLL_SECONDS as the page's live fragment does, a
snapshot, a heartbeat and the live figures (built through the page's FigureCache, then serialised as
st.plotly_chart does) in this process, the server's stand-in. Modes, interleaved in one run (A B A B ...)
so that a machine whose load moves moves them alike:
  process    the app today: runs.new_run, a worker process per run (its start-up on the clock)
  warm       the same, when the server already holds a warm spare worker (workers.prepare_spare(): the Train
             page starts one when it is shown), so the interpreter and torch start-up is off the clock
  thread     the app before issue 10: the same run as a TrainingJob, a thread of this process that
             shares its interpreter with the polling (the peer)
  warm2      "warm" with two torch threads in the worker (not run unless asked for: --modes warm,warm2)
  bare_job   the same settings as a TrainingJob with no probe and no polling, once (what the app adds)
  clicks     the server time of widget clicks on the Train page (AppTest, whole-script reruns) while a run
             trains: the page must stay responsive
Seconds are wall time from pressing Start (new_run + start, as the page's callback does) until the page
can see "finished" with "target reached" (confirmed on confirm_samples held-out pairs), observed every
20 ms. Other processes on the machine slow every figure; load_avg is reported.

    python benchmarks/app_train.py [--task reverse] [--modes process,warm,thread] [--repeats 2] [--timeout 180]
                                   [--threads 1] [--fixed-steps N] [--no-peer] [--no-clicks] [--cpu avx2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from serving import cpu_seconds  # noqa: E402
from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from ui.runtime import configure_torch  # noqa: E402  (after the sys.path insert)

configure_torch()

import plotly.io as pio  # noqa: E402  (after configure_torch)

from ui import runs  # noqa: E402
from ui.run_settings import MODEL_DEFAULTS_ALL, RunSettings  # noqa: E402
from ui.tables.train import ALL_HEADS, TRAIN  # noqa: E402
from transformer.charts.training import curves_figure, progress  # noqa: E402
from transformer.runs import workers  # noqa: E402
from transformer.runs.job import TRAINING_THREADS, Ending, State  # noqa: E402
from transformer.runs.thread_job import TrainingJob  # noqa: E402
from transformer.runs.probe import Probe, example_input  # noqa: E402
from transformer.tasks import make_task  # noqa: E402
from transformer.training.presets import PRESETS  # noqa: E402
from transformer.training.trainer import Trainer  # noqa: E402

MODES = ("process", "warm", "thread", "warm2")


def page_settings(task: str, fixed_steps: int | None = None) -> RunSettings:
    """What the Train page trains when `task` is picked and Start pressed: its preset, stopping at its bar (or
    `fixed_steps` steps with no early stop)."""
    preset = PRESETS[task]
    train = preset.train_config(**({"steps": fixed_steps} if fixed_steps else {}))
    return RunSettings(train, {**MODEL_DEFAULTS_ALL, **preset.model}, None if fixed_steps else preset.target)


def poll(run: runs.Run, cache: runs.FigureCache) -> None:
    """What one refresh of the page's live fragment does, minus the websocket."""
    snapshot = run.snapshot()
    run.heartbeat()
    progress(snapshot, run.settings.target)
    figures = [cache.get("curves", len(snapshot.history), lambda: curves_figure(snapshot, run.task.name))]
    timeline = run.timeline(snapshot)
    if timeline and timeline[-1][1].error is None:
        step, result = timeline[-1]
        figures.append(cache.get("probe", id(result), lambda: runs.probe_figure(result, step, 0, None)))
    for fig in figures:
        pio.to_json(fig, validate=False)


def thread_run(settings: RunSettings) -> runs.Run:
    """The run the page built before issue 10: a TrainingJob (a thread of the server) with the same probe."""
    task = make_task(settings.train.task, **settings.train.task_params)
    probe = Probe(example_input(task))
    job = TrainingJob(Trainer(settings.train, settings.model), target_exact_match=settings.target, probe=probe,
                      probe_every=runs.PROBE_EVERY, idle_timeout=workers.IDLE_TIMEOUT)
    return runs.Run(job, probe, settings, task)


def summary(snapshot, wall: float | None, total: float) -> dict:
    last = snapshot.history[-1] if snapshot.history else {}
    reached = snapshot.finished_reason == Ending.TARGET
    return {
        "reached": reached,
        "seconds_to_target": round(wall, 2) if reached and wall is not None else None,
        "wall_seconds": round(total, 2),
        "training_seconds": round(snapshot.elapsed, 2),
        "steps": snapshot.step,
        "steps_per_s": round(snapshot.step / total, 2),
        "training_steps_per_s": round(snapshot.step / snapshot.elapsed, 2) if snapshot.elapsed else None,
        "final_exact_match": last.get("exact_match"),
        "final_eval_samples": last.get("samples"),
        "state": snapshot.state,
        "reason": snapshot.finished_reason,
        "error": snapshot.error,
    }


def watch(run: runs.Run, start: float, seen: dict, done: threading.Event) -> None:
    """Note when the page could first see a step done and the run ended (every 20 ms: finer than its polls)."""
    while not done.is_set():
        snapshot = run.snapshot()
        if snapshot.step and "first_step" not in seen:
            seen["first_step"], seen["first_step_at"] = snapshot.step, time.perf_counter() - start
        if snapshot.state not in (State.RUNNING, State.QUEUED, State.IDLE):
            seen["ended"] = time.perf_counter() - start
            return
        time.sleep(0.02)


def wait_for_spare(timeout: float) -> bool:
    """Wait until the spare worker has done its imports: its CPU time stops growing for half a second."""
    pid, deadline, last = workers.spare_pid(), time.monotonic() + timeout, -1.0
    while pid is not None and time.monotonic() < deadline:
        now = cpu_seconds(pid)
        if now == last:
            return True
        last = now
        time.sleep(0.5)
    return False


def run_app(mode: str, settings: RunSettings, timeout: float) -> dict:
    if mode == "warm2":
        threads = runs.worker_threads
        runs.worker_threads = lambda: 2  # noqa: E731  (this run's worker only)
        try:
            return {**run_app("warm", settings, timeout), "mode": "warm2", "worker_threads": 2}
        finally:
            runs.worker_threads = threads
    if mode in ("warm", "warm2"):
        began = time.perf_counter()
        workers.prepare_spare()  # as the Train page does when it is shown
        ready = wait_for_spare(timeout)  # a user reading the page for a few seconds before Start
        warm_up = {"spare_ready_seconds": round(time.perf_counter() - began, 2), "spare_ready": ready}
    else:
        warm_up = {}
    cache, poll_ms, seen, done = runs.FigureCache(), [], {}, threading.Event()
    start = time.perf_counter()
    run = thread_run(settings) if mode == "thread" else runs.new_run(settings)
    run.start()
    watcher = threading.Thread(target=watch, args=(run, start, seen, done), daemon=True)
    watcher.start()
    while not run.job.join(runs.POLL_SECONDS) and time.perf_counter() - start < timeout:
        began = time.perf_counter()
        poll(run, cache)
        poll_ms.append((time.perf_counter() - began) * 1000)
    total = time.perf_counter() - start
    watcher.join(timeout=2.0)  # it returns once it has seen the run end
    done.set()
    watcher.join()
    run.stop()
    run.job.join()
    snapshot, first = run.snapshot(), seen.get("first_step_at")
    rate = None if first is None or "ended" not in seen else \
        (snapshot.step - seen["first_step"]) / (seen["ended"] - first)
    return {"mode": mode, **summary(snapshot, seen.get("ended"), total), **warm_up,
            "first_step_s": None if first is None else round(first, 2),
            "steps_per_s_after_first": None if rate is None else round(rate, 1),
            "probes": len(run.snapshot().probes), "polls": len(poll_ms),
            "poll_ms_median": round(statistics.median(poll_ms), 1) if poll_ms else None,
            "poll_ms_max": round(max(poll_ms), 1) if poll_ms else None}


def run_bare(settings: RunSettings, timeout: float) -> dict:
    job = TrainingJob(Trainer(settings.train, settings.model), target_exact_match=settings.target)
    start = time.perf_counter()
    job.start()
    job.join(timeout)
    wall = time.perf_counter() - start
    job.stop()
    job.join()
    return summary(job.snapshot(), wall, wall)


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
    run = at.session_state[runs.RUN]
    deadline = time.monotonic() + 120
    while run.snapshot().step == 0 and time.monotonic() < deadline:  # the worker has started
        time.sleep(0.2)
    at.run()
    first, times = run.snapshot().step, []
    for i in range(clicks):
        time.sleep(wait)
        began = time.perf_counter()
        at.selectbox(key=TRAIN.view().widget_key("head")).set_value(1 if i % 2 == 0 else ALL_HEADS).run()
        times.append((time.perf_counter() - began) * 1000)
        assert not at.exception, [e.value for e in at.exception]
    last = run.snapshot().step
    run.stop()
    return {"clicks": clicks, "median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1),
            "steps_during_clicks": last - first}


def figures(results: list[dict]) -> dict:
    """Per mode: the seconds of each repeat and their median."""
    out = {}
    for mode in dict.fromkeys(r["mode"] for r in results):
        seconds = [r["seconds_to_target"] for r in results if r["mode"] == mode]
        reached = [s for s in seconds if s is not None]
        out[mode] = {"seconds_to_target": seconds,
                     "median": round(statistics.median(reached), 2) if reached else None,
                     "training_steps_per_s": [r["training_steps_per_s"] for r in results if r["mode"] == mode]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reverse")
    parser.add_argument("--modes", default=",".join(MODES[:3]), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of every mode (interleaved)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads of a worker (default: the app's choice, runs.worker_threads())")
    parser.add_argument("--timeout", type=float, default=180.0, help="give up a run after this many seconds")
    parser.add_argument("--no-peer", action="store_true", help="skip the bare-job peer")
    parser.add_argument("--no-clicks", action="store_true", help="skip the click-latency measurement")
    parser.add_argument("--fixed-steps", type=int, default=None, help="train N steps, no early stop")
    add_cpu_argument(parser)
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
    if args.threads is not None:
        runs.worker_threads = lambda: args.threads  # noqa: E731  (the benchmark's override of the app's choice)
    settings = page_settings(args.task, args.fixed_steps)
    results = []
    for _ in range(args.repeats):
        for mode in modes:
            results.append(run_app(mode, settings, args.timeout))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    workers.end_spare()
    out = {
        "task": args.task,
        "target_exact_match": settings.target,
        "settings": json.loads(settings.key()),
        "probe_every": runs.PROBE_EVERY,
        "poll_seconds": runs.POLL_SECONDS,
        "worker_threads": runs.worker_threads(),
        "worker_nice": workers.worker_nice(),
        "figures": figures(results),
        "runs": results,
    }
    if not args.no_peer:
        out["bare_job"] = run_bare(settings, args.timeout)
    if not args.no_clicks:
        out["clicks_while_training"] = click_times()
    out["machine"] = machine(torch_threads=TRAINING_THREADS)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
