"""Is a run memorising its training pairs? Read from its history of evaluations (`Trainer.history` rows: step,
train_loss, train_token_accuracy of the latest batch, and the held-out loss, token_accuracy and exact_match).

A run memorises when it fits its training data (training token accuracy at least FITS) and either the held-out loss
has risen well above its lowest while the training loss kept falling, or the held-out token accuracy stays far
below the training one (GAP). On a task with endless fresh pairs (every built-in one) the training batches are as
new to the model as the held-out inputs, so the two accuracies move together; on a few dozen pairs of one's own the
model learns them by heart. benchmarks/own_data_size.py measured both (docs/MEASUREMENTS.md).

Also here: how many pairs of one's own data the recipe needs before it learns much (MIN_LEARNING_PAIRS), and
how many the presets train on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .presets import PRESETS

FITS = 0.9  # training token accuracy from which a run fits its training data
GAP = 0.25  # training minus held-out token accuracy that says the model does not generalise what it fits
RISE, RISE_FRACTION = 0.3, 0.2  # held-out loss this far (nats, and fraction) above its lowest: rising
MIN_ROWS = 3  # evaluations before anything is said
# Own data trained with the Train page's recipe for it (the library defaults, 600 steps), two data sets: below
# MIN_LEARNING_PAIRS training pairs it never got more than BEST_BELOW of the held-out pairs right, and none at all
# from NONE_AT pairs or fewer (benchmarks/own_data_size.py; docs/MEASUREMENTS.md)
MIN_LEARNING_PAIRS, BEST_BELOW, NONE_AT = 200, 0.42, 54


@dataclass(frozen=True)
class Memorising:
    """What the history shows: the held-out loss at its lowest and now, and the training and held-out accuracies
    now (`rising`: the held-out loss rose while the training loss fell; `gap`: the accuracies part)."""

    best_step: int
    best_loss: float
    step: int
    loss: float
    train_loss: float
    train_accuracy: float
    accuracy: float
    exact_match: float
    rising: bool
    gap: bool


def _finite(row: dict, *names: str) -> bool:
    return all(isinstance(row.get(n), int | float) and math.isfinite(row[n]) for n in names)


def memorising(history: list[dict]) -> Memorising | None:
    """The signs of memorising in `history`, or None when there are none (or too few evaluations to tell)."""
    rows = [r for r in history if _finite(r, "step", "loss", "train_loss", "train_token_accuracy", "token_accuracy")]
    if len(rows) < MIN_ROWS:
        return None
    best, last = min(rows, key=lambda r: r["loss"]), rows[-1]
    rising = (last["loss"] >= best["loss"] + max(RISE, RISE_FRACTION * best["loss"])
              and last["train_loss"] < best["train_loss"])
    gap = last["train_token_accuracy"] - last["token_accuracy"] >= GAP
    if last["train_token_accuracy"] < FITS or not (rising or gap):
        return None
    return Memorising(best["step"], best["loss"], last["step"], last["loss"], last["train_loss"],
                      last["train_token_accuracy"], last["token_accuracy"], last.get("exact_match") or 0.0,
                      rising, gap)


def preset_pairs() -> tuple[int, int]:
    """The fewest and the most training pairs a built-in task's preset draws: steps × batch size, a fresh batch at
    every step."""
    counts = [p.train["steps"] * p.train["batch_size"] for p in PRESETS.values()]
    return min(counts), max(counts)
