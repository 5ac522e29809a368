"""The Train page's state: its defaults and widget bounds, the probe that runs inside the training thread,
the run kept in st.session_state, and a per-server keeper that heartbeats jobs whose browser session is
still connected (so switching pages never stops training) and stops those whose session is gone.

benchmarks/app_train.py imports the same defaults, probe and figures, so it measures what the page runs.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from transformer import charts
from transformer.config import BOUNDS, ModelConfig
from transformer.export import chart_filename
from transformer.job import JobSnapshot, TrainingJob
from transformer.probe import Probe, ProbeResult, example_input, run_probe
from transformer.tasks import TASKS
from transformer.training import MODEL_DEFAULTS, TrainConfig, Trainer

RUN = "train_run"  # session_state key of the current Run
POLL_SECONDS = 0.75  # live view refresh while training runs
PROBE_EVERY = 25  # steps between probe snapshots (the job doubles it once it keeps MAX_PROBES)
IDLE_TIMEOUT = 60.0  # seconds without a heartbeat before a running job of a vanished session stops
KEEPER_PERIOD = 5.0  # seconds between the keeper's sweeps
CURVE_POINTS = 200  # most history rows a live curve sends per refresh
TARGET_EXACT_MATCH = 0.99
MIN_PROBE_HEIGHT = 260  # px: the probe's single-head heatmap when the output is only a token or two
TASK_KEY = "train_task"


@dataclass(frozen=True)
class Field:
    """A numeric setting's widget: label, inclusive bounds, step, help (and a printf format for floats)."""

    label: str
    lo: float
    hi: float
    step: float
    help: str
    fmt: str | None = None


MODEL_DEFAULTS_ALL: dict[str, Any] = {
    **MODEL_DEFAULTS,
    **{f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in ("norm", "positional")},
}
TRAIN_DEFAULTS = TrainConfig()

MODEL_FIELDS = {
    "n_enc_layers": Field("Encoder layers", 1, 6, 1, "Stacked encoder blocks (self-attention + feed-forward)."),
    "n_dec_layers": Field("Decoder layers", 1, 6, 1, "Stacked decoder blocks (masked self-, cross-attention, "
                          "feed-forward)."),
    "n_heads": Field("Heads", 1, 16, 1, "Attention heads per layer; d_model must divide evenly among them."),
    "d_model": Field("d_model", 8, 512, 8, "Width of every token vector."),
    "d_ff": Field("d_ff", 8, 2048, 8, "Hidden width of the feed-forward sublayer."),
    "dropout": Field("Dropout", 0.0, 0.5, 0.05, "Fraction of activations zeroed while training.", "%.2f"),
}
TRAIN_FIELDS = {
    "lr": Field("Learning rate", 1e-5, 0.05, 5e-4, "Peak learning rate, reached after the warm-up.", "%.4f"),
    "warmup": Field("Warm-up steps", 0, 5000, 50, "Steps over which the learning rate rises linearly."),
    "batch_size": Field("Batch size", 1, 1024, 16, "Training pairs per step."),
    "steps": Field("Total steps", 1, 100_000, 100, "The most optimisation steps to run; the learning rate "
                   "schedule spans them."),
    "label_smoothing": Field("Label smoothing", 0.0, 0.5, 0.05, "Probability mass spread over wrong tokens "
                             "in the loss.", "%.2f"),
    "seed": Field("Seed", 0, 2**31 - 1, 1, "Seeds the weights and the training batches."),
}
PARAM_FIELDS = {
    "min_len": Field("Shortest string", 1, 48, 1, "Fewest letters in a training string."),
    "max_len": Field("Longest string", 1, 48, 1, "Most letters in a training string."),
    "max_digits": Field("Digits per number", 1, 8, 1, "Each of the two numbers has up to this many digits."),
    "min_year": Field("Earliest year", 1000, 9999, 1, "Dates are drawn from this year on."),
    "max_year": Field("Latest year", 1000, 9999, 1, "Dates are drawn up to this year."),
    "max_value": Field("Largest number", 10, 999_999, 1, "Numbers run from zero to this."),
}
NORM_LABELS = {"pre": "Pre-norm (x + f(norm(x)))", "post": "Post-norm (norm(x + f(x)), the paper's)"}
POSITIONAL_LABELS = {"sinusoidal": "Sinusoidal", "learned": "Learned", "none": "None"}


def task_defaults(task: str) -> dict[str, int]:
    """A task's parameters and their defaults, read from its constructor."""
    params = inspect.signature(TASKS[task].__init__).parameters
    return {name: p.default for name, p in params.items() if name != "self"}


