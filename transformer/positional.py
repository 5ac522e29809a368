"""Positional information: sinusoidal (default), learned, or none."""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """(length, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same angle)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = position * inv_freq
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


class PositionalEncoding(nn.Module):
    """Gives the (1, len, d_model) positional term for positions offset .. offset + len - 1."""

    def __init__(self, kind: str, max_len: int, d_model: int):
        super().__init__()
        self.kind = kind
        self.max_len = max_len
        self.d_model = d_model
        if kind == "sinusoidal":  # deterministic, so not saved in checkpoints
            self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)
        elif kind == "learned":
            self.embedding = nn.Embedding(max_len, d_model)

    def full_table(self) -> torch.Tensor:
        """(max_len, d_model): every position's encoding (zeros for kind "none")."""
        if self.kind == "sinusoidal":
            return self.table
        if self.kind == "learned":
            return self.embedding.weight
        return torch.zeros(self.max_len, self.d_model)

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        if offset + length > self.max_len:
            raise ValueError(f"sequence of {offset + length} positions exceeds the model's max_len {self.max_len}")
        return self.full_table()[offset : offset + length][None]
