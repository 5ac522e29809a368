"""AttentionTrace: what one forward pass really computed, recorded as it happens.

A trace is created by the caller and passed down; modules write into it and keep nothing themselves, so a
cached model shared by many sessions stays read-only. Every trace records the attention (scores, mask, weights)
and the embeddings; a detailed one (`AttentionTrace(detail=True)`, the code page's) also keeps the named
intermediate tensors the modules hand to `keep`: each head's q, k and v, the sublayers' inputs and outputs, the
feed-forward's hidden layer, the stacks' outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

KINDS = ("encoder_self", "decoder_self", "cross")


@dataclass(frozen=True)
class AttentionRecord:
    """One attention call. All tensors are (batch, heads, queries, keys), detached.

    scores:  q.k / sqrt(d_head) before masking and softmax (q and k after the model's qk-norm, if it has one,
             and RoPE's rotation; under ALiBi with each head's bias -slope * |i - j| added)
    mask:    the boolean mask that was applied (True = may attend), broadcast to the scores' shape
    weights: the softmax weights after masking (masked entries exactly 0)
    """

    scores: torch.Tensor
    mask: torch.Tensor
    weights: torch.Tensor


@dataclass(frozen=True)
class EmbeddingRecord:
    """What entered a stack: scaled token embeddings and the positional term added to them."""

    tokens: torch.Tensor  # (batch, len, d_model): embedding * sqrt(d_model)
    positions: torch.Tensor  # (batch or 1, len, d_model): zeros when positions are off


@dataclass
class AttentionTrace:
    """Records keyed by kind ("encoder_self", "decoder_self", "cross") and layer index."""

    attention: dict[str, dict[int, AttentionRecord]] = field(default_factory=lambda: {k: {} for k in KINDS})
    embeddings: dict[str, EmbeddingRecord] = field(default_factory=dict)  # "src" / "tgt"
    detail: bool = False  # keep the intermediate tensors too (`tensors`)
    tensors: dict[tuple, torch.Tensor] = field(default_factory=dict)  # (*site, name) -> tensor, detail only

    def record(self, kind: str, layer: int, scores, mask, weights) -> None:
        self.attention[kind][layer] = AttentionRecord(
            scores.detach(), mask.expand_as(scores).detach(), weights.detach()
        )

    def record_embedding(self, side: str, tokens, positions) -> None:
        self.embeddings[side] = EmbeddingRecord(tokens.detach(), positions.detach())

    def keep(self, site: tuple, **tensors: torch.Tensor) -> None:
        """Keep intermediate tensors under (*site, name), e.g. ("encoder", 0, "feed_forward", "hidden"); only a
        detailed trace keeps them, so an ordinary one holds no more than its attention."""
        if self.detail:
            self.tensors.update({(*site, name): tensor.detach() for name, tensor in tensors.items()})

    def weights(self, kind: str) -> torch.Tensor:
        """All layers of one kind stacked: (layers, batch, heads, queries, keys)."""
        layers = self.attention[kind]
        return torch.stack([layers[i].weights for i in sorted(layers)])
