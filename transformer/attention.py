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

    `mask` is boolean, True = may attend, broadcastable to (batch, heads, queries, keys), or (untraced only) a
    `masks.additive_mask` with no row fully masked, built once for every call of a pass; `bias` (ALiBi) is
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


# The checkpoint names of the query, key and value projections, the three row blocks of `in_proj_weight`.
PROJECTIONS = ("q_proj", "k_proj", "v_proj")


class MultiHeadAttention(nn.Module):
    """Multi-head attention: query, key and value projections held as one (3 * d_model, d_model) matrix (rows:
    queries, keys, values), so self-attention's three take one matmul and cross-attention's key and value one
    more, with no per-call concatenation; an output projection. Checkpoints keep the three as `q_proj`, `k_proj`
    and `v_proj` (state-dict hooks split and join them).

    qk_norm: each head's queries and keys pass an RMSNorm (a learned scale per head dimension, shared by the
    heads) before attention, so both paths, and the trace's scores, see the normalised q and k.
    positional: "rope" rotates q and k (after qk-norm) by their absolute positions; "alibi" adds each head's
    bias -slope * |i - j| to the scores; anything else: no positions here. Both need the `positions` passed to
    `keys_values` and `forward`; None there (cross-attention, or positions switched off) means none."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, qk_norm: bool = False,
                 positional: str | None = None):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.positional = positional if positional in IN_ATTENTION else None
        if self.positional == "alibi":  # derived from n_heads, so not saved: old checkpoints load unchanged
            self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)
        self.dropout = dropout
        # Three nn.Linear's own initialisation, in order: the same random draws as three separate projections
        projections = [nn.Linear(d_model, d_model) for _ in PROJECTIONS]
        self.in_proj_weight = nn.Parameter(torch.cat([linear.weight.detach() for linear in projections]))
        self.in_proj_bias = nn.Parameter(torch.cat([linear.bias.detach() for linear in projections]))
        self.out_proj = nn.Linear(d_model, d_model)
        self.q_norm = nn.RMSNorm(d_model // n_heads) if qk_norm else None
        self.k_norm = nn.RMSNorm(d_model // n_heads) if qk_norm else None
        self.register_state_dict_post_hook(_split_projections)
        self.register_load_state_dict_pre_hook(_join_projections)

    def projection(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(weight, bias) of "q_proj", "k_proj" or "v_proj": views of their rows of the joint projection."""
        start = PROJECTIONS.index(name) * self.d_model
        return self.in_proj_weight[start : start + self.d_model], self.in_proj_bias[start : start + self.d_model]

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(batch, len, n * d_model) -> n contiguous tensors (batch, heads, len, d_head), from one copy."""
        batch, length, width = x.shape
        parts = width // (self.n_heads * self.d_head)
        return x.view(batch, length, parts, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4).contiguous().unbind(0)

    def _project(self, x: torch.Tensor, rows: slice, packing: Packing | None = None) -> tuple[torch.Tensor, ...]:
        """`x` through the joint projection's `rows` (queries, keys and / or values) in one matmul, split into
        heads. With a `packing`, `x` holds its real rows only (rows, d_model), put on the grid after the matmul."""
        y = F.linear(x, self.in_proj_weight[rows], self.in_proj_bias[rows])
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
        k, v = self._project(source, slice(self.d_model, None), packing)
        return self._keys(k, positions), v

    def queries(self, query: torch.Tensor, positions: torch.Tensor | None = None,
                packing: Packing | None = None) -> torch.Tensor:
        """(batch, heads, queries, d_head): projected, normalised under qk_norm, rotated under RoPE at `positions`."""
        return self._queries(*self._project(query, slice(self.d_model), packing), positions)

    def project(self, x: torch.Tensor, positions: torch.Tensor | None = None, packing: Packing | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Self-attention's `queries(x)` and `keys_values(x)` from one matmul: (q, (k, v))."""
        q, k, v = self._project(x, slice(None), packing)
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


def joint_projections(module: nn.Module) -> list[nn.Parameter]:
    """The joint q/k/v projection (`in_proj_weight`) of every MultiHeadAttention in `module`: Xavier's
    initialisation and Muon treat each as its three blocks."""
    return [m.in_proj_weight for m in module.modules() if isinstance(m, MultiHeadAttention)]


def _split_projections(module: MultiHeadAttention, state: dict, prefix: str, metadata) -> None:
    """State-dict hook: the joint projection saved as its three parts, as checkpoints have always held them."""
    weight, bias = state.pop(prefix + "in_proj_weight"), state.pop(prefix + "in_proj_bias")
    for name, w, b in zip(PROJECTIONS, weight.chunk(len(PROJECTIONS)), bias.chunk(len(PROJECTIONS))):
        state[f"{prefix}{name}.weight"], state[f"{prefix}{name}.bias"] = w.clone(), b.clone()  # no shared storage


def _join_projections(module: MultiHeadAttention, state: dict, prefix: str, *args) -> None:
    """Load-state-dict pre-hook: a checkpoint's three projections joined into the one the module holds (a
    checkpoint missing one is left alone, for strict loading to report)."""
    keys = [f"{prefix}{name}.{kind}" for kind in ("weight", "bias") for name in PROJECTIONS]
    if all(key in state for key in keys):
        parts = [state.pop(key) for key in keys]
        state[prefix + "in_proj_weight"] = torch.cat(parts[:3])
        state[prefix + "in_proj_bias"] = torch.cat(parts[3:])
