"""What a training run is built from (`RunSettings`: training settings, model shape, early-stop target), its
defaults, and the checks and summary the Train page shows. No streamlit: the Train page's state table
(ui/tables/train.py) turns its view into these settings, and benchmarks/app_train.py trains the defaults.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from dataclasses import dataclass, field
from typing import Any

from transformer.training.config import model_config, run_estimate
from transformer.network.budget import training_estimate
from transformer.network.budget import EVAL_CHUNK
from transformer.network.config import BOUNDS, ModelConfig
from transformer.tasks import TASKS, CustomTask, Task, make_task
from transformer.training.config import MODEL_DEFAULTS, TrainConfig

TARGET_EXACT_MATCH = 0.99  # "stop early": the held-out exact match a run stops at
MODEL_CHOICES = ("norm", "positional", "qk_norm", "init")  # the model settings that are not numbers
MODEL_DEFAULTS_ALL: dict[str, Any] = {
    **MODEL_DEFAULTS, **{f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in MODEL_CHOICES},
}
TRAIN_DEFAULTS = TrainConfig()
NORM_LABELS = {"pre": "Pre-norm (x + f(norm(x)))", "post": "Post-norm (norm(x + f(x)), the paper's)"}
POSITIONAL_LABELS = {"sinusoidal": "Sinusoidal", "learned": "Learned", "none": "None",
                     "rope": "RoPE (rotary, in attention)", "alibi": "ALiBi (distance bias, in attention)"}
DEVICE_LABELS = {"auto": "Auto (the GPU when there is one)", "cpu": "CPU", "cuda": "GPU (CUDA)"}
OPTIMIZER_LABELS = {"adam": "Adam", "muon": "Muon + Adam"}  # the page's choices (TrainConfig)
INIT_LABELS = {"xavier": "Xavier (the paper's)", "identity": "Identity layers, small embeddings"}
SCHEDULE_LABELS = {"linear": "Linear decay", "cosine": "Cosine decay"}


def task_defaults(task: str) -> dict[str, int]:
    """A task's parameters and their defaults, read from its constructor (none for your own data, whose data,
    title and tokenisation the page takes apart, nor for a task without its own constructor: Task's **params)."""
    if task not in TASKS:
        return {}
    params = inspect.signature(TASKS[task].__init__).parameters
    return {name: p.default for name, p in params.items() if name != "self" and p.kind != p.VAR_KEYWORD}


def task_class(name: str) -> type[Task]:
    """The class of a built-in task, or CustomTask for your own data (for its title and description)."""
    return TASKS.get(name, CustomTask)


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

    @classmethod
    def from_key(cls, key: str) -> RunSettings:
        """The settings a `key()` was made from."""
        data = json.loads(key)
        return cls(TrainConfig(**data["train"]), data["model"], data["target"])


def task_problem(task: str, params: dict) -> str | None:
    """What is wrong with a task's parameters (e.g. the shortest string longer than the longest), or None."""
    try:
        make_task(task, **params)
    except ValueError as exc:
        return str(exc)
    return None


def model_problem(model: dict) -> str | None:
    """What is wrong with a model shape (e.g. d_model not divisible by the heads), or None."""
    try:
        ModelConfig(src_vocab=BOUNDS["src_vocab"][0], tgt_vocab=BOUNDS["tgt_vocab"][0], **model)
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


def settings_problem(settings: RunSettings) -> str | None:
    """The first thing wrong with `settings`, in the library's words; None when a run can be built."""
    try:
        settings.train.validate()
    except (ValueError, TypeError) as exc:
        return str(exc)
    if (problem := model_problem(settings.model)) is not None:
        return problem
    if settings.target is not None and not 0 < settings.target <= 1:
        return f"the target exact match must lie in (0, 1], got {settings.target}"
    try:  # the run budget (AP_RUN_BUDGET_MB), before any model exists: its message gives the estimate
        run_estimate(settings.train, settings.model).check()
    except ValueError as exc:  # BudgetError, or a config the library refuses
        return str(exc)
    return None


def largest_batch(settings: RunSettings, ceiling: int) -> int | None:
    """The largest batch size, at most `ceiling`, whose run fits the run budget with the other settings as
    they are (None when the settings cannot be built, or not even a batch of one fits)."""
    try:
        task = make_task(settings.train.task, **settings.train.task_params)
        config = model_config(task, task.make_tokenizer(settings.train.seed), settings.model)
    except (ValueError, TypeError):
        return None
    rows = min(EVAL_CHUNK, max(settings.train.eval_samples, settings.train.confirm_samples))

    def fits(batch: int) -> bool:
        return training_estimate(config, batch, config.max_len, config.max_len, rows).fits()

    if not fits(1):
        return None
    lo, hi = 1, ceiling  # the estimate grows with the batch: bisect for the last size that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def optimizer_text(train: TrainConfig) -> str:
    """e.g. "Adam, learning rate 0.007" or "Muon lr 0.04 + Adam lr 0.007 (β 0.8, 0.95)", then the decay."""
    betas = "" if (train.beta1, train.beta2) == (TRAIN_DEFAULTS.beta1, TRAIN_DEFAULTS.beta2) else \
        f" (β {train.beta1:g}, {train.beta2:g})"
    text = f"Muon lr {train.muon_lr:g} + Adam lr {train.lr:g}" if train.optimizer == "muon" else \
        f"{train.optimizer.capitalize()}, learning rate {train.lr:g}"
    return f"{text}{betas}, {train.schedule} decay"


def settings_summary(settings: RunSettings) -> str:
    """One line (markdown) naming the model shape and the training settings."""
    m, t = settings.model, settings.train
    stop = f", stop at {settings.target:.0%} exact match" if settings.target is not None else ""
    device = f", on the {DEVICE_LABELS[t.device].split(' (')[0]}" if t.device != "auto" else ""
    return (f"**Model:** {m['n_enc_layers']} encoder + {m['n_dec_layers']} decoder layer(s), {m['n_heads']} heads, "
            f"d_model {m['d_model']}, d_ff {m['d_ff']}, dropout {m['dropout']:g}, {m['norm']}-norm, "
            f"{POSITIONAL_LABELS[m['positional']].lower()} positions{', qk-norm' if m.get('qk_norm') else ''}"
            f"{', identity init' if m.get('init') == 'identity' else ''} · "
            f"**Training:** {optimizer_text(t)} (warm-up {t.warmup}), batch {t.batch_size}, up to {t.steps:,} steps, "
            f"label smoothing {t.label_smoothing:g}, seed {t.seed}{stop}{device}")
