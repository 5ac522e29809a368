"""Attention (the paper's section 3.2): scaled dot-product attention, and the multi-head module around it.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

written out as the paper writes it, so every number can be recorded in an `AttentionTrace`: the scores, the mask
that was applied and the weights. Training does not come through here: `transformer.training.fast_forward`
runs the same parameters through a faster kernel, and tests hold the two equal.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .positional import IN_ATTENTION, alibi_bias, alibi_slopes, rotate
from .trace import AttentionTrace


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float = 0.0,
    trace: AttentionTrace | None = None,
    site: tuple[str, int] | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k) + bias, masked) v for (batch, heads, len, d_k) tensors.

    `mask` is boolean, True = may attend, broadcastable to (batch, heads, queries, keys); `bias` (ALiBi) is
    added to the scores before the mask. A query row whose every key is masked gets weights of exactly 0 (never
    NaN). With a `trace`, the scores, the mask and the weights are recorded at `site` (kind, layer), and a
    detailed trace keeps q, k, v and each head's output.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if bias is not None:
        scores = scores + bias
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0.0)
    if trace is not None:
        trace.record(*site, scores, mask, weights)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    heads = weights @ v
    if trace is not None:
        trace.keep(site, q=q, k=k, v=v, heads=heads)
    return heads


# The checkpoint names of the query, key and value projections, the three row blocks of `in_proj_weight`.
PROJECTIONS = ("q_proj", "k_proj", "v_proj")


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The query, key and value projections are held as one (3 d_model, d_model) matrix, rows W^Q, W^K, W^V (as in
    `torch.nn.MultiheadAttention`), so self-attention's three take one matmul; checkpoints keep them as `q_proj`,
    `k_proj` and `v_proj` (state-dict hooks split and join them). Keys and values are projected apart from the
    queries (`keys_values`), so decoding can cache them.

    qk_norm: each head's queries and keys pass an RMSNorm (a learned scale per head dimension, shared by the
    heads) before their dot product. positional "rope" turns q and k (after qk-norm) by their absolute positions;
    "alibi" adds each head's bias -slope * |i - j| to the scores; anything else: no positions here. Both need
    `positions`; None (cross-attention, or positions switched off) means none."""

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
        self.q_norm = nn.RMSNorm(self.d_head) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.d_head) if qk_norm else None
        self.register_state_dict_post_hook(_split_projections)
        self.register_load_state_dict_pre_hook(_join_projections)

    def projection(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(weight, bias) of "q_proj", "k_proj" or "v_proj": views of their rows of the joint projection."""
        start = PROJECTIONS.index(name) * self.d_model
        return self.in_proj_weight[start : start + self.d_model], self.in_proj_bias[start : start + self.d_model]

    def split_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(batch, len, n * d_model) -> n contiguous tensors (batch, heads, len, d_head), from one copy."""
        batch, length, width = x.shape
        parts = width // self.d_model
        return x.view(batch, length, parts, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4).contiguous().unbind(0)

    def _project(self, x: torch.Tensor, rows: slice) -> tuple[torch.Tensor, ...]:
        """`x` through the joint projection's `rows` (queries, keys and / or values) in one matmul, split into heads."""
        return self.split_heads(F.linear(x, self.in_proj_weight[rows], self.in_proj_bias[rows]))

    def positioned_queries(self, q: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        """Projected queries as attention takes them: normalised under qk-norm, turned under RoPE at `positions`."""
        q = q if self.q_norm is None else self.q_norm(q)
        return rotate(q, positions) if self.positional == "rope" and positions is not None else q

    def positioned_keys(self, k: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        """Projected keys as attention takes them (see positioned_queries)."""
        k = k if self.k_norm is None else self.k_norm(k)
        return rotate(k, positions) if self.positional == "rope" and positions is not None else k

    def position_bias(self, positions: torch.Tensor | None, keys: int, dtype: torch.dtype) -> torch.Tensor | None:
        """ALiBi's (heads, queries, keys) bias for queries at `positions` and keys at 0 .. keys - 1; else None."""
        if positions is None or self.positional != "alibi":
            return None
        return alibi_bias(self.slopes, positions, torch.arange(keys, device=positions.device)).to(dtype)

    def keys_values(self, source: torch.Tensor, positions: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The attended-to sequence projected once: (batch, heads, keys, d_head) each (cacheable)."""
        k, v = self._project(source, slice(self.d_model, None))
        return self.positioned_keys(k, positions), v

    def queries(self, query: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, heads, queries, d_head)."""
        return self.positioned_queries(*self._project(query, slice(self.d_model)), positions)

    def project(self, x: torch.Tensor, positions: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Self-attention's `queries(x)` and `keys_values(x)` from one matmul: (q, (k, v))."""
        q, k, v = self._project(x, slice(None))
        return self.positioned_queries(q, positions), (self.positioned_keys(k, positions), v)

    def forward(
        self,
        query: torch.Tensor,
        keys_values: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        trace: AttentionTrace | None = None,
        site: tuple[str, int] | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(batch, queries, d_model) attending to `keys_values`; `positions`: the queries' (queries,) absolute
        positions (the keys of self-attention sit at 0, 1, ...)."""
        return self.attend(self.queries(query, positions), keys_values, mask, trace, site, positions)

    def attend(
        self,
        q: torch.Tensor,
        keys_values: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        trace: AttentionTrace | None = None,
        site: tuple[str, int] | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`forward` from queries already projected (`queries` or `project`): every head's attention, the heads
        concatenated, then W^O (a detailed trace keeps the concatenation and the output at `site`)."""
        k, v = keys_values
        bias = self.position_bias(positions, k.size(2), q.dtype)
        out = attention(q, k, v, mask, self.dropout if self.training else 0.0, trace, site, bias)
        batch, heads, length, d_head = out.shape
        concat = out.transpose(1, 2).reshape(batch, length, heads * d_head)
        output = self.out_proj(concat)
        if trace is not None:
            trace.keep(site, concat=concat, output=output)
        return output


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
