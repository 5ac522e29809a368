"""Every attention matrix of a finished greedy decode, ready to chart: for each kind (encoder self, decoder
self, cross) the weights of all layers and heads, the mask that was applied, the tokens on each axis, and
(for cross-attention on tasks with a known alignment) the source position each query should attend to.

Plain numpy out, so results can be cached and handed straight to the chart builders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from transformer.network.decoding import DecodeResult
from .heads import best_aligned_head, head_stats
from transformer.network.masks import subsequent_mask
from transformer.tasks import Task


@dataclass(frozen=True)
class AttentionMap:
    """One kind of attention over a whole decode. Queries are rows, keys are columns."""

    kind: str
    weights: np.ndarray  # (layers, heads, queries, keys) float32
    mask: np.ndarray | None  # (queries, keys) bool, True = may attend; None when nothing was blocked
    query_pieces: list[str]
    key_pieces: list[str]
    expected: list[int | None] | None  # per query row, the key it should attend to (None = undefined)
    written: list[str] | None = None  # decoder queries: the token each row wrote (rows are labelled by the read one)

    @property
    def layers(self) -> int:
        return self.weights.shape[0]

    @property
    def heads(self) -> int:
        return self.weights.shape[1]

    def blanked(self) -> np.ndarray:
        """The weights with blocked cells set to NaN, so a chart leaves them blank instead of showing 0."""
        return self.weights if self.mask is None else np.where(self.mask, self.weights, np.nan).astype(np.float32)

    def head_average(self, layer: int) -> np.ndarray:
        """(queries, keys): the mean over the heads of one layer."""
        return self.weights[layer].mean(axis=0)

    def stats(self) -> dict[str, np.ndarray]:
        """`headstats.head_stats` of every head: entropy, max weight and, with an expected alignment, its score."""
        return head_stats(self.weights, self.mask, self.expected)

    def best_aligned(self) -> tuple[int, int, float] | None:
        """(layer, head, score) of the head that best follows the expected alignment; None without one."""
        found = best_aligned_head(self.weights, self.expected)
        if found is None:
            return None
        layer, head = found
        return layer, head, float(self.stats()["alignment"][layer, head])


def _expected_rows(task: Task, source: str, queries: int) -> list[int | None] | None:
    """The task's alignment cut (or padded with None) to the decode's query rows: row t predicts output t."""
    expected = task.alignment(source)
    if expected is None:
        return None
    return (list(expected) + [None] * queries)[:queries]


def attention_maps(result: DecodeResult, task: Task, source: str) -> dict[str, AttentionMap]:
    """The three kinds of attention of `result` (a greedy decode of `source`), keyed like the trace."""
    weights = {kind: matrix.numpy().astype(np.float32) for kind, matrix in result.attention().items()}
    prefix, src = result.prefix_pieces, result.source_pieces
    steps = len(prefix)
    return {
        "encoder_self": AttentionMap("encoder_self", weights["encoder_self"], None, src, src, None),
        "decoder_self": AttentionMap("decoder_self", weights["decoder_self"],
                                     subsequent_mask(steps)[0, 0].numpy(), prefix, prefix, None,
                                     result.output_pieces),
        "cross": AttentionMap("cross", weights["cross"], None, prefix, src, _expected_rows(task, source, steps),
                              result.output_pieces),
    }
