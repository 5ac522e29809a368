"""Every task trained from its preset (transformer.training.presets) to its bar, one JSON line per task.

The clock starts as the job starts (the Trainer is built just before; imports excluded) and stops when the run
ends: a held-out greedy exact match at the preset's bar confirmed on 1,000 held-out inputs, or the preset's steps
run out. Runs go through a TrainingJob (the library's background-thread run, as in train_reverse.py --mode job) on
one torch thread; every evaluation is on the clock. Afterwards (not timed) the model is scored on 1,000 fresh
held-out inputs of another seed. steps_per_s is steps over the whole wall time, evaluation included;
within_target says whether the bar was reached in at most PRESET_SECONDS (issue 25's target for every task, on
every CPU kind: `--cpu avx2` caps the kernels to AVX2, as on a laptop without AVX-512 or native bfloat16). This is
the CLI's path (`python -m transformer train` trains through the same TrainingJob), less the interpreter's start.
cpu_seconds is the process's CPU time over the run: on a busy machine a steadier figure than the wall time.
With --peer each task is also trained from the library defaults (the CLI's defaults before presets: Xavier,
Adam betas 0.9 / 0.98, linear decay, batch 64, their own 600 steps), in the same run, for comparison. Other
processes slow every figure; each line ends with the machine (timing.machine(): CPU, capability, load).
`--seed` takes one seed, a list or a range (`0-17`): a preset misses its bar on some seeds (docs/MEASUREMENTS.md),
so with more than one, each task ends with a line of how many reached it, the seeds that missed and the medians.

    python benchmarks/all_tasks.py [--tasks reverse,addition] [--seed 0|0,3|0-17] [--peer] [--cpu native|avx2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import PRESET_SECONDS, add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

import torch._dynamo  # noqa: E402, F401  the first optimizer imports it (~1.8 s once per process): off the clock

from transformer.analysis.evaluation import evaluate_bundle  # noqa: E402
from transformer.training.presets import PRESETS, Preset  # noqa: E402
from transformer.training.config import TrainConfig  # noqa: E402
from transformer.training.trainer import Trainer  # noqa: E402
from transformer.runs.job import TRAINING_THREADS  # noqa: E402
from train_reverse import run_job  # noqa: E402

CONFIRM_SAMPLES = 1000


def train_to_bar(train: TrainConfig, model: dict, target: float) -> dict:
    """Wall time of one run through a TrainingJob to `target`, and what it reached."""
    cpu = time.process_time()
    trainer, seconds = run_job(Trainer(train, model), target)
    cpu = time.process_time() - cpu
    last = trainer.history[-1]
    reached = last["exact_match"] >= target and last["samples"] >= CONFIRM_SAMPLES
    fresh = evaluate_bundle(trainer.bundle(), samples=CONFIRM_SAMPLES, seed=1000 + train.seed)
    return {
        "seconds_to_bar": round(seconds, 2) if reached else None, "seconds": round(seconds, 2), "reached": reached,
        "cpu_seconds": round(cpu, 2),
        "target_seconds": PRESET_SECONDS, "within_target": reached and seconds <= PRESET_SECONDS,
        "steps": trainer.step_count, "exact_match": last["exact_match"], "samples": last["samples"],
        "exact_match_fresh_1000": fresh["exact_match"], "steps_per_s": round(trainer.step_count / seconds, 1),
        "parameters": trainer.model.num_parameters(),
    }


def run(chosen: Preset, seed: int, peer: bool) -> dict:
    train = chosen.train_config(seed=seed, confirm_samples=CONFIRM_SAMPLES)
    result = {"task": chosen.task, "target": chosen.target, "seed": seed,
              **train_to_bar(train, chosen.model_overrides(), chosen.target),
              "preset": {"model": chosen.model, "train": chosen.train}}
    if peer:
        defaults = TrainConfig(task=chosen.task, seed=seed, confirm_samples=CONFIRM_SAMPLES)
        result["peer_library_defaults"] = train_to_bar(defaults, {}, chosen.target)
    return result | {"machine": machine(torch_threads=TRAINING_THREADS)}


def seeds(text: str) -> list[int]:
    """`--seed`: one seed (0), a list (0,3,5) or ranges (0-17), comma-separated."""
    found = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        found.extend(range(int(low), int(high or low) + 1))
    return found


def across_seeds(results: list[dict]) -> dict:
    """One task's runs on several seeds: how many reached the bar, the seeds that missed, the medians of those that
    reached it."""
    reached = [r for r in results if r["reached"]]
    medians = {f"{key}_median": statistics.median(r[key] for r in reached) if reached else None
               for key in ("steps", "seconds_to_bar")}
    return {"task": results[0]["task"], "seeds": [r["seed"] for r in results], "reached": len(reached),
            "missed_seeds": [r["seed"] for r in results if not r["reached"]], **medians,
            "machine": machine(torch_threads=TRAINING_THREADS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(PRESETS), help="comma-separated task names")
    parser.add_argument("--seed", type=seeds, default=[0], help="a seed, a list (0,3) or a range (0-17)")
    parser.add_argument("--peer", action="store_true", help="also train the library defaults")
    add_cpu_argument(parser)
    args = parser.parse_args()
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in PRESETS]
    if unknown:
        parser.error(f"unknown task(s): {', '.join(unknown)}")
    for task in tasks:
        results = []
        for seed in args.seed:
            results.append(run(PRESETS[task], seed, args.peer))
            print(json.dumps(results[-1]), flush=True)
        if len(results) > 1:
            print(json.dumps(across_seeds(results)), flush=True)


if __name__ == "__main__":
    main()
