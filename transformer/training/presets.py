"""One row per task: its bar (the pass mark), the preset that reaches it fastest live, and the recipe of its
shipped checkpoint.

A preset is plain data (ModelConfig overrides, TrainConfig settings). `python -m transformer train` and the Train
page use a task's preset when no shape or recipe is chosen (tests/unit/test_presets.py requires one for every task);
benchmarks/all_tasks.py trains every preset to its bar. The bars: held-out greedy exact match of 99% (reverse,
copy, sort, addition) or 95% (dates, numbers, zh_numbers); tests/unit/test_zoo.py holds every shipped checkpoint
to its task's bar.
`zoo` is the `python -m transformer train` arguments that build the shipped checkpoint (assets/build_zoo.py):
bigger and trained longer than the preset, for sharper heads. How each preset was chosen is in `note` (2-core
CPU, one torch thread, with the load at the time; every 25 steps an evaluation on 200 held-out inputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import MODEL_DEFAULTS, TrainConfig
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
    note: str = ""

    def train_config(self, **overrides) -> TrainConfig:
        """The TrainConfig of this preset (task included), `overrides` on top; validated."""
        return TrainConfig(**{"task": self.task, **self.train, **overrides}).validate()

    def model_overrides(self) -> dict[str, Any]:
        """The full model shape (MODEL_DEFAULTS with this preset's changes), as Trainer takes it."""
        return {**MODEL_DEFAULTS, **self.model}

    def trainer(self, **overrides) -> Trainer:
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
           zoo=_zoo(4000, 0.995),
           note="2026-11-26, all_tasks.py's method on one pinned core, load 1.5-5.2: seeds 0-4 reach 99% at step "
                "275, 250, 250, 275, 275 in 3.1-3.7 s, 99.0-99.9% fresh; alternated with the library defaults (load "
                "3.9-5.2): 3.38 / 3.26 / 3.27 s against 9.48 / 9.61 / 9.76 s (step 550); without the identity init "
                "(batch 24, 300 steps) 64.1%, identity with betas .9/.98, linear, no smoothing 97.6%; batch 24 "
                "reaches at 275-300, 250 steps 97.3%. Issue 25, under the AVX2 cap (--cpu avx2; load 6-13): seeds 0-4 "
                "at 275, 275, 275, 250, 250, 98.9-100% fresh, 2.8-3.4 s of CPU"),
    Preset("copy", 0.99, {"init": "identity"}, {**QUICK, "steps": 200, "batch_size": 24},
           zoo=_zoo(4000, 0.995),
           note="2026-11-26, load 2.2-5.1: seeds 0-4 reach 99% at step 150 in 1.8-2.6 s, 99.4-100% fresh; "
                "alternated, the library defaults took 8.16 / 7.06 / 5.65 s (400 / 400 / 300 steps, 98.1% / 97.9% "
                "fresh on seeds 1 / 2); Xavier init 275 steps (3.54 s), identity with old betas and linear decay 225 "
                "(3.46 s). Issue 25, under the AVX2 cap (load 6-12): seeds 0-4 at 150, 150, 125, 150, 150, "
                "98.6-99.9% fresh, 1.3-2.0 s of CPU"),
    Preset("sort", 0.99, {"qk_norm": True}, {**QUICK, "optimizer": "muon", "muon_lr": 0.04, "steps": 375,
                                             "batch_size": 64},
           zoo=_zoo(6000, 0.995),
           note="2026-11-26, load 3.7-5.8: seeds 0-4 reach 99% at step 450, 475, 450, 450, 425 in 10.3-12.2 s, "
                "98.7-99.7% fresh; alternated, the 800-step defaults took 14.54 / 13.18 / 15.73 s; the identity init "
                "did not help: with Adam (batch 48-64, 500-800 steps) 98.2-98.9% or 2 of 3 seeds, with qk-norm + "
                "Muon the same steps but 97.9% / 98.7% fresh (seeds 4 / 3); betas .9/.98, linear, no smoothing: 500 "
                "steps (seed 0). Issue 25 (Muon in float32), under the AVX2 cap: seeds 0-4 at 450, 475, 450, 450, "
                "450, 98.6-99.6% fresh, 7.7-11.4 s of CPU at load 6-13. 2026-11-27 on an AVX2 EPYC (Zen 3), batch 64 "
                "and 375 steps instead of 48 and 500: seeds 0-4 at 325, 350, 350, 350, 350 (11.7-13.3 s quiet, "
                "98.7-99.5% fresh); alternated with the 48 / 500 preset on a loaded machine, 12.1-14.0 s of CPU "
                "against 13.7-17.2 (450-475 steps); 64 / 400 missed once (seed 3: 98.5%)"),
    Preset("addition", 0.99, {"qk_norm": True, "n_enc_layers": 2, "positional": "rope", "init": "identity"},
           {**QUICK, "optimizer": "muon", "muon_lr": 0.04, "muon_momentum": 0.9, "lr": 0.01, "batch_size": 64,
            "steps": 500},
           zoo=_zoo(1500, 0.995, *ZOO_MUON),
           note="2026-11-26, load 2.5-4.2: seeds 0-4 reach 99% at step 425, 425, 450, 475, 400 in 9.9-12.5 s, "
                "99.1-99.8% fresh; alternated, the earlier batch-128 700-step preset (Xavier, betas .9/.98, linear) "
                "took 22.61 / 18.30 / 18.81 s; Xavier at batch 64 (600 steps) 98.9%, plain Adam with the identity "
                "init 90.4% at batch 64 and 550 steps (17.3 s) at 128; 450 steps 98.6%, Muon lr 0.06 98.8%. Before "
                "(2026-11-23): rope cut the steps (sinusoidal 675 / not by 700, learned 575 / 700, rope 400 / 650, "
                "alibi 88% / 55%), qk-norm + Muon made addition learn at all (the defaults: 64.5% after 1,500 steps). "
                "Issue 25 (Muon's Newton-Schulz in float32; one pinned core of the AMD EPYC, load 7-13, so CPU "
                "seconds): seeds 0-4 reach 99% at 400, 425, 425, 500, 425 with AVX-512 and 500, 450, 425, 425, 425 "
                "under the AVX2 cap (--cpu avx2), 7.8-11.0 s of CPU; 550 or 600 steps reached no sooner (425-525). "
                "2026-11-27 on an AVX2 EPYC (Zen 3): seeds 0-4 at 425-475 (seeds 0-2 in 13.7-15.8 s quiet); no "
                "other batch, length, rate or width reached sooner on every seed (docs/MEASUREMENTS.md, \"The "
                "evening's push\"); 2026-11-28 there, seeds 0-5 at 450, 475, 450, 450, 425 and none by 500 (seed 5), "
                "and Adam's beta2 0.98-0.99, no label smoothing, 2 heads, 1+2 layers or Muon lr 0.05 no sooner on "
                "every seed (\"The fourth morning\"). Then Muon's momentum 0.9 instead of torch's 0.95: seeds 0-11 "
                "reach 99% at 375, 425, 400, 425, 450, 475, 450, 350, 425, -, 500, 425 against 450, 475, 450, 450, "
                "425, -, 500, 500, 450, -, -, - (11 of 12 seeds against 7; 0.85: 375-500; 0.98: 4 of 6 missed)"),
    Preset("dates", 0.95, {"init": "identity"}, {**QUICK, "steps": 350, "batch_size": 32},
           zoo=_zoo(3000, 0.995, *ZOO_MUON),
           note="issue 25 (2026-11-26, one pinned core of the AMD EPYC, load 7-17, so CPU seconds): 350 steps, "
                "seeds 0-4 reach 95% at step 300, 300, 300, 275, 275 with AVX-512 and 325, 300, 300, 275, 300 "
                "under the AVX2 cap (benchmarks/timing.py --cpu avx2) in 3.3-5.1 s of CPU; the 300-step preset "
                "before missed under the cap (seed 2: 93.9% at its last step) and reached at its last step with "
                "AVX-512 on seeds 0 and 2. Before (2026-11-26, load 2.9-5.3): 300 steps, seeds 0-4 at 275, 250, "
                "300, 250, 275 in 3.4-4.5 s, 94.7-95.9% fresh (the defaults 94.6-95.9%); alternated, the defaults "
                "took 11.95 / 8.45 / 8.28 s (500 / 400 / 400 steps); Xavier init 85.1% at 300"),
    Preset("numbers", 0.95, train={**QUICK, "steps": 150, "batch_size": 24},
           zoo=_zoo(3000, 0.998, *ZOO_MUON),
           note="2026-11-26, load 3.3-4.7: seeds 0-4 reach 95% at step 75, 100, 75, 100, 75 in 0.65-1.27 s, "
                "96.7-100% fresh; the defaults 1.34-1.97 s (step 100), with evaluation every 25 steps 1.09-1.17 s "
                "(75); the identity init did not help (100 steps on seeds 0-2, 0.87-1.02 s). Issue 25, under the AVX2 "
                "cap (load 7-12): seeds 0-4 at 75, 100, 100, 100, 75, 97.8-100% fresh, 0.8-0.9 s of CPU"),
    Preset("zh_numbers", 0.95, train={**QUICK, "steps": 150, "batch_size": 32},
           zoo=_zoo(3000, 0.998, *ZOO_MUON),
           note="2026-11-26 on 'AMD EPYC' (lscpu; torch CPU capability AVX512), one torch thread, 2 cores shared, load "
                "3.9-7.2: all_tasks.py's method, seeds 0-4 reach 95% at step 125, 100, 100, 125, 100 in 1.42-3.24 s "
                "(CPU 1.11-1.55 s), 95.3-98.9% fresh; alternated, the library defaults took 3.42 / 3.00 / 3.20 s "
                "(150 / 175 / 125 steps) against 2.02 / 1.27 / 1.22 s; `python -m transformer train --task "
                "zh_numbers --target-accuracy 0.95` seeds 0-2: step 125 / 100 / 100 in 1.38 / 1.32 / 1.45 s (4.6-6.4 "
                "s with start-up), all 150 steps 98.9-99.7%; batch 24: 125-150 steps; one token per character "
                "instead of word pieces (600 steps): 225-275 steps in 10-25 s, word pieces 125-175 in 3.3-10.9 s"),
)}


def preset(task: str) -> Preset:
    """The preset of `task`; ValueError naming the tasks for an unknown one."""
    if task not in PRESETS:
        raise ValueError(f"no preset for task {task!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[task]
