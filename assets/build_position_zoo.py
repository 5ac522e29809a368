"""Builds assets/checkpoints/positions/*.safetensors: four small `reverse` models identical in everything but
their position scheme (sinusoidal, learned, rope, alibi), trained on inputs of 3 to 10 letters with positions
for up to 25, so the "Where it fails" page can show how each scheme does past the trained lengths.

Same recipe for all: the library's default shape (1+1 layers, d_model 64, 4 heads) with qk-norm (RoPE and ALiBi
learn `reverse` slowly without it), the default Adam schedule over a fixed number of steps, seed 0. The app's
model list does not show these (it reads assets/checkpoints/*.safetensors only). Deterministic on one torch
thread:

    python assets/build_position_zoo.py [SCHEME...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformer.store.checkpoints import save_bundle  # noqa: E402
from transformer.training.config import TrainConfig  # noqa: E402
from transformer.training.trainer import Trainer  # noqa: E402

OUT = ROOT / "assets" / "checkpoints" / "positions"
SCHEMES = ("sinusoidal", "learned", "rope", "alibi")
TRAINED = (3, 10)  # input lengths trained on
MAX_LEN = 26  # the models' positions: inputs of up to 25 letters can be evaluated
STEPS, SEED = 1000, 0
MODEL = {"qk_norm": True}  # the library's default shape otherwise


def build(scheme: str) -> None:
    train = TrainConfig(task="reverse", task_params={"min_len": TRAINED[0], "max_len": TRAINED[1]}, steps=STEPS,
                        seed=SEED)
    trainer = Trainer(train, MODEL | {"positional": scheme}, max_len=MAX_LEN)
    for _ in range(STEPS):
        trainer.step()
    metrics = trainer.evaluate(1000)  # greedy exact match on the run's own held-out split (trained lengths)
    bundle = trainer.bundle(name=f"reverse {TRAINED[0]}-{TRAINED[1]}, {scheme} positions")
    save_bundle(bundle, OUT / f"{scheme}.safetensors")
    print(f"{scheme}: exact match {metrics['exact_match']:.1%} after {STEPS} steps, {trainer.elapsed:.1f} s")


def main(schemes: list[str]) -> None:
    torch.set_num_threads(1)
    unknown = sorted(set(schemes) - set(SCHEMES))
    if unknown:
        raise SystemExit(f"unknown scheme(s) {', '.join(unknown)}; choose from {', '.join(SCHEMES)}")
    OUT.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for scheme in schemes or SCHEMES:
        build(scheme)
    print(f"built in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
