"""The layers (the paper's section 3.1 and 3.3): a residual connection around each sublayer, the position-wise
feed-forward network, and the encoder and decoder layers built from them.

An encoder layer: self-attention, then feed-forward. A decoder layer: masked self-attention, then attention over
the encoder's output (cross-attention), then feed-forward. Each sublayer sits in a residual connection with
layer normalisation: before the sublayer (pre-norm, the default) or after the sum (post-norm, the paper's).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .attention import MultiHeadAttention
from .config import ModelConfig
from .embeddings import dropout_if_active
from .trace import AttentionTrace


class Residual(nn.Module):
    """x + dropout(f(norm(x))) (pre-norm) or norm(x + dropout(f(x))) (post-norm)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.pre_norm = config.norm == "pre"
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, sublayer, trace: AttentionTrace | None = None,
                site: tuple = ()) -> torch.Tensor:
        """A detailed trace keeps x, the sublayer's input and output, and the result at `site`."""
        inner = self.norm(x) if self.pre_norm else x
        change = dropout_if_active(self.dropout, sublayer(inner))
        out = x + change if self.pre_norm else self.norm(x + change)
        if trace is not None:
            trace.keep(site, x=x, sublayer_in=inner, sublayer_out=change, out=out)
        return out


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position alike (dropout after the ReLU)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.d_ff, config.d_model),
        )

    def forward(self, x: torch.Tensor, trace: AttentionTrace | None = None, site: tuple = ()) -> torch.Tensor:
        """A detailed trace keeps the hidden layer (after the ReLU) at `site`."""
        inner, _, dropout, outer = self.net  # the Sequential's own order, called directly (less overhead)
        hidden = torch.relu_(inner(x))
        if trace is not None:
            trace.keep(site, hidden=hidden)
        return outer(dropout_if_active(dropout, hidden))


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward, each in a residual connection."""

    def __init__(self, config: ModelConfig, index: int):
        super().__init__()
        self.index = index
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, config.qk_norm,
                                            config.positional)
        self.feed_forward = FeedForward(config)
        self.residuals = nn.ModuleList([Residual(config), Residual(config)])

    def forward(self, x: torch.Tensor, mask: torch.Tensor, trace: AttentionTrace | None = None,
                positions: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, len, d_model) -> the same; `positions`: (len,) absolute positions for RoPE / ALiBi."""
        def self_attention(y):
            q, kv = self.self_attn.project(y, positions)
            return self.self_attn.attend(q, kv, mask, trace, ("encoder_self", self.index), positions)

        def feed_forward(y):
            return self.feed_forward(y, trace, ("encoder", self.index, "feed_forward"))

        x = self.residuals[0](x, self_attention, trace, ("encoder", self.index, "self_attn"))
        return self.residuals[1](x, feed_forward, trace, ("encoder", self.index, "feed_forward"))


@dataclass
class LayerCache:
    """One decoder layer's keys/values kept between decoding steps, each (batch, heads, len, d_head)."""

    self_kv: tuple[torch.Tensor, torch.Tensor] | None = None
    cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None


class DecoderLayer(nn.Module):
    """Masked self-attention, then cross-attention over the encoder's output (`memory`), then feed-forward."""

    def __init__(self, config: ModelConfig, index: int):
        super().__init__()
        self.index = index
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, config.qk_norm,
                                            config.positional)
        self.cross_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, config.qk_norm)
        self.feed_forward = FeedForward(config)
        self.residuals = nn.ModuleList([Residual(config) for _ in range(3)])

    def forward(self, x, memory, src_mask, tgt_mask, trace: AttentionTrace | None = None,
                cache: LayerCache | None = None, positions: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, len, d_model) -> the same. `positions`: the new tokens' (len,) absolute positions for RoPE /
        ALiBi. With a `cache`, `x` holds only the new tokens: the cache supplies the earlier ones' keys and
        values (already turned at their positions) and keeps the new ones'."""
        def self_attention(y):
            q, (k, v) = self.self_attn.project(y, positions)
            if cache is not None:
                if cache.self_kv is not None:
                    k = torch.cat([cache.self_kv[0], k], dim=2)
                    v = torch.cat([cache.self_kv[1], v], dim=2)
                cache.self_kv = (k, v)
            return self.self_attn.attend(q, (k, v), tgt_mask, trace, ("decoder_self", self.index), positions)

        def cross_attention(y):
            if cache is None:
                kv = self.cross_attn.keys_values(memory)
            else:
                if cache.cross_kv is None:
                    cache.cross_kv = self.cross_attn.keys_values(memory)
                kv = cache.cross_kv
            return self.cross_attn(y, kv, src_mask, trace, ("cross", self.index))

        def feed_forward(y):
            return self.feed_forward(y, trace, ("decoder", self.index, "feed_forward"))

        x = self.residuals[0](x, self_attention, trace, ("decoder", self.index, "self_attn"))
        x = self.residuals[1](x, cross_attention, trace, ("decoder", self.index, "cross_attn"))
        return self.residuals[2](x, feed_forward, trace, ("decoder", self.index, "feed_forward"))
