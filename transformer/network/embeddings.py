"""Embeddings (the paper's sections 3.4 and 3.5): each token's learned vector times sqrt(d_model), plus the
positional term of its place in the sequence (positional.py), then dropout."""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import ModelConfig
from .positional import PositionalEncoding
from .trace import AttentionTrace


def dropout_if_active(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """`dropout(x)`, skipped where it is the identity (p = 0 or eval mode): one call less per sublayer."""
    return dropout(x) if dropout.training and dropout.p > 0 else x


class Embedding(nn.Module):
    """Token embedding times sqrt(d_model), plus the positional term, then dropout."""

    def __init__(self, vocab: int, config: ModelConfig):
        super().__init__()
        self.scale = math.sqrt(config.d_model)
        self.tokens = nn.Embedding(vocab, config.d_model)
        self.positions = PositionalEncoding(config.positional, config.max_len, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, offset: int = 0, positions: bool = True,
                trace: AttentionTrace | None = None, side: str = "src") -> torch.Tensor:
        """(batch, len) ids at positions offset .. offset + len - 1 -> (batch, len, d_model). positions=False: the
        positional term is left out (the positions page's "decoding without positions")."""
        tokens = self.tokens(ids) * self.scale
        pos = self.positions(ids.size(1), offset)
        if not positions:
            pos = torch.zeros_like(pos)
        if trace is not None:
            trace.record_embedding(side, tokens, pos)
        return dropout_if_active(self.dropout, tokens + pos)
