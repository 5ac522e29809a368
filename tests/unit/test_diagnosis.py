"""Memorising, read from a run's history (transformer/training/diagnosis.py): it speaks on a few dozen pairs of
one's own data trained to a training loss of 0, and never on a healthy run; and the training batch's token
accuracy the Trainer records is the accuracy of that batch's logits."""

from __future__ import annotations

import random

import pytest
import torch

from helpers.repo import ROOT
from transformer.training.config import TrainConfig
from transformer.training.diagnosis import memorising, preset_pairs
from transformer.training.fast_forward import packed_logits
from transformer.training.presets import PRESETS
from transformer.training.trainer import Trainer


def row(step, train_loss, train_accuracy, loss, accuracy, exact=0.0) -> dict:
    return {"step": step, "train_loss": train_loss, "train_token_accuracy": train_accuracy, "loss": loss,
            "token_accuracy": accuracy, "exact_match": exact}


# The run: 38 pairs, training loss to 0, held-out loss rising from 2.3 to 3.6, exact match 0%
TINY = [row(25, 1.0, 0.64, 2.3, 0.32), row(75, 0.05, 0.97, 2.4, 0.45), row(175, 0.02, 1.0, 3.1, 0.45),
        row(600, 0.0, 1.0, 3.6, 0.36)]
HEALTHY = [row(s, 2.5 / (1 + s / 25), min(1.0, s / 300), 2.6 / (1 + s / 25), min(1.0, s / 310), min(1.0, s / 330))
           for s in range(25, 325, 25)]


def test_a_tiny_run_that_learns_its_pairs_by_heart_is_named():
    found = memorising(TINY)
    assert found is not None and found.rising and found.gap
    assert (found.best_step, found.best_loss, found.loss, found.train_loss) == (25, 2.3, 3.6, 0.0)
    assert (found.train_accuracy, found.accuracy, found.exact_match) == (1.0, 0.36, 0.0)


def test_a_healthy_run_and_a_run_too_young_to_tell_are_not():
    assert memorising(HEALTHY) is None
    assert memorising(TINY[:2]) is None  # two evaluations tell nothing yet
    assert memorising([]) is None


@pytest.mark.parametrize("last, rising, gap", [
    (row(600, 0.0, 1.0, 3.6, 0.95), True, False),  # held-out loss up, accuracies together
    (row(600, 0.01, 1.0, 2.3, 0.5), False, True),  # loss flat, accuracies apart
])
def test_either_sign_alone_is_enough_once_the_training_pairs_are_fitted(last, rising, gap):
    found = memorising([*TINY[:3], last])
    assert found is not None and (found.rising, found.gap) == (rising, gap)


def test_nothing_is_said_while_the_training_pairs_are_not_fitted_yet():
    assert memorising([*TINY[:3], row(600, 0.4, 0.8, 3.6, 0.3)]) is None
    unmeasured = [{k: v for k, v in r.items() if not k.startswith("train")} for r in TINY]  # older histories
    assert memorising(unmeasured) is None


def test_the_recorded_training_accuracy_is_the_batchs():
    train = TrainConfig(steps=5, batch_size=16)
    trainer, twin = Trainer(train), Trainer(train)  # the same seed: the same weights and the same first batch
    trainer.step()
    src, tgt = twin.task.batch(train.batch_size, twin.batches, twin.tokenizer)
    with torch.no_grad():
        logits, targets = packed_logits(twin.model.train(), src, tgt)
    assert trainer.last_accuracy == pytest.approx(float((logits.argmax(-1) == targets).float().mean()))
    trainer.evaluate(16)
    assert trainer.history[-1]["train_token_accuracy"] == trainer.last_accuracy


def test_preset_pairs_are_steps_times_batches():
    counts = {t: p.train["steps"] * p.train["batch_size"] for t, p in PRESETS.items()}
    assert preset_pairs() == (min(counts.values()), max(counts.values())) == (3600, 32000)


def test_a_few_dozen_own_pairs_are_memorised_and_a_preset_run_is_not():
    """The Trainer itself, a few hundred steps each (the Train page's own-data recipe: the library defaults)."""
    torch.manual_seed(0)
    lines = (ROOT / "assets" / "data" / "roman_numerals.tsv").read_text().splitlines()[1:]
    data = "\n".join(random.Random(0).sample(lines, 42))
    tiny = Trainer(TrainConfig(task="custom", task_params={"data": data, "title": "roman"}, steps=200))
    healthy = PRESETS["reverse"].trainer(steps=200)
    for trainer in (tiny, healthy):
        for _ in range(200):
            trainer.step()
            if trainer.step_count % 25 == 0:
                trainer.evaluate(50)
    assert memorising(tiny.history) is not None
    assert memorising(healthy.history) is None
