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

from transformer.i18n import Texts, t
from transformer.training.config import model_config, run_estimate
from transformer.network.budget import training_estimate
from transformer.network.budget import EVAL_CHUNK
from transformer.network.config import BOUNDS, ModelConfig
from transformer.tasks import TASKS, CustomTask, Task, make_task
from transformer.training.config import MODEL_DEFAULTS, TrainConfig
from transformer.training.diagnosis import BEST_BELOW, MIN_LEARNING_PAIRS, NONE_AT, preset_pairs

TARGET_EXACT_MATCH = 0.99  # "stop early": the held-out exact match a run stops at
MODEL_CHOICES = ("norm", "positional", "qk_norm", "init")  # the model settings that are not numbers
MODEL_DEFAULTS_ALL: dict[str, Any] = {
    **MODEL_DEFAULTS, **{f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in MODEL_CHOICES},
}
TRAIN_DEFAULTS = TrainConfig()
# the page's choices (TrainConfig, ModelConfig), each named in the reader's language
NORM_LABELS = Texts({"pre": "train.choice.pre", "post": "train.choice.post"})
POSITIONAL_LABELS = Texts({"sinusoidal": "train.choice.sinusoidal", "learned": "train.choice.learned",
                           "none": "train.choice.none", "rope": "train.choice.rope", "alibi": "train.choice.alibi"})
DEVICE_LABELS = Texts({"auto": "train.choice.auto", "cpu": "train.choice.cpu", "cuda": "train.choice.cuda"})
# the same in a sentence (the settings summary)
DEVICE_NAMES = Texts({"cpu": "train.choice.cpu", "cuda": "train.choice.gpu"})
NORM_NAMES = Texts({"pre": "train.said.pre", "post": "train.said.post"})
POSITIONAL_NAMES = Texts({"sinusoidal": "train.said.sinusoidal", "learned": "train.said.learned",
                          "none": "train.said.none", "rope": "train.said.rope", "alibi": "train.said.alibi"})
OPTIMIZER_LABELS = Texts({"adam": "train.choice.adam", "muon": "train.choice.muon"})
INIT_LABELS = Texts({"xavier": "train.choice.xavier", "identity": "train.choice.identity"})
SCHEDULE_LABELS = Texts({"linear": "train.choice.linear", "cosine": "train.choice.cosine"})


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
        return t("train.target_range", target=settings.target)
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
    """e.g. "Adam, learning rate 0.007" or "Muon lr 0.04 (momentum 0.9) + Adam lr 0.007 (β 0.8, 0.95)", then the
    decay; a momentum or betas only where they differ from the defaults."""
    betas = "" if (train.beta1, train.beta2) == (TRAIN_DEFAULTS.beta1, TRAIN_DEFAULTS.beta2) else \
        f" (β {train.beta1:g}, {train.beta2:g})"
    if train.optimizer == "muon":
        momentum = "" if train.muon_momentum == TRAIN_DEFAULTS.muon_momentum else \
            t("train.summary.muon_momentum", momentum=f"{train.muon_momentum:g}")
        text = t("train.summary.muon", muon_lr=f"{train.muon_lr:g}", momentum=momentum, lr=f"{train.lr:g}")
    else:
        text = t("train.summary.adam", optimizer=train.optimizer.capitalize(), lr=f"{train.lr:g}")
    return t("train.summary.optimizer", text=text, betas=betas, schedule=SCHEDULE_LABELS[train.schedule].lower())


def settings_summary(settings: RunSettings) -> str:
    """One line (markdown) naming the model shape and the training settings."""
    m, train = settings.model, settings.train
    extras = ([t("train.summary.qk_norm")] if m.get("qk_norm") else []) + (
        [t("train.summary.identity")] if m.get("init") == "identity" else [])
    model = t("train.summary.model", enc=m["n_enc_layers"], dec=m["n_dec_layers"], heads=m["n_heads"],
              d_model=m["d_model"], d_ff=m["d_ff"], dropout=f"{m['dropout']:g}", norm=NORM_NAMES[m["norm"]],
              positions=POSITIONAL_NAMES[m["positional"]],
              extras="".join(t("train.summary.extra", text=text) for text in extras))
    stop = t("train.summary.stop", target=settings.target) if settings.target is not None else ""
    device = t("train.summary.device", device=DEVICE_NAMES[train.device]) if train.device != "auto" else ""
    return model + " · " + t("train.summary.training", optimizer=optimizer_text(train), warmup=train.warmup,
                             batch=train.batch_size, steps=train.steps, smoothing=f"{train.label_smoothing:g}",
                             seed=train.seed, stop=stop, device=device)


def few_pairs_note() -> str:
    """What one's own data needs, as measured: the sentence the Train page shows before Start and beside a run that
    memorises."""
    low, high = preset_pairs()
    return t("train.few_pairs", least=MIN_LEARNING_PAIRS, best=BEST_BELOW, none=NONE_AT, low=low, high=high)
