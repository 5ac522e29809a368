"""The rotation that moves sinusoidal positional encodings by a fixed offset k (PE(pos + k) = M_k PE(pos)),
checked numerically, and a model's own positional encodings: what the Positional encoding page shows.
No streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .model import EncoderDecoder
from .positional import frequencies, sinusoidal_table


def pe_frequencies(d_model: int) -> torch.Tensor:
    """(d_model / 2,) float64 angular frequencies w_i = 10000^(-2i/d_model) of the sinusoidal pairs."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be an even number >= 2 to pair sines with cosines, got {d_model}")
    return frequencies(d_model, torch.float64)


def rotation_matrix(d_model: int, k: int) -> torch.Tensor:
    """(d_model, d_model) block-diagonal M_k with PE(pos + k) = M_k PE(pos) for every pos.

    Dimensions (2i, 2i+1) hold (sin(pos w_i), cos(pos w_i)); the angle-addition formulas turn a shift by k
    into the 2x2 rotation [[cos k w_i, sin k w_i], [-sin k w_i, cos k w_i]] on that pair, independent of pos.
    """
    angles = k * pe_frequencies(d_model)
    cos, sin = torch.cos(angles), torch.sin(angles)
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # (d/2, 2, 2)
    return torch.block_diag(*blocks)


@dataclass(frozen=True)
class RotationDemo:
    """M_k applied to PE(pos) for several pos, compared with PE(pos + k) from `sinusoidal_table`."""

    d_model: int
    k: int
    positions: list[int]
    matrix: np.ndarray  # (d_model, d_model)
    angles: np.ndarray  # (d_model / 2,): k * w_i in radians, one per frequency pair
    errors: np.ndarray  # (len(positions),): max |M_k PE(pos) - PE(pos + k)| per pos

    @property
    def max_error(self) -> float:
        return float(self.errors.max())


def rotation_demo(d_model: int, k: int, positions: list[int]) -> RotationDemo:
    """Check numerically that one fixed matrix moves every listed position's encoding forward by k."""
    if not positions or min(positions) < 0 or k < 0:
        raise ValueError("positions and the offset k must be whole numbers >= 0")
    table = sinusoidal_table(max(positions) + k + 1, d_model).double()
    matrix = rotation_matrix(d_model, k)
    index = torch.tensor(positions)
    moved = table[index] @ matrix.T
    errors = (moved - table[index + k]).abs().amax(-1)
    return RotationDemo(d_model, k, list(positions), matrix.numpy(), (k * pe_frequencies(d_model)).numpy(),
                        errors.numpy())


def model_positions(model: EncoderDecoder, side: str = "src") -> tuple[str, np.ndarray]:
    """The model's own positional encodings: (kind, (max_len, d_model) copy) for the "src" or "tgt" side."""
    embed = {"src": model.src_embed, "tgt": model.tgt_embed}[side]
    return embed.positions.kind, embed.positions.full_table().detach().float().cpu().numpy().copy()
