"""ModelBundle: a model together with everything needed to use and describe it; ModelFacts: what describes it
without its weights."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module costs no torch import (the sidebar's cards need none)
    from transformer.network.config import ModelConfig
    from transformer.network.model import EncoderDecoder
    from transformer.network.tokenizers import Tokenizer
    from transformer.tasks import Task


@dataclass
class ModelBundle:
    """A trained model, its tokenizer, its task, and its model card.

    `card` holds plain JSON-able facts: name, created (ISO time), steps, seconds, exact_match,
    token_accuracy, loss, and anything else worth showing. Treat the model as read-only once built:
    cached bundles are shared by every browser session. `notes` says what loading had to drop from the
    file's card (see transformer.store.cards); safe to show, never holding the dropped values.
    """

    model: EncoderDecoder
    tokenizer: Tokenizer
    task: Task
    card: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def config(self):
        return self.model.config

    @property
    def name(self) -> str:
        return model_name(self.card, self.task)

    def facts(self) -> ModelFacts:
        return ModelFacts(self.task, self.config, self.model.num_parameters(), self.card, self.notes)

    def examples(self) -> list[str]:
        """Inputs worth trying: the card's own (those the tokenizer can read), else the task's held-out ones."""
        chosen = []
        for text in self.card.get("examples", ()):
            try:
                self.tokenizer.encode(text)
            except ValueError:  # TokenizerError: a card example this model cannot read is left out
                continue
            chosen.append(text)
        return chosen or self.task.examples()

    def fingerprint(self) -> str:
        """SHA-256 of what makes the model compute what it does: its configuration, tokenizer, task and every
        tensor of its weights; the card (a name, a date) is left out, so one model saved twice has one print."""
        digest = hashlib.sha256(json.dumps([self.config.to_dict(), self.tokenizer.to_dict(), self.task.name,
                                            self.task.card_params()], sort_keys=True, default=str).encode())
        for name, tensor in sorted(self.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()


@dataclass(frozen=True)
class ModelFacts:
    """What describes a model without its weights (the sidebar's card, the home page's task and architecture): a
    bundle's (`ModelBundle.facts`) or a checkpoint header's (`CheckpointInfo.facts`, which needs no torch)."""

    task: Task
    config: ModelConfig
    parameters: int
    card: dict
    notes: list[str]

    @property
    def name(self) -> str:
        return model_name(self.card, self.task)


def model_name(card: dict, task: Task) -> str:
    """A model's name: its card's, else its task's."""
    return card.get("name") or task.name