# ------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class RunSettings:
    """Everything a run is built from: training settings, model-shape overrides, and the early-stop target."""

    train: TrainConfig = field(default_factory=TrainConfig)
    model: dict = field(default_factory=lambda: dict(MODEL_DEFAULTS_ALL))
    target: float | None = TARGET_EXACT_MATCH

    def key(self) -> str:
        """A stable text form, for cache keys."""
        return json.dumps({"train": self.train.to_dict(), "model": self.model, "target": self.target},
                          sort_keys=True)


def settings_problem(settings: RunSettings) -> str | None:
    """The first thing wrong with `settings`, in the library's words; None when a run can be built."""
    try:
        settings.train.validate()
        ModelConfig(src_vocab=BOUNDS["src_vocab"][0], tgt_vocab=BOUNDS["tgt_vocab"][0], **settings.model)
    except (ValueError, TypeError) as exc:
        return str(exc)
    if settings.target is not None and not 0 < settings.target <= 1:
        return f"the target exact match must lie in (0, 1], got {settings.target}"
    return None


# ------------------------------------------------------------------------------------------------ run


@dataclass
class Run:
    """One training run of a session: the job, its probe, what it was built from, and a probe taken on
    demand (step, result) when the probe text changes while the job is not stepping."""

    job: TrainingJob
    probe: Probe
    settings: RunSettings
    manual: tuple[int, ProbeResult] | None = None
    added: dict[int, str] = field(default_factory=dict)  # step -> model entry key, once "used"

    @property
    def task(self):
        return self.job.trainer.task

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
        bundle = self.job.bundle()
        result = run_probe(bundle, text)
        if result.error is None:
            self.probe.text = text
            self.manual = (bundle.card["steps"], result)
        return result

    def catch_up(self) -> None:
        """Probe the current weights when the newest probe is older than them (call once a job stops
        stepping: paused, stopped, finished, failed), so the view shows where training stands."""
        snapshot = self.job.snapshot()
        timeline = self.timeline(snapshot)
        if not timeline or timeline[-1][0] < snapshot.step:
            bundle = self.job.bundle()  # taken between steps: its card names the step its weights are at
            self.manual = (bundle.card["steps"], run_probe(bundle, self.probe.text))


def new_run(settings: RunSettings, probe_text: str | None = None) -> Run:
    """A run that has not started: its Trainer, probe (default: the task's example) and TrainingJob."""
    trainer = Trainer(settings.train, settings.model)
    probe = Probe(probe_text or example_input(trainer.task))
    job = TrainingJob(trainer, target_exact_match=settings.target, probe=probe, probe_every=PROBE_EVERY,
                      idle_timeout=IDLE_TIMEOUT)
    return Run(job, probe, settings)


@st.cache_data(max_entries=32, show_spinner=False)
def preview(settings_key: str, text: str) -> ProbeResult:
    """What the probe shows before Start: the untrained model of these settings (same seed as the run)."""
    data = json.loads(settings_key)
    trainer = Trainer(TrainConfig(**data["train"]), data["model"])
    return run_probe(trainer.bundle(), text)


def current_run() -> Run | None:
    return st.session_state.get(RUN)


def launch(run: Run, steps: int | None = None) -> None:
    """Start the run (or run exactly `steps` steps, then pause) and keep it in this session.
    JobLimitError when the server already runs its cap of jobs."""
    if steps is None:
        run.job.start()
    else:
        run.job.step(steps)
    st.session_state[RUN] = run
    _register(run.job, _session_id())


def discard_run() -> None:
    """Stop this session's run (its thread ends after the current step) and forget it."""
    run = st.session_state.pop(RUN, None)
    if run is not None:
        run.job.stop()


# --------------------------------------------------------------------------------------------- keeper

_registry: dict[TrainingJob, list] = {}  # job -> [session id or None, last time the session was seen]
_registry_lock = threading.Lock()
_keeper: threading.Thread | None = None


def _session_id() -> str | None:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def _register(job: TrainingJob, session_id: str | None) -> None:
    global _keeper
    with _registry_lock:
        _registry[job] = [session_id, time.monotonic()]
        if _keeper is None or not _keeper.is_alive():
            _keeper = threading.Thread(target=_keep, name="training-keeper", daemon=True)
            _keeper.start()


def sweep(is_active: Callable[[str], bool], now: float | None = None) -> None:
    """One keeper pass: forget ended jobs; heartbeat jobs whose session is connected; stop any job (paused
    ones included: their own timeout only watches running jobs) whose session has been gone IDLE_TIMEOUT s."""
    now = time.monotonic() if now is None else now
    with _registry_lock:
        entries = list(_registry.items())
    for job, entry in entries:
        session_id, seen = entry
        if job.join(0):
            with _registry_lock:
                _registry.pop(job, None)
        elif session_id is not None and is_active(session_id):
            entry[1] = now
            job.heartbeat()
        elif now - seen > IDLE_TIMEOUT:
            job.stop()


