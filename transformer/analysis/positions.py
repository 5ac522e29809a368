"""The rotation that moves sinusoidal positional encodings by a fixed offset k (PE(pos + k) = M_k PE(pos)),
checked numerically, a model's own positional encodings, and for RoPE / ALiBi models what their attention does
with positions (a query/key pair rotated per frequency, each head's bias): what the Positional encoding page
shows. No streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from transformer.network.masks import padding_mask
from transformer.network.model import EncoderDecoder
from transformer.network.positional import alibi_bias, frequencies, rotate, sinusoidal_table
from transformer.network.trace import AttentionTrace


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


@dataclass(frozen=True)
class RopeDemo:
    """One encoder self-attention head of a RoPE model on one input: the query at position m and the key at
    position n from the layer's own projections, per frequency pair i (rows), before and after RoPE turned
    them by m*w_i and n*w_i; and q.k with both positions shifted by s, which depends on n - m only."""

    layer: int
    head: int
    query_pos: int
    key_pos: int
    freqs: np.ndarray  # (d_head / 2,): w_i in radians per position
    q: np.ndarray  # (d_head / 2, 2): the query's pairs before rotation (after qk-norm, if any)
    k: np.ndarray  # (d_head / 2, 2): the key's pairs before rotation
    q_rot: np.ndarray  # (d_head / 2, 2): turned by query_pos * w_i
    k_rot: np.ndarray  # (d_head / 2, 2): turned by key_pos * w_i
    shifts: np.ndarray  # (S,): s = 0 .. max_len - 1 - max(m, n)
    dots: np.ndarray  # (S,): rotate(q, m + s) . rotate(k, n + s)
    recorded: float  # the traced forward pass's pre-softmax score for (m, n) in this layer and head

    @property
    def contributions(self) -> np.ndarray:
        """(d_head / 2,): each pair's share of q.k after rotation; they sum to `dots[0]`."""
        return (self.q_rot * self.k_rot).sum(-1)

    @property
    def score(self) -> float:
        """q.k / sqrt(d_head) after rotation: the score attention uses (equal to `recorded`)."""
        return float(self.contributions.sum() / np.sqrt(2 * len(self.freqs)))

    @property
    def spread(self) -> float:
        """max |q.k at shift s - q.k at shift 0|: float32 rounding only."""
        return float(np.abs(self.dots - self.dots[0]).max())


def _encoder_input(model: EncoderDecoder, src: torch.Tensor, layer: int) -> torch.Tensor:
    """What encoder layer `layer`'s self-attention sublayer receives for the (1, len) ids `src`."""
    mask, where = padding_mask(src), torch.arange(src.size(1))
    x = model.src_embed(src)
    for earlier in model.encoder.layers[:layer]:
        x = earlier(x, mask, None, where)
    residual = model.encoder.layers[layer].residuals[0]
    return residual.norm(x) if residual.pre_norm else x


def rope_demo(model: EncoderDecoder, src_ids: list[int], query_pos: int, key_pos: int, layer: int = 0,
              head: int = 0) -> RopeDemo:
    """RoPE on the encoder's own query/key pair (0-based layer, head, positions) for one input's ids."""
    if model.config.positional != "rope":
        raise ValueError(f"this model uses {model.config.positional} positions, not rope")
    if not (0 <= query_pos < len(src_ids) and 0 <= key_pos < len(src_ids)):
        raise ValueError(f"positions must lie in 0..{len(src_ids) - 1}")
    attn = model.encoder.layers[layer].self_attn
    src = torch.tensor([src_ids])
    with torch.no_grad():
        x = _encoder_input(model, src, layer)
        q, k = attn.queries(x)[0, head, query_pos], attn.keys_values(x)[0][0, head, key_pos]  # unrotated
        shifts = torch.arange(model.config.max_len - max(query_pos, key_pos))
        dots = (rotate(q.expand(len(shifts), -1)[:, None], shifts + query_pos)
                * rotate(k.expand(len(shifts), -1)[:, None], shifts + key_pos)).sum(-1)
        trace = AttentionTrace()
        model.encode(src, padding_mask(src), trace)
        recorded = float(trace.attention["encoder_self"][layer].scores[0, head, query_pos, key_pos])

    def pairs(v: torch.Tensor, pos: int | None = None) -> np.ndarray:
        v = v if pos is None else rotate(v[None], torch.tensor([pos]))[0]
        return v.view(-1, 2).double().numpy()

    return RopeDemo(layer, head, query_pos, key_pos, frequencies(q.numel(), torch.float64).numpy(),
                    pairs(q), pairs(k), pairs(q, query_pos), pairs(k, key_pos), shifts.numpy(),
                    dots.diagonal().double().numpy(), recorded)


def alibi_biases(model: EncoderDecoder, length: int) -> tuple[np.ndarray, np.ndarray]:
    """An ALiBi model's (heads,) slopes and its (heads, length, length) bias -slope * |i - j| over positions
    0 .. length - 1, read from its first encoder layer (every self-attention layer has the same)."""
    if model.config.positional != "alibi":
        raise ValueError(f"this model uses {model.config.positional} positions, not alibi")
    slopes = model.encoder.layers[0].self_attn.slopes
    where = torch.arange(length)
    return slopes.double().numpy(), alibi_bias(slopes, where, where).double().numpy() + 0.0  # no -0.0
