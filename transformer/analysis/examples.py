"""Worked examples of an evaluation: what a model writes for given (source, target) pairs.

The metrics come from `evaluation.evaluate_bundle`; this shows a learner the individual answers behind
them, right and wrong. One batched greedy pass, no trace; the model is only read.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer.bundle import ModelBundle
from transformer.network.decoding import greedy_batch
from transformer.tasks import encode_pairs


@dataclass(frozen=True)
class Example:
    source: str
    expected: str
    output: str

    @property
    def correct(self) -> bool:
        return self.output == self.expected


def decode_examples(bundle: ModelBundle, pairs: list[tuple[str, str]]) -> list[Example]:
    """The model's greedy output for each pair, given room for the expected answer and its </s>."""
    if not pairs:
        return []
    src, tgt = encode_pairs(bundle.tokenizer, pairs)
    outputs = greedy_batch(bundle.model, src, tgt.size(1) - 1)
    return [Example(source, expected, bundle.tokenizer.decode(row.tolist()))
            for (source, expected), row in zip(pairs, outputs)]
