"""Builds assets/checkpoints/reverse-early.safetensors: the `reverse` run of the library's default settings
stopped early (200 steps, seed 1), honestly labelled as under-trained, on which beam search matters.

On the six full models greedy and beam search agree on every held-out input, so the decoding page's beam
section could never show why beam search exists. Here about half the held-out inputs come out right and on
some of them only beam search finds the answer. The card's examples are the first held-out inputs (fixed
seed) where beam search (width 4) is right and greedy is wrong, then one where both are right. Deterministic
on one torch thread:

    python assets/build_beam_demo.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformer.store.checkpoints import save_bundle  # noqa: E402
from transformer.network.decoding import beam_search, greedy_decode  # noqa: E402
from transformer.training.config import TrainConfig  # noqa: E402
from transformer.training.trainer import Trainer  # noqa: E402

OUT = ROOT / "assets" / "checkpoints" / "reverse-early.safetensors"
STEPS, SEED, BEAM = 200, 1, 4
WINS, CANDIDATES, CANDIDATE_SEED = 3, 300, 7


def pick_examples(bundle) -> list[str]:
    """The first WINS held-out inputs where beam search is right and greedy wrong, then one where both are
    right (beam search changes nothing there)."""
    wins, agree = [], []
    for source, target in bundle.task.pairs(CANDIDATES, CANDIDATE_SEED, "heldout"):
        greedy = greedy_decode(bundle.model, bundle.tokenizer, source).output_text
        beam = beam_search(bundle.model, bundle.tokenizer, source, beam=BEAM).text
        if beam == target != greedy and len(wins) < WINS:
            wins.append(source)
        elif beam == target == greedy and not agree:
            agree.append(source)
        if len(wins) == WINS and agree:
            return wins + agree
    raise SystemExit(f"only {len(wins)} inputs where beam search beats greedy among {CANDIDATES}")


def main() -> None:
    torch.set_num_threads(1)
    trainer = Trainer(TrainConfig(task="reverse", steps=STEPS, seed=SEED))
    for _ in range(STEPS):
        trainer.step()
    trainer.evaluate(1000)  # greedy exact match on the run's own held-out split, for the card
    bundle = trainer.bundle(name=f"reverse, under-trained ({STEPS} steps)")
    bundle.card |= {"under_trained": True, "examples": pick_examples(bundle),
                    "note": f"Stopped after {STEPS} steps on purpose: about half of its outputs are right, and on "
                            f"some inputs only beam search (width {BEAM}) finds the answer."}
    save_bundle(bundle, OUT)
    print(f"{OUT.relative_to(ROOT)}: exact match {bundle.card['exact_match']:.1%}, examples {bundle.card['examples']}")


if __name__ == "__main__":
    main()
