"""Per-task presets: the model shape and training recipe that measured fastest to each task's bar.

A preset is plain data (ModelConfig overrides, TrainConfig settings, the bar). `python -m transformer train`
uses a task's preset when no shape or recipe flag is given (a task without one: the library defaults;
tests/test_presets.py requires one for every task); benchmarks/all_tasks.py trains every preset.
The bars: held-out greedy exact match of 99% (reverse, copy, sort, addition) or 95% (dates, numbers).
How each was chosen is in `note` (2-core CPU, one torch thread, with the load at the time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .training import MODEL_DEFAULTS, TrainConfig, Trainer

__all__ = ["PRESETS", "Preset", "preset"]


@dataclass(frozen=True)
class Preset:
    """One task's recipe: `model` overrides MODEL_DEFAULTS, `train` sets TrainConfig fields, `target` is the bar."""

    task: str
    target: float
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def train_config(self, **overrides) -> TrainConfig:
        """The TrainConfig of this preset (task included), `overrides` on top; validated."""
        return TrainConfig(**{"task": self.task, **self.train, **overrides}).validate()

    def model_overrides(self) -> dict[str, Any]:
        """The full model shape (MODEL_DEFAULTS with this preset's changes), as Trainer takes it."""
        return {**MODEL_DEFAULTS, **self.model}

    def trainer(self, **overrides) -> Trainer:
        return Trainer(self.train_config(**overrides), self.model_overrides())


PRESETS: dict[str, Preset] = {p.task: p for p in (
    Preset("reverse", 0.99, note="the library defaults (benchmarks/train_reverse.py --mode job)"),
    Preset("copy", 0.99, note="the library defaults"),
    Preset("sort", 0.99, train={"steps": 800},
           note="seed 0, load 2-4: the defaults' 600 steps end at 98.7%; 800 steps reach 99.2% at step 800 (19.5 s), "
                "qk-norm + Muon lr 0.04 99.6% at 600 (21.3 s: Muon's steps cost more)"),
    Preset("addition", 0.99, {"qk_norm": True, "n_enc_layers": 2},
           {"optimizer": "muon", "muon_lr": 0.04, "lr": 0.01, "batch_size": 128, "steps": 900},
           note="2026-11-23, benchmarks/all_tasks.py: 31.4 s / 31.6 s at load 2.4-3.8 (seeds 0/7, step 800 / "
                "900); load 6-12: with 900 steps 99% at step 800-900 (seeds 0, 3, 6, 7); with 800, 99.0-99.6% "
                "at step 800 for seeds 0, 3, 4, 5 but 98.7% / 98.3% "
                "for 6 / 7; with 700, 3 of 4; steps to 99% (teacher-forced, 1,000 held-out, every 50; Adam lr "
                "0.007): batch 128 600 steps 97.9% / 98.6% at the end, 800 steps 750 / 750; batch 64 (~35% "
                "cheaper steps) 1,000 steps 98.6% / 950, 1,500 steps 1,300 / 1,200; batch 256 (~40% dearer) "
                "500 / 550; at batch 128, 700 steps: Adam lr 0.015 700 / miss, d_ff 64 miss, warmup 50 700; "
                "batch 64: Muon lr 0.06 91.8% at 1,000; 1+1 layers needed 1,500-1,800"),
    Preset("dates", 0.95, note="the library defaults"),
    Preset("numbers", 0.95, note="the library defaults"),
)}


def preset(task: str) -> Preset:
    """The preset of `task`; ValueError naming the tasks for an unknown one."""
    if task not in PRESETS:
        raise ValueError(f"no preset for task {task!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[task]
