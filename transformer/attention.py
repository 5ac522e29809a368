"""Scaled dot-product attention, two ways, and the multi-head module around it.

Fast path (no trace): torch's fused `scaled_dot_product_attention`, or on the CPU for short sequences the
arithmetic written out with the mask added to the scores (cheaper there). Traced path: the arithmetic
written out so the scores, the mask and the weights can be recorded. Tests hold them equal.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from .positional import IN_ATTENTION, alibi_bias, alibi_slopes, rotate
from .packing import Packing
from .trace import AttentionTrace


# Up to this many (query, key) pairs per head, the CPU fast path writes attention out. Forward + backward,
# 64 x 4 heads of d_head 16, one thread's CPU time: 21 x 21 2.0 ms written out against SDPA's 2.8 ms (a
# default-model training step 1-3.5% cheaper in alternating runs); 32 x 32 about equal; 64 x 64 SDPA 17%
# cheaper, 128 x 128 1.5x.
WRITTEN_OUT_MAX = 32 * 32


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

    `mask` is boolean, True = may attend, broadcastable to (batch, heads, queries, keys), or untraced an
    `masks.additive_mask` that leaves no row fully masked (built once for every call of a pass); `bias` (ALiBi) is
    float, broadcastable likewise, and the trace records the scores with it added. A query row with every
    key masked yields weights of exactly 0 (never NaN) on every path.
    """
    if trace is None:
        if q.is_cpu and q.size(-2) * k.size(-2) <= WRITTEN_OUT_MAX:
            return _written_out(q, k, v, mask, dropout_p, bias)
        # torch >= 2.5 gives fully masked rows zero weight here too (its "safe softmax"), -inf masks included.
        if bias is not None and mask is not None and mask.dtype != torch.bool:
            mask = mask + bias
        elif bias is not None:
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


