"""The training probe: one input greedy-decoded by a snapshot of the model being trained, kept as its output
and cross-attention so the Train page (and benchmarks/app_train.py) can show how attention forms.

`Probe` is TrainingJob's probe callback; it runs in the training thread. No streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from transformer.bundle import ModelBundle
from transformer.network.decoding import greedy_decode


@dataclass(frozen=True)
class ProbeResult:
    """The probe input greedy-decoded by one snapshot of the model: its output and cross-attention.

    `cross` is (dec_layers, heads, len(output_pieces), len(source_pieces)) float32: the output tokens are the
    queries, the source tokens (with the closing </s>) the keys. On a bad input only `source` and `error` are
    set.
    """

    source: str
    source_pieces: list[str] = field(default_factory=list)
    output_pieces: list[str] = field(default_factory=list)
    output_text: str = ""
    cross: np.ndarray | None = None  # (dec_layers, heads, output tokens, source tokens), float32
    error: str | None = None


def run_probe(bundle: ModelBundle, text: str) -> ProbeResult:
    """Greedy-decode `text` with `bundle`'s model; a bad input becomes `error`, never an exception."""
    try:
        result = greedy_decode(bundle.model, bundle.tokenizer, text)
    except ValueError as exc:  # TokenizerError, DecodeError
        return ProbeResult(text, error=str(exc))
    return ProbeResult(text, result.source_pieces, result.output_pieces, result.output_text,
                       result.cross.numpy().astype(np.float32))


class Probe:
    """TrainingJob's probe callback (runs in the training thread). `text` may be changed from the page at any
    time; the next snapshot decodes the new text (assigning a str is atomic)."""

    def __init__(self, text: str):
        self.text = text

    def __call__(self, bundle: ModelBundle) -> ProbeResult:
        return run_probe(bundle, self.text)


def example_input(task) -> str:
    """The default probe: the task's first held-out example."""
    return task.examples()[0]
