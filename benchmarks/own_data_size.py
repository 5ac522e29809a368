"""How many pairs of one's own data the Train page's recipe needs before it learns anything that holds out, and
whether transformer.training.diagnosis calls the runs memorising (it must on the small ones, never on a preset).

Own data: N pairs drawn (seeded) from a data set, trained as the Train page trains own data (the library defaults:
1+1 layers, d_model 64, Adam, 600 steps, batch 64, an evaluation every 25 steps on the held-out tenth). Two data
sets: the shipped example (assets/data/roman_numerals.tsv: a number and its Roman numeral) and reversed strings
(2-8 random letters, what the reverse task learns). Per run, one JSON line: the pairs trained on, the held-out
pairs, the held-out exact match at the end (and on up to 200 held-out inputs scored afresh, for the small splits),
the held-out loss at its lowest and at the end, the training loss and token accuracy, and the step at which
`memorising` first spoke (None: never). With --presets, every built-in task's preset run the same way: memorising
must never speak there. Slow on a busy 2-core machine: about 20 s a run. Each line ends with the machine
(timing.machine(): CPU, capability, threads, load).

    python benchmarks/own_data_size.py [--sizes 30,60,120,250,500,999] [--seeds 0,1] [--presets]
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from transformer.training.config import TrainConfig  # noqa: E402
from transformer.training.diagnosis import memorising  # noqa: E402
from transformer.training.presets import PRESETS  # noqa: E402
from transformer.training.trainer import Trainer  # noqa: E402
from timing import machine  # noqa: E402

ROMAN = Path(__file__).resolve().parents[1] / "assets" / "data" / "roman_numerals.tsv"


def roman_pairs() -> list[str]:
    return ROMAN.read_text().splitlines()[1:]


def reversed_pairs(count: int = 5000) -> list[str]:
    draw = random.Random(7)
    words = {"".join(draw.choices(string.ascii_lowercase, k=draw.randint(2, 8))) for _ in range(count)}
    return [f"{w}\t{w[::-1]}" for w in sorted(words)]


def run(trainer: Trainer, target: float | None = None) -> dict:
    """Train to the end (or the target, as the page stops), evaluating every eval_every steps; the summary."""
    spoke = None
    for _ in range(trainer.config.steps):
        trainer.step()
        if trainer.step_count % trainer.config.eval_every == 0:
            reached = trainer.evaluate_for_target(target)
            if spoke is None and memorising(trainer.history) is not None:
                spoke = trainer.step_count
            if reached:
                break
    rows = trainer.history
    best = min(rows, key=lambda r: r["loss"])
    return {"steps": trainer.step_count, "exact_match": rows[-1]["exact_match"], "samples": rows[-1]["samples"],
            "best_loss": round(best["loss"], 3), "best_step": best["step"], "loss": round(rows[-1]["loss"], 3),
            "train_loss": round(rows[-1]["train_loss"], 4),
            "train_token_accuracy": round(rows[-1]["train_token_accuracy"], 3),
            "token_accuracy": round(rows[-1]["token_accuracy"], 3), "memorising_from_step": spoke}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="30,60,120,250,500,999")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--data", default="roman,reversed")
    parser.add_argument("--presets", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sets = {"roman": roman_pairs, "reversed": reversed_pairs}
    for name in args.data.split(","):
        pairs = sets[name]()
        for seed in (int(s) for s in args.seeds.split(",")):
            for size in (int(n) for n in args.sizes.split(",")):
                lines = random.Random(seed).sample(pairs, min(size, len(pairs)))
                trainer = Trainer(TrainConfig(task="custom", seed=seed,
                                              task_params={"data": "\n".join(lines), "title": name}), None)
                params = trainer.task.card_params()
                print(json.dumps({"data": name, "pairs": len(lines), "train_pairs": params["train_pairs"],
                                  "heldout_pairs": params["heldout_pairs"], "seed": seed, **run(trainer),
                                  "machine": machine()}), flush=True)
    if args.presets:
        for task, preset in PRESETS.items():
            print(json.dumps({"preset": task, **run(preset.trainer(), preset.target),
                              "machine": machine()}), flush=True)


if __name__ == "__main__":
    main()
