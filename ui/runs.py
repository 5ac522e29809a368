"""A session's training runs: the Run (its job, probe and settings), kept in st.session_state; the untrained
preview; and the few things the Train page leaves for its own next run (a start request, a message, the figures
it last built, drawn by the same functions as every page's).

The job is built in `new_run` by `transformer.runs.make_job` and used only through Run's methods: a ProcessJob,
so each run trains in a worker process of its own (never a thread of the web server), takes one of the server's
training slots or waits in its line (AP_MAX_RUNS, AP_MAX_QUEUED), and ends with the server; or, when
AP_RAY_ADDRESS names a Ray cluster, a RayJob whose worker Ray places on the cluster. The workers themselves (the
warm spare, nice levels, the keeper that stops the runs of sessions gone and parks idle paused ones) are
`transformer.runs.workers`'. A run is counted against its session's and computer's shares of live runs
(AP_RUNS_PER_SESSION, AP_RUNS_PER_CLIENT: the owner and client the model registry names). A run lives in its
session's st.session_state only: a session sees and controls its own runs and no other.
benchmarks/app_train.py runs the same Run, probe and figures, so it measures what the page runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequestType

from transformer.bundle import ModelBundle
from transformer.charts import with_title_line
from transformer.i18n import language, t
from transformer.runs import make_job, workers
from transformer.runs.job import TRAINING_THREADS, Job, JobSnapshot, State
from transformer.runs.probe import Probe, ProbeResult, example_input, run_probe
from transformer.runs.queue import server_queue
from transformer.tasks import Task, make_task
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer
from ui import display
from ui import model_registry as registry
from ui.run_settings import RunSettings

RUN = "train_run"  # session_state key of the current Run
HISTORY = "train_history"  # session_state key: this session's earlier runs, oldest first (ended, no worker)
MAX_HISTORY = 8  # earlier runs kept for the runs table (each holds its last weights and probes: ~1-3 MB)
RUN_COUNT = "train_run_count"  # session_state key: runs numbered so far
KEPT = "train_kept_snapshots"  # session_state key: registry keys of kept snapshots, oldest first
MAX_SNAPSHOTS = 6  # kept snapshots per session; the oldest that is not active goes first
CHARTED = "train_charted"  # session_state key: (run number, snapshot) the live charts were last drawn from
POLL_SECONDS = 0.75  # live view refresh while training runs: its progress and metrics
CHART_SECONDS = 1.5  # and its charts (curves, probe)
POLL_IDLE = 0.15  # seconds of each poll left without a wait (the next poll must find the last one over)
WAIT_SLICE = 0.05  # seconds between checks whether a click or a pick waits for the live view's run to end
FIRST_STEP_WAIT = 0.5  # seconds Start waits for the run's first step before drawing the live view (a warm worker
# takes 0.2-0.3 s; without one, the view says the training process is starting)
LIVE = (State.RUNNING, State.PAUSED, State.QUEUED)  # a run in these states is its session's live run
POLLED = (State.RUNNING, State.QUEUED)  # states whose view redraws itself (a queued run starts by itself)
PROBE_EVERY = 25  # steps between probe snapshots (the job doubles it once it keeps MAX_PROBES)
MIN_PROBE_HEIGHT = 260  # px: the probe's single-head heatmap when the output is only a token or two


@dataclass
class Run:
    """One training run of a session: the job, its probe, what it was built from, and a probe taken on
    demand (step, result) when the probe text changes while the job is not stepping."""

    job: Job
    probe: Probe
    settings: RunSettings
    task: Task
    manual: tuple[int, ProbeResult] | None = None
    added: dict[int, str] = field(default_factory=dict)  # step -> model entry key, once "used"
    kept: dict[int, str] = field(default_factory=dict)  # step -> model entry key of a kept snapshot
    number: int = 0  # 1, 2, ... in the order this session started its runs
    _caught_up: int | None = None  # the step catch_up last probed for

    # -- the job, through these only
    def snapshot(self) -> JobSnapshot:
        return self.job.snapshot()

    def bundle(self, name: str | None = None) -> ModelBundle:
        """The model as of now (taken between steps: its card names the step its weights are at)."""
        return self.job.bundle(name)

    def start(self, steps: int | None = None) -> None:
        """Train (or run exactly `steps` steps, then pause); it waits in the server's line ("queued") when
        every training slot is taken. QueueFullError (a JobLimitError) when the line is full too."""
        if steps is None:
            self.job.start()
        else:
            self.job.step(steps)

    def step(self, steps: int) -> None:
        """A paused run runs exactly `steps` more steps, then pauses again."""
        self.job.step(steps)

    def pause(self) -> None:
        self.job.pause()

    def resume(self) -> None:
        self.job.resume()

    def stop(self) -> None:
        """End training for good (the worker ends after the current step); the model so far is kept."""
        self.job.stop()

    def heartbeat(self) -> None:
        self.job.heartbeat()

    def await_first_step(self, timeout: float = FIRST_STEP_WAIT) -> None:
        """Return once the run has taken a step, is not running (queued, paused, ended), or `timeout` passed:
        the page drawn next then shows training under way rather than a start that waits for its next poll."""
        self.wait_while(State.RUNNING, timeout, past_step=0)

    def wait_while(self, state: str, timeout: float, past_step: int | None = None) -> str:
        """The run's state once it is no longer `state` (or, given `past_step`, once it has stepped beyond it), or
        after `timeout` seconds."""
        return self.job.wait_while(state, timeout, past_step)

    def position(self) -> int | None:
        """k >= 1 while the run is k-th in the server's line (k - 1 runs wait ahead of it); 0 while it
        holds a training slot; None otherwise."""
        return self.job.position()

    # -- the probe
    def timeline(self, snapshot: JobSnapshot) -> list[tuple[int, ProbeResult]]:
        """The probe snapshots, oldest first, with the on-demand probe as the newest when it is."""
        probes = list(snapshot.probes)
        if self.manual is not None and (not probes or self.manual[0] >= probes[-1][0]):
            if probes and probes[-1][0] == self.manual[0]:
                probes.pop()
            probes.append(self.manual)
        return probes

    def probe_now(self, text: str) -> ProbeResult:
        """Decode `text` with the current weights; on success the job probes it from now on."""
        bundle = self.bundle()
        result = run_probe(bundle, text)
        if result.error is None:
            self.job.set_probe_text(text)  # the probe runs in the worker: tell it, not only our copy
            self.manual = (bundle.card["steps"], result)
        return result

    def catch_up(self) -> None:
        """Probe the current weights when the newest probe is older than them (call once a job stops
        stepping: paused, stopped, finished, failed), so the view shows where training stands."""
        snapshot = self.snapshot()
        timeline = self.timeline(snapshot)
        if (not timeline or timeline[-1][0] < snapshot.step) and self._caught_up != snapshot.step:
            bundle = self.bundle()
            self.manual = (bundle.card["steps"], run_probe(bundle, self.probe.text))
            # a killed worker's last weights may be older than its last progress: probe them once, not on
            # every rerun
            self._caught_up = snapshot.step


def new_run(settings: RunSettings, probe_text: str | None = None) -> Run:
    """A run that has not started: its job (a ProcessJob: the run trains in a worker process of its own,
    on the server's queue; a RayJob when a Ray cluster is configured) and its probe (default: the task's
    example). ValueError for settings the Trainer would refuse (e.g. device "cuda" on a server without CUDA)."""
    task = make_task(settings.train.task, **settings.train.task_params)
    probe = Probe(probe_text or example_input(task))
    job = make_job(settings.train, settings.model, target_exact_match=settings.target, probe=probe,
                   probe_every=PROBE_EVERY, idle_timeout=workers.IDLE_TIMEOUT, threads=worker_threads(),
                   launcher=workers.launcher, owner=registry.owner(), client=registry.client())
    return Run(job, probe, settings, task)


def worker_threads() -> int:
    """Torch threads of a run's worker. One, as in the library: TrainingJob trains in a background thread of
    the worker, where two OpenMP threads made the default model slower, not faster, on the 2-core machine
    (benchmarks/threads.py; app_train.py --threads 2 measures it through the page's path)."""
    return TRAINING_THREADS


@st.cache_data(max_entries=32, show_spinner=False)
def preview(settings_key: str, text: str) -> ProbeResult:
    """What the probe shows before Start: the untrained model of these settings (same seed as the run, and
    the same weights: a Trainer builds its model on the CPU whatever its device), decoded on the CPU."""
    data = json.loads(settings_key)
    trainer = Trainer(TrainConfig(**{**data["train"], "device": "cpu"}), data["model"])
    return run_probe(trainer.bundle(), text)


def queue_limits() -> tuple[int, int]:
    """(training slots, places in line) of this server (AP_MAX_RUNS, AP_MAX_QUEUED)."""
    queue = server_queue()
    return queue.limit, queue.max_queued


def current_run() -> Run | None:
    return st.session_state.get(RUN)


def launch(run: Run, steps: int | None = None) -> None:
    """Start the run (or run exactly `steps` steps, then pause) and keep it in this session in place of
    its previous run, which is stopped; it may wait in the server's line. QueueFullError (a JobLimitError)
    when the line is full: then nothing changes, the previous run included."""
    run.start(steps)
    previous = st.session_state.get(RUN)
    run.number = st.session_state[RUN_COUNT] = st.session_state.get(RUN_COUNT, 0) + 1
    st.session_state[RUN] = run
    workers.watch(run.job, _session_alive())
    if previous is not None:
        previous.stop()
        _retire(previous)


def discard_run() -> None:
    """Stop this session's run (its worker ends after the current step) and clear it from the Train page; it
    stays in the session's runs table."""
    run = st.session_state.pop(RUN, None)
    if run is not None:
        run.stop()
        _retire(run)


def _retire(run: Run) -> None:
    """Keep an ended run among the session's earlier runs (the oldest beyond MAX_HISTORY is forgotten)."""
    st.session_state[HISTORY] = [*st.session_state.get(HISTORY, []), run][-MAX_HISTORY:]


def session_runs() -> list[Run]:
    """Every run of this session still known, oldest first: the earlier ones, then the current one."""
    current = st.session_state.get(RUN)
    return [*st.session_state.get(HISTORY, []), *([current] if current is not None else [])]


def run_model(run: Run, origin: str = "trained", name: str | None = None) -> str:
    """The registry key of the run's weights as of now, added to this session's models (not made active) unless
    this step's are already there; origin "snapshot" keeps them as a snapshot (see keep_snapshot)."""
    bundle = run.bundle()
    step = bundle.card["steps"]
    known = (run.kept if origin == "snapshot" else run.added).get(step)
    if known is not None and known in registry.entries():
        return known
    bundle.card.update(name=name or f"{run.task.name}-run{run.number}-step{step}", run=run.number)
    key = registry.add_session_model(bundle, origin, activate=False)
    (run.kept if origin == "snapshot" else run.added)[step] = key
    return key


def keep_snapshot(run: Run) -> str:
    """Keep the run's weights as of now as a model of this session (origin "snapshot", named by run and
    step), for the Compare page and every other; at most MAX_SNAPSHOTS are kept: beyond that the oldest one
    that is not the active model is removed. Returns its registry key."""
    key = run_model(run, "snapshot")
    kept = [k for k in st.session_state.get(KEPT, []) if k in registry.entries() and k != key] + [key]
    while len(kept) > MAX_SNAPSHOTS:
        oldest = next((k for k in kept if k != registry.active_key()), kept[0])
        kept.remove(oldest)
        registry.remove_session_model(oldest)
    st.session_state[KEPT] = kept
    return key


def _session_alive() -> Callable[[], bool] | None:
    """Whether this browser session is still connected, for the keeper (transformer.runs.workers); None outside a
    server (AppTest), where the page's polls heartbeat its run."""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return None
    runtime, session_id = Runtime.instance(), ctx.session_id
    return lambda: runtime.is_active_session(session_id)


# ------------------------------------------------------------------ what the page leaves for its next run

START = "train_start_request"  # {"steps": None or N}: Start/Step clicked, the page starts the run
MESSAGES = "train_messages"  # {slot: (kind, text)}: a message a callback leaves for the page to show
DRAWN = "train_drawn_state"  # the job state the page was last drawn for
FIGURES = "train_figures"  # this session's FigureCache


def request_start(steps: int | None = None) -> None:
    """Start/Step callback: the page starts the run once it has read this rerun's settings (a callback's
    bound arguments would hold the settings of the previous run, missing an edit made just before)."""
    st.session_state[START] = {"steps": steps}


def take_start_request() -> dict | None:
    return st.session_state.pop(START, None)


def say(kind: str, text: str, slot: str = "controls") -> None:
    """Leave a message (`kind`: an st function name) for the next run of the page, shown at `slot`
    (callbacks cannot draw there)."""
    st.session_state.setdefault(MESSAGES, {})[slot] = (kind, text)


def watch_ends(polled: float) -> float:
    """The time.monotonic() at which the watch after a poll drawn at `polled` gives way to the next poll."""
    return polled + POLL_SECONDS - POLL_IDLE


def watch_until_next_poll(run: Run, polled: float, state: str, step: int) -> None:
    """After a poll has drawn the live view in `state` at `step` (at time.monotonic() `polled`), wait for the run to
    leave that state until shortly before the next poll, and rerun the whole page the moment it does: the end of a
    run shows when it comes, not up to a poll later. A running run drawn before its first step reruns the live
    view's own fragment the moment it takes that step: the first progress line, likewise (a worker still starting
    took longer than Start's wait, runs.FIRST_STEP_WAIT). Only in the live view's own runs (a run of the whole
    page, Start's, ends at once, so the browser drops what it no longer shows), and only while nothing waits for
    this run to end: a click or a pick ends the watch at once."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not ctx.fragment_ids_this_run:
        return
    first = state == State.RUNNING and step == 0
    while (left := watch_ends(polled) - time.monotonic()) > 0 and not asked_again(ctx):
        if run.wait_while(state, min(left, WAIT_SLICE), 0 if first else None) != state:
            st.rerun()
        if first and run.snapshot().step:
            st.rerun(scope="fragment")


def asked_again(ctx) -> bool:
    """Whether a click, a pick or a poll waits for this script run to end. Streamlit queues a fragment's runs behind
    the run under way (they never cut it short) and has no public way to ask, so this reads its queue of requests
    (Streamlit 1.67; tests/browser/test_browser_live_watch.py fails when that changes)."""
    requests = ctx.script_requests
    return requests is not None and requests._state != ScriptRequestType.CONTINUE


def chart_snapshot(run: Run, now: JobSnapshot) -> JobSnapshot:
    """The snapshot a live run's charts are renewed from (every CHART_SECONDS, or on a pick), given its newest
    (`now`): `now`, unless the run ends sooner than the next renewal would come; then the one drawn last, since
    its end redraws the charts, and a frame shown for less than a renewal interval would have cost the browser as
    much CPU as any other (the training of a run of a few seconds, on a laptop's two cores, lost a tenth of its
    time to it). Until it holds the first probe (taken before the first step), `now` always."""
    kept, left = st.session_state.get(CHARTED), now.seconds_left()
    if kept is None or kept[0] != run.number or not kept[1].probes or left is None or left > CHART_SECONDS:
        kept = st.session_state[CHARTED] = (run.number, now)
    return kept[1]


def take_message(slot: str) -> tuple[str, str] | None:
    return st.session_state.get(MESSAGES, {}).pop(slot, None)


def drawn_state() -> str | None:
    return st.session_state.get(DRAWN)


def set_drawn_state(state: str | None) -> None:
    st.session_state[DRAWN] = state


class FigureCache:
    """The last figure built for each slot, rebuilt only when its key changes: a live view redraws every
    poll, but building a plotly figure costs far more (~50-100 ms of Python, holding the GIL the training
    thread needs) than sending one again."""

    def __init__(self):
        self._slots: dict[str, tuple[Any, Any]] = {}

    def get(self, slot: str, key, build: Callable[[], Any]):
        key = (language(), key)  # a figure's words are the reader's: a switch of language builds it afresh
        hit = self._slots.get(slot)
        if hit is None or hit[0] != key:
            hit = self._slots[slot] = (key, build())
        return hit[1]


def figures() -> FigureCache:
    return st.session_state.setdefault(FIGURES, FigureCache())


def probe_figure(result: ProbeResult, step: int, layer: int, head: int | None):
    """The probe's cross-attention at training step `step`: one head (0-based `layer`, `head`), or every head
    of every layer (head=None); tall enough to read when an early model writes only a token or two. One head's
    chart is narrow (beside the curves): its title puts the step on a second line, so none of it is cut off."""
    if head is None:
        fig = display.cross_figure(result, layer, display.ALL_HEADS, extra=t("train.step_title", step=step))
        return fig.update_layout(height=max(fig.layout.height, MIN_PROBE_HEIGHT))
    fig = display.cross_figure(result, layer, head)
    fig.update_layout(height=max(fig.layout.height, MIN_PROBE_HEIGHT))
    return with_title_line(fig, t("train.step_title", step=step))
