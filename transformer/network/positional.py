"""Positional information: sinusoidal (default), learned or none, added to the embeddings; or RoPE (rotary:
each head's queries and keys rotated by their position) or ALiBi (a per-head linear bias on the scores) applied
inside self-attention, with nothing added to the embeddings."""

from __future__ import annotations

import functools
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


IN_ATTENTION = ("rope", "alibi")  # schemes applied in self-attention rather than added to the embeddings


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """RoPE: x (..., len, d) with even d, each pair (2i, 2i+1) turned by the angle pos * w_i, w_i =
    10000^(-2i/d) (`frequencies(d)`), for the (len,) absolute `positions`. Then
    rotate(q, m) . rotate(k, n) depends on q, k and the offset n - m only.

    Each pair is a complex number turned by multiplying it with cos + i sin: (even cos - odd sin, even sin + odd
    cos), the arithmetic of the pairs written out, as one kernel (forward and backward at the addition preset's
    shapes 0.28 ms instead of 0.69 on an AVX2 EPYC). For float32 and float64 `x`."""
    pairs = torch.view_as_complex(x.contiguous().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * turns(tuple(positions.tolist()), x.size(-1), x.dtype, x.device)).flatten(-2)


@functools.lru_cache(maxsize=256)
def turns(positions: tuple[int, ...], d: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(len, d/2) complex cos + i sin of each position's angles pos * w_i: what `rotate` multiplies the pairs by.
    Kept (a forward turns the same positions in every layer: 0.1 ms a call to build), so never to be changed, and
    built as a normal tensor even under inference mode (training may use it after)."""
    with torch.inference_mode(False):
        angles = torch.tensor(positions, dtype=dtype)[:, None] * frequencies(d, dtype)
        return torch.polar(torch.ones_like(angles), angles).to(device)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """(n_heads,) ALiBi slopes (Press et al. 2022): the geometric sequence 2^(-8/n), 2^(-16/n), ... for n a
    power of two; otherwise those of the power of two below, then every other slope of the one above."""
    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    below = 2 ** math.floor(math.log2(n_heads))
    slopes = geometric(below) + geometric(2 * below)[0::2][: n_heads - below]
    return torch.tensor(slopes)


def alibi_bias(slopes: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """(heads, queries, keys) ALiBi bias -slope_h * |i - j| added to the scores. Symmetric, so the encoder
    (which sees both sides) is penalised by distance too; under the causal mask it is the paper's -m (i - j)."""
    distance = (query_positions[:, None] - key_positions[None, :]).abs().to(slopes.dtype)
    return -slopes[:, None, None] * distance


class PositionalEncoding(nn.Module):
    """Gives the (1, len, d_model) positional term for positions offset .. offset + len - 1."""

    def __init__(self, kind: str, max_len: int, d_model: int):
        super().__init__()
        self.kind = kind
        self.max_len = max_len
        self.d_model = d_model
        if kind == "learned":
            self.embedding = nn.Embedding(max_len, d_model)
        else:  # deterministic (zeros for "none", "rope", "alibi"), so not saved in checkpoints nor rebuilt
            table = sinusoidal_table(max_len, d_model) if kind == "sinusoidal" else torch.zeros(max_len, d_model)
            self.register_buffer("table", table, persistent=False)

    def full_table(self) -> torch.Tensor:
        """(max_len, d_model): every position's encoding (zeros for "none" and the in-attention schemes)."""
        return self.embedding.weight if self.kind == "learned" else self.table

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        if offset + length > self.max_len:
            raise ValueError(f"sequence of {offset + length} positions exceeds the model's max_len {self.max_len}")
        return self.full_table()[offset : offset + length][None]
