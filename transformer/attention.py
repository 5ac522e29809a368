"""Scaled dot-product attention, two ways, and the multi-head module around it.

Fast path (no trace): torch's fused `scaled_dot_product_attention`. Traced path: the same arithmetic
written out, so the scores, the mask and the weights can be recorded. Tests hold the two equal.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .positional import IN_ATTENTION, alibi_bias, alibi_slopes, rotate
from .trace import AttentionTrace


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float = 0.0,
    trace: AttentionTrace | None = None,
    site: tuple[str, int] | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + bias, masked) v for (batch, heads, len, d_head) tensors.

    `mask` is boolean, True = may attend, broadcastable to (batch, heads, queries, keys); `bias` (ALiBi) is
    float, broadcastable likewise, and the trace records the scores with it added. A query row with every
    key masked yields weights of exactly 0 (never NaN) on both paths.
    """
    if trace is None:
        # torch >= 2.5 gives fully masked rows zero weight here too (its "safe softmax"), -inf masks included.
        if bias is not None:
            mask = bias if mask is None else torch.where(mask, bias, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if bias is not None:
        scores = scores + bias
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0.0)
    kind, layer = site
    trace.record(kind, layer, scores, mask, weights)
    return F.dropout(weights, dropout_p) @ v


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate query, key, value and output projections.

    qk_norm: each head's queries and keys pass an RMSNorm (a learned scale per head dimension, shared by the
    heads) before attention, so both paths, and the trace's scores, see the normalised q and k.
    positional: "rope" rotates q and k (after qk-norm) by their absolute positions; "alibi" adds each head's
    bias -slope * |i - j| to the scores; anything else: no positions here. Both need the `positions` passed to
    `keys_values` and `forward`; None there (cross-attention, or positions switched off) means none."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, qk_norm: bool = False,
                 positional: str | None = None):
        super().__init__()
        self.n_heads = n_heads
        self.positional = positional if positional in IN_ATTENTION else None
        if self.positional == "alibi":  # derived from n_heads, so not saved: old checkpoints load unchanged
            self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.q_norm = nn.RMSNorm(d_model // n_heads) if qk_norm else None
        self.k_norm = nn.RMSNorm(d_model // n_heads) if qk_norm else None

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, d_model = x.shape
        return x.view(batch, length, self.n_heads, d_model // self.n_heads).transpose(1, 2)

    def keys_values(self, source: torch.Tensor, positions: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Project the attended-to sequence once: (batch, heads, keys, d_head) each (cacheable; keys normalised
        already under qk_norm, and under RoPE rotated by their (keys,) absolute `positions`)."""
        k = self._split(self.k_proj(source))
        k = k if self.k_norm is None else self.k_norm(k)
        if self.positional == "rope" and positions is not None:
            k = rotate(k, positions)
        return k, self._split(self.v_proj(source))

    def queries(self, query: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, heads, queries, d_head): projected, normalised under qk_norm, rotated under RoPE at `positions`."""
        q = self._split(self.q_proj(query))
        q = q if self.q_norm is None else self.q_norm(q)
        return rotate(q, positions) if self.positional == "rope" and positions is not None else q

    def forward(
        self,
        query: torch.Tensor,
        keys_values: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        trace: AttentionTrace | None = None,
        site: tuple[str, int] | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`positions`: the queries' (queries,) absolute positions; the keys (self-attention) sit at 0, 1, ..."""
        k, v = keys_values
        p = self.dropout if self.training else 0.0
        q = self.queries(query, positions)
        bias = None
        if positions is not None and self.positional == "alibi":
            bias = alibi_bias(self.slopes, positions, torch.arange(k.size(2), device=k.device)).to(q.dtype)
        out = attend(q, k, v, mask, p, trace, site, bias)
        batch, heads, length, d_head = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, heads * d_head))