@functools.cache
def _floor(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The most negative `dtype` value as a 0-d tensor on `device`, made once (not a new tensor per call)."""
    return torch.tensor(torch.finfo(dtype).min, dtype=dtype, device=device)



def _written_out(q, k, v, mask, dropout_p, bias):
    """The untraced path for short sequences: the mask and bias as one additive term, masked keys at the most
    negative float rather than -inf (a row with every key masked softmaxes to finite weights, then zeroed), added
    to the scaled scores by the matmul itself (`baddbmm`)."""
    batch, heads, queries, d_head = q.shape
    additive = bias
    if mask is not None and mask.dtype != torch.bool:  # additive already, no row fully masked: nothing to check
        additive, mask = (mask if bias is None else mask + bias), None
    elif mask is not None:
        additive = torch.where(mask, 0.0 if bias is None else bias, _floor(q.dtype, q.device))
    q, k, v = (x.reshape(batch * heads, x.size(2), d_head) for x in (q, k, v))
    scale = 1 / math.sqrt(d_head)
    if additive is None:
        scores = torch.bmm(q, k.transpose(1, 2)).mul_(scale)
    else:  # (batch, heads, queries or 1, keys) -> (batch * heads, queries or 1, keys); one shared by all: (q, k)
        shared = additive.dim() == 4 and additive.size(0) == additive.size(1) == 1
        additive = additive[0, 0] if shared else additive.expand(batch, heads, *additive.shape[-2:]).flatten(0, 1)
        scores = torch.baddbmm(additive, q, k.transpose(1, 2), alpha=scale)
    weights = torch.softmax(scores, -1).view(batch, heads, queries, -1)
    if mask is not None:
        attends = mask.any(-1, keepdim=True)
        if not attends.all():
            weights = weights.masked_fill(~attends, 0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return torch.bmm(weights.flatten(0, 1), v).view(batch, heads, queries, d_head)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate query, key, value and output projections (self-attention's three,
    cross-attention's key and value, applied as one matmul of their concatenated weights).

    qk_norm: each head's queries and keys pass an RMSNorm (a learned scale per head dimension, shared by the
    heads) before attention, so both paths, and the trace's scores, see the normalised q and k.
    positional: "rope" rotates q and k (after qk-norm) by their absolute positions; "alibi" adds each head's
    bias -slope * |i - j| to the scores; anything else: no positions here. Both need the `positions` passed to
    `keys_values` and `forward`; None there (cross-attention, or positions switched off) means none."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, qk_norm: bool = False,
                 positional: str | None = None):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
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

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(batch, len, n * d_model) -> n contiguous tensors (batch, heads, len, d_head), from one copy."""
        batch, length, width = x.shape
        parts = width // (self.n_heads * self.d_head)
        return x.view(batch, length, parts, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4).contiguous().unbind(0)

    def _project(self, x: torch.Tensor, *linears: nn.Linear, packing: Packing | None = None
                 ) -> tuple[torch.Tensor, ...]:
        """`x` through `linears` in one matmul (their weights concatenated), split into heads. With a `packing`,
        `x` holds its real rows only (rows, d_model), put on the grid after the matmul."""
        if len(linears) == 1:
            y = linears[0](x)
        else:
            weight, bias = (torch.cat([getattr(linear, name) for linear in linears]) for name in ("weight", "bias"))
            y = F.linear(x, weight, bias)
        return self._split(y) if packing is None else packing.heads(y, self.n_heads, self.d_head)

    def _keys(self, k: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        k = k if self.k_norm is None else self.k_norm(k)
        return rotate(k, positions) if self.positional == "rope" and positions is not None else k

    def _queries(self, q: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        q = q if self.q_norm is None else self.q_norm(q)
        return rotate(q, positions) if self.positional == "rope" and positions is not None else q

    def keys_values(self, source: torch.Tensor, positions: torch.Tensor | None = None,
                    packing: Packing | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Project the attended-to sequence once: (batch, heads, keys, d_head) each (cacheable; keys normalised
        already under qk_norm, and under RoPE rotated by their (keys,) absolute `positions`)."""
        k, v = self._project(source, self.k_proj, self.v_proj, packing=packing)
        return self._keys(k, positions), v

    def queries(self, query: torch.Tensor, positions: torch.Tensor | None = None,
                packing: Packing | None = None) -> torch.Tensor:
        """(batch, heads, queries, d_head): projected, normalised under qk_norm, rotated under RoPE at `positions`."""
        return self._queries(*self._project(query, self.q_proj, packing=packing), positions)

    def project(self, x: torch.Tensor, positions: torch.Tensor | None = None, packing: Packing | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Self-attention's `queries(x)` and `keys_values(x)` from one matmul: (q, (k, v))."""
        q, k, v = self._project(x, self.q_proj, self.k_proj, self.v_proj, packing=packing)
        return self._queries(q, positions), (self._keys(k, positions), v)

    def forward(
        self,
        query: torch.Tensor,
        keys_values: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        trace: AttentionTrace | None = None,
        site: tuple[str, int] | None = None,
        positions: torch.Tensor | None = None,
        packing: Packing | None = None,
    ) -> torch.Tensor:
        """`positions`: the queries' (queries,) absolute positions; the keys (self-attention) sit at 0, 1, ...
        `packing`: the queries' (`query` holds their real rows only, and so does the output)."""
        q = self.queries(query, positions, packing)
        return self.attend_queries(q, keys_values, mask, trace, site, positions, packing)

    def attend_queries(
        self,
        q: torch.Tensor,
        keys_values: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        trace: AttentionTrace | None = None,
        site: tuple[str, int] | None = None,
        positions: torch.Tensor | None = None,
        packing: Packing | None = None,
    ) -> torch.Tensor:
        """`forward` from queries already projected (`queries` or `project`); with a `packing`, the output holds
        the queries' real rows only."""
        k, v = keys_values
        p = self.dropout if self.training else 0.0
        bias = None
        if positions is not None and self.positional == "alibi":
            bias = alibi_bias(self.slopes, positions, torch.arange(k.size(2), device=k.device)).to(q.dtype)
        out = attend(q, k, v, mask, p, trace, site, bias)
        if packing is not None:
            return self.out_proj(packing.rows(out))
        batch, heads, length, d_head = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, heads * d_head))
