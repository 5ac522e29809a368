"""Positional information: sinusoidal (default), learned, or none."""

from __future__ import annotations

import math

import torch
from torch import nn


def frequencies(d_model: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(ceil(d_model / 2),) angular frequencies w_i = 10000^(-2i/d_model) of the sine/cosine pairs."""
    return torch.exp(torch.arange(0, d_model, 2, dtype=dtype) * (-math.log(10000.0) / d_model))


def sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """(length, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same angle)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    angles = position * frequencies(d_model)
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
        if kind == "learned":
            self.embedding = nn.Embedding(max_len, d_model)
        else:  # deterministic (zeros for "none"), so not saved in checkpoints and not rebuilt per forward
            table = sinusoidal_table(max_len, d_model) if kind == "sinusoidal" else torch.zeros(max_len, d_model)
            self.register_buffer("table", table, persistent=False)

    def full_table(self) -> torch.Tensor:
        """(max_len, d_model): every position's encoding (zeros for kind "none")."""
        return self.embedding.weight if self.kind == "learned" else self.table

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        if offset + length > self.max_len:
            raise ValueError(f"sequence of {offset + length} positions exceeds the model's max_len {self.max_len}")
        return self.full_table()[offset : offset + length][None]