def _keep() -> None:
    from streamlit.runtime import Runtime

    while True:
        time.sleep(KEEPER_PERIOD)
        if Runtime.exists():  # under AppTest there is no server, and the page's polls heartbeat instead
            sweep(Runtime.instance().is_active_session)


# -------------------------------------------------------------------------------------- live figures


def progress(snapshot: JobSnapshot, target: float | None) -> tuple[float, str]:
    """Progress bar fraction and its text: steps, steps/s and the time left at the current rate."""
    done = min(snapshot.step / snapshot.max_steps, 1.0)
    text = f"Step {snapshot.step:,} of {snapshot.max_steps:,}"
    if snapshot.state == "running" and snapshot.steps_per_s > 0:
        left = (snapshot.max_steps - snapshot.step) / snapshot.steps_per_s
        text += f" · {snapshot.steps_per_s:.1f} steps/s · {format_seconds(left)} left at most"
        if target is not None:
            text += f" (it stops sooner at {target:.0%} held-out exact match)"
    else:
        text += f" · {format_seconds(snapshot.elapsed)} of training"
    return done, text


def format_seconds(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds} s" if seconds < 90 else f"{seconds // 60} min {seconds % 60:02d} s"


class FigureCache:
    """The last figure built for each slot, rebuilt only when its key changes: a live view redraws every
    poll, but building a plotly figure costs far more (~50-100 ms of Python, holding the GIL the training
    thread needs) than sending one again."""

    def __init__(self):
        self._slots: dict[str, tuple[Any, Any]] = {}

    def get(self, slot: str, key, build: Callable[[], Any]):
        hit = self._slots.get(slot)
        if hit is None or hit[0] != key:
            hit = self._slots[slot] = (key, build())
        return hit[1]


def curves_figure(snapshot: JobSnapshot, task_name: str):
    """Held-out loss, token accuracy and exact match against the step (at most CURVE_POINTS points)."""
    fig = charts.training_curves(snapshot.history, title=f"Training {task_name} · held-out metrics",
                                 max_points=CURVE_POINTS)
    return fig.update_layout(margin_t=96)  # room for the legend between the title and the plot


def probe_labels(result: ProbeResult) -> tuple[list[str], list[str]]:
    """(query labels: the output tokens, key labels: the source tokens) for the probe's cross-attention."""
    return charts.token_labels(result.output_pieces), charts.token_labels(result.source_pieces)


def probe_figure(result: ProbeResult, step: int, layer: int, head: int | None):
    """The probe's cross-attention at training step `step`: one head, or every head (head=None)."""
    rows, cols = probe_labels(result)
    when = f"training step {step:,}"
    if head is None:
        layers, heads = result.cross.shape[:2]
        title = f"Cross-attention · all {layers} layer(s) × {heads} heads · {when}"
        fig = charts.head_grid(result.cross, rows, cols, "cross", title=title)
    else:
        title = charts.attention_title("cross", layer, head, extra=when)
        fig = charts.attention_heatmap(result.cross[layer, head], rows, cols, title)
    # an early model often writes one or two tokens: keep the rows and the colour bar readable
    return fig.update_layout(height=max(fig.layout.height, MIN_PROBE_HEIGHT))


def probe_filename(task_name: str, step: int, layer: int, head: int | None) -> str:
    """e.g. reverse_cross_L1H3_train0250, or reverse_cross_L1_train0250 for all heads."""
    return f"{chart_filename(task_name, 'cross', layer, head)}_train{step:04d}"



def settings_summary(settings: RunSettings) -> str:
    """One line naming the model shape and the training settings."""
    m, t = settings.model, settings.train
    stop = f", stop at {settings.target:.0%} exact match" if settings.target is not None else ""
    return (f"**Model:** {m['n_enc_layers']} encoder + {m['n_dec_layers']} decoder layer(s), {m['n_heads']} heads, "
            f"d_model {m['d_model']}, d_ff {m['d_ff']}, dropout {m['dropout']:g}, {m['norm']}-norm, "
            f"{POSITIONAL_LABELS[m['positional']].lower()} positions · **Training:** learning rate {t.lr:g} "
            f"(warm-up {t.warmup}), batch {t.batch_size}, up to {t.steps:,} steps, label smoothing "
            f"{t.label_smoothing:g}, seed {t.seed}{stop}")
