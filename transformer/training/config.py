"""How to train: `TrainConfig` (plain, JSON-able settings and their bounds) and the one function that builds a
run's `ModelConfig` from its task, its tokenizer and the model settings chosen (the Trainer, the resource budget,
the worker and the Train page all call `model_config`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from transformer.network.budget import EVAL_CHUNK, Estimate, training_estimate
from transformer.network.config import BOUNDS, ConfigError, ModelConfig, check_bounds
from transformer.tasks import Task, make_task
from transformer.network.tokenizers import Tokenizer

from .devices import resolve_device

# The model shape that reaches 99% held-out exact match on `reverse` fastest (benchmarks/train_reverse.py).
MODEL_DEFAULTS: dict[str, Any] = {
    "n_enc_layers": 1, "n_dec_layers": 1, "d_model": 64, "n_heads": 4, "d_ff": 128, "dropout": 0.0,
}
DERIVED_MODEL_KEYS = ("src_vocab", "tgt_vocab", "max_len")  # come from the task and tokenizer
OPTIMIZERS = ("adam", "adamw", "muon")  # muon: torch.optim.Muon for the hidden matrices, Adam for the rest
SCHEDULES = ("linear", "cosine")  # how the learning rate falls after the warm-up (optimizers.warmup_decay)

# Inclusive bounds: anything outside is an input mistake, not a training choice.
TRAIN_BOUNDS: dict[str, tuple[float, float]] = {
    "steps": (1, 1_000_000),
    "batch_size": (1, 4096),
    "lr": (1e-7, 1.0),
    "warmup": (0, 100_000),
    "weight_decay": (0.0, 1.0),
    "label_smoothing": (0.0, 0.5),
    "clip": (0.0, 1000.0),
    "muon_lr": (1e-7, 1.0),
    "muon_momentum": (0.0, 0.999),
    "beta1": (0.0, 0.999),
    "beta2": (0.0, 0.9999),
    "seed": (0, 2**31 - 1),
    "eval_every": (1, 100_000),
    "eval_samples": (1, 10_000),
    "confirm_samples": (1, 10_000),
}


@dataclass
class TrainConfig:
    """How to train: plain JSON-able values. Defaults are tuned for `reverse` (benchmarks/train_reverse.py).

    clip = 0 turns gradient clipping off. The learning rate rises linearly over `warmup` steps, then
    falls to 2% of `lr` at `steps`, along a line or (schedule "cosine") half a cosine. Adam's moment decay
    rates are `beta1` and `beta2`. optimizer "muon": torch.optim.Muon (as BatchedMuon; peak rate `muon_lr`, same
    schedule; momentum `muon_momentum`) for the 2-D weight matrices inside the encoder and decoder layers, Adam
    (`lr`) for the embeddings, the generator, biases and norms. Evaluation runs every `eval_every` steps on
    `eval_samples` held-out pairs; a result at or above a target is confirmed on `confirm_samples` pairs before
    training stops.
    device: "auto" (CUDA when available, else the CPU), "cpu" or "cuda" (transformer.devices); settings saved
    before it existed load as "auto".
    """

    task: str = "reverse"
    task_params: dict = field(default_factory=dict)
    steps: int = 600
    batch_size: int = 64
    lr: float = 7e-3
    warmup: int = 100
    schedule: str = "linear"
    optimizer: str = "adam"
    beta1: float = 0.9
    beta2: float = 0.98
    muon_lr: float = 0.02
    muon_momentum: float = 0.95
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    clip: float = 1.0
    seed: int = 0
    eval_every: int = 25
    eval_samples: int = 200
    confirm_samples: int = 1000
    device: str = "auto"

    def validate(self) -> "TrainConfig":
        """Raise ValueError naming the first absurd value; return self when all is well."""
        check_bounds(self, TRAIN_BOUNDS)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if not isinstance(self.task_params, dict):
            raise ValueError(f"task_params must be a dict, got {self.task_params!r}")
        make_task(self.task, **self.task_params)  # TaskError (a ValueError) names a bad task or parameter
        resolve_device(self.device)  # ValueError for an unknown name, or "cuda" without CUDA
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown training settings: {', '.join(unknown)}")
        return cls(**data).validate()


def card_settings(train: TrainConfig, task) -> dict:
    """`train` as a model card records it: the task's card parameters (a custom task's data stays out)."""
    return train.to_dict() | {"task_params": task.card_params()}


def model_overrides(overrides: dict | None) -> dict:
    """The model settings of a run, checked as `model_config` will check them but without the task's tokenizer
    (which may take seconds to build): ConfigError for a derived key, an unknown setting or a bad value."""
    overrides = dict(overrides or {})
    derived = sorted(set(overrides) & set(DERIVED_MODEL_KEYS))
    if derived:
        raise ConfigError(f"{', '.join(derived)} come from the task and tokenizer; do not set them")
    smallest = BOUNDS["src_vocab"][0]
    _build(src_vocab=smallest, tgt_vocab=smallest, **{**MODEL_DEFAULTS, **overrides})
    return overrides


def model_config(task: Task, tokenizer: Tokenizer, overrides: dict | None = None, max_len: int | None = None
                 ) -> ModelConfig:
    """The ModelConfig a run of `task` trains: the tokenizer's vocabulary on both sides, positions for the
    task's longest sequence (`max_len` more, to evaluate on longer inputs later), MODEL_DEFAULTS, then the
    model `overrides`. ConfigError (a ValueError) names what is wrong."""
    overrides = model_overrides(overrides)
    needed = max(task.max_source_chars, task.max_target_chars) + 2  # + <s> / </s>
    if max_len is not None and max_len < needed:
        raise ConfigError(f"max_len {max_len} is too short: this task needs {needed} positions")
    vocab = tokenizer.vocab_size
    return _build(src_vocab=vocab, tgt_vocab=vocab, max_len=max_len or needed, **{**MODEL_DEFAULTS, **overrides})


def _build(**values) -> ModelConfig:
    try:
        return ModelConfig(**values)
    except TypeError as exc:  # an unknown model setting
        raise ConfigError(str(exc)) from None


def run_estimate(train: TrainConfig, overrides: dict | None = None) -> Estimate:
    """The resource estimate of a run of `train` with model `overrides`, before anything is allocated (builds the
    task and its tokenizer, no model). Raises the config's own ValueError when invalid."""
    train.validate()
    task = make_task(train.task, **train.task_params)
    config = model_config(task, task.make_tokenizer(train.seed), overrides)
    rows = min(EVAL_CHUNK, max(train.eval_samples, train.confirm_samples))
    return training_estimate(config, train.batch_size, config.max_len, config.max_len, rows)
