"""What Muon costs a training step, against Adam, on the presets that train with it (issue 25). Prints JSON.

For each preset whose optimizer is Muon (sort, addition), three Trainers of that preset take turns, a block of
--steps steps each per round, --rounds rounds (so that other load on the machine hits all three alike):
  muon        the preset as it trains: BatchedMuon, Newton-Schulz in float32 (BatchedMuon.ns_dtype)
  muon_bf16   the same in bfloat16, as torch.optim.Muon (and this code before issue 25) runs it
  adam        the same preset with Adam for every parameter (the peer: Muon's extra cost is muon / adam)
Figures: median ms per step (the whole step: batch, forward, backward, optimizers), in wall time and in this
thread's CPU time (which other processes on a busy machine inflate far less), and the ratios; the target is read
on CPU time. Target: muon / adam <= 1.5 on every CPU kind (`--cpu avx2` caps the kernels to AVX2, as on a laptop
without native bfloat16).

    python benchmarks/muon_step.py [--cpu native|avx2] [--rounds 7] [--steps 15] [--tasks sort,addition]
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

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

import torch  # noqa: E402

from transformer.training.optimizers import BatchedMuon  # noqa: E402
from transformer.training.presets import PRESETS  # noqa: E402

TARGET_RATIO = 1.5
CASES = {"muon": ("muon", torch.float32), "muon_bf16": ("muon", torch.bfloat16), "adam": ("adam", None)}


def block_ms(trainer, steps: int, dtype) -> tuple[float, float]:
    """(wall, CPU) milliseconds a step over `steps` steps, the trainer's Muon orthogonalising in `dtype`."""
    for optimizer in trainer.optimizers:
        if isinstance(optimizer, BatchedMuon):
            optimizer.ns_dtype = dtype
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        trainer.step()
    return (time.perf_counter() - wall) / steps * 1000, (time.thread_time() - cpu) / steps * 1000


def measure(task: str, rounds: int, steps: int) -> dict:
    preset = PRESETS[task]
    trainers = {name: preset.trainer(optimizer=optimizer, steps=10**6) for name, (optimizer, _) in CASES.items()}
    for name, trainer in trainers.items():  # warm-up: first calls, allocator, the schedule's first steps
        block_ms(trainer, 5, CASES[name][1])
    times = {name: [] for name in CASES}
    for _ in range(rounds):
        for name, trainer in trainers.items():
            times[name].append(block_ms(trainer, steps, CASES[name][1]))
    out = {"task": task}
    for i, clock in enumerate(("wall", "cpu")):
        ms = {name: statistics.median(t[i] for t in ts) for name, ts in times.items()}
        out[clock] = {"ms_per_step": {n: round(v, 2) for n, v in ms.items()},
                      "spread_ms": {n: [round(min(t[i] for t in ts), 2), round(max(t[i] for t in ts), 2)]
                                    for n, ts in times.items()},
                      "muon_over_adam": round(ms["muon"] / ms["adam"], 2),
                      "muon_bf16_over_adam": round(ms["muon_bf16"] / ms["adam"], 2)}
    return out | {"met": out["cpu"]["muon_over_adam"] <= TARGET_RATIO}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cpu_argument(parser)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=15, help="steps per block")
    muon_presets = [task for task, preset in PRESETS.items() if preset.train.get("optimizer") == "muon"]
    parser.add_argument("--tasks", default=",".join(muon_presets))
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the Trainer runs in the app and the CLI
    results = [measure(task, args.rounds, args.steps) for task in args.tasks.split(",") if task]
    print(json.dumps({"benchmark": "muon_step", "target_muon_over_adam": TARGET_RATIO, "cpu": args.cpu,
                      "results": results, "machine": machine()}))


if __name__ == "__main__":
    main()
