"""One row per task: its bar (the pass mark), the preset that reaches it fastest live, and the recipe of its
shipped checkpoint.

A preset is plain data (ModelConfig overrides, TrainConfig settings). `python -m transformer train` and the Train
page use a task's preset when no shape or recipe is chosen (tests/unit/test_presets.py requires one for every task);
benchmarks/all_tasks.py trains every preset to its bar. The bars: held-out greedy exact match of 99% (reverse,
copy, sort, addition) or 95% (dates, numbers, zh_numbers); tests/unit/test_zoo.py holds every shipped checkpoint
to its task's bar.
`zoo` is the `python -m transformer train` arguments that build the shipped checkpoint (assets/build_zoo.py):
bigger and trained longer than the preset, for sharper heads. How each preset was chosen, seed by seed and on which
CPU: docs/MEASUREMENTS.md, "How each preset was chosen".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import MODEL_DEFAULTS, TrainConfig

if TYPE_CHECKING:  # annotations only
    from .trainer import Trainer

__all__ = ["PRESETS", "Preset", "preset"]


@dataclass(frozen=True)
class Preset:
    """One task's row: `target` is its bar; `model` overrides MODEL_DEFAULTS and `train` sets TrainConfig fields
    (the live preset); `zoo`, the CLI arguments of its shipped checkpoint."""

    task: str
    target: float
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    zoo: tuple[str, ...] = ()

    def train_config(self, **overrides) -> TrainConfig:
        """The TrainConfig of this preset (task included), `overrides` on top; validated."""
        return TrainConfig(**{"task": self.task, **self.train, **overrides}).validate()

    def model_overrides(self) -> dict[str, Any]:
        """The full model shape (MODEL_DEFAULTS with this preset's changes), as Trainer takes it."""
        return {**MODEL_DEFAULTS, **self.model}

    def trainer(self, **overrides) -> Trainer:
        from .trainer import Trainer  # function-local: a server's first page reads presets without torch

        return Trainer(self.train_config(**overrides), self.model_overrides())


# The recipe the identity init trains fastest with on the letter tasks (benchmarks/train_reverse.py's notes): Adam's
# betas 0.8 / 0.95, cosine decay, label smoothing 0.05, a 50-step warm-up (with a step budget that ends on time).
QUICK = {"warmup": 50, "schedule": "cosine", "beta1": 0.8, "beta2": 0.95, "label_smoothing": 0.05}

# The shipped checkpoints (zoo): 2+2 layers of 4 heads, trained until 99.5% (or more) held-out exact match.
# Muon (lr 0.04) for the layer matrices + Adam (lr 0.01) at batch 128 is the addition preset's optimizer without
# its qk-norm and RoPE: at d_model 64 it reached the targets in fewer steps than Adam did at d_model 128, with
# sharper heads (qk-norm made them blurrier: docs/MEASUREMENTS.md).
ZOO_SHAPE = ("--enc-layers", "2", "--dec-layers", "2", "--heads", "4", "--d-model", "64", "--seed", "1")
ZOO_MUON = ("--d-ff", "128", "--optimizer", "muon", "--muon-lr", "0.04", "--lr", "0.01", "--batch-size", "128")


def _zoo(steps: int, target: float, *extra: str) -> tuple[str, ...]:
    return (*ZOO_SHAPE, "--steps", str(steps), "--target-accuracy", str(target), *extra)


PRESETS: dict[str, Preset] = {p.task: p for p in (
    Preset("reverse", 0.99, {"init": "identity"}, {**QUICK, "steps": 300, "batch_size": 32},
           zoo=_zoo(4000, 0.995)),
    Preset("copy", 0.99, {"init": "identity"}, {**QUICK, "steps": 200, "batch_size": 24},
           zoo=_zoo(4000, 0.995)),
    Preset("sort", 0.99, {"qk_norm": True}, {**QUICK, "optimizer": "muon", "muon_lr": 0.04, "steps": 375,
                                             "batch_size": 64},
           zoo=_zoo(6000, 0.995)),
    Preset("addition", 0.99, {"qk_norm": True, "n_enc_layers": 2, "positional": "rope", "init": "identity"},
           {**QUICK, "optimizer": "muon", "muon_lr": 0.04, "muon_momentum": 0.9, "lr": 0.01, "batch_size": 64,
            "steps": 500},
           zoo=_zoo(1500, 0.995, *ZOO_MUON)),
    Preset("dates", 0.95, {"init": "identity"}, {**QUICK, "steps": 350, "batch_size": 32},
           zoo=_zoo(3000, 0.995, *ZOO_MUON)),
    Preset("numbers", 0.95, train={**QUICK, "steps": 150, "batch_size": 24},
           zoo=_zoo(3000, 0.998, *ZOO_MUON)),
    Preset("zh_numbers", 0.95, train={**QUICK, "steps": 150, "batch_size": 32},
           zoo=_zoo(3000, 0.998, *ZOO_MUON)),
)}


def preset(task: str) -> Preset:
    """The preset of `task`; ValueError naming the tasks for an unknown one."""
    if task not in PRESETS:
        raise ValueError(f"no preset for task {task!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[task]
