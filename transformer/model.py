"""The encoder-decoder Transformer of "Attention Is All You Need", after the Annotated Transformer.

Pre-norm residual sublayers by default (post-norm, the paper's, as an option), multi-head attention,
position-wise feed-forward, embeddings scaled by sqrt(d_model), log-softmax generator. Positions: sinusoidal
(default) or learned added to the embeddings, none, or RoPE / ALiBi in self-attention only (encoder and
decoder; cross-attention relates two different sequences, so its queries and keys get no positions there).
Attention is reported through an optional `AttentionTrace`; modules never keep per-call state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from .attention import MultiHeadAttention, joint_projections
from .config import ModelConfig
from .masks import subsequent_mask
from .packing import Packing
from .positional import IN_ATTENTION, PositionalEncoding
from .trace import AttentionTrace

# init="identity": the token embeddings start at this fraction of Xavier's scale. With the zeroed residual
# outputs, reverse 10-19 reached 99% held-out exact match on 5,400-6,000 training strings instead of 24,000
# (benchmarks/train_reverse.py); 0.1-0.35 did about as well, 0.7 or more much worse.
IDENTITY_EMBED_SCALE = 0.25


def _dropout(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """`dropout(x)`, skipped where it is the identity (p = 0 or eval mode): one call less per sublayer."""
    return dropout(x) if dropout.training and dropout.p > 0 else x


class Residual(nn.Module):
    """x + dropout(f(norm(x))) (pre-norm) or norm(x + dropout(f(x))) (post-norm)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.pre_norm = config.norm == "pre"
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre_norm:
            return x + _dropout(self.dropout, sublayer(self.norm(x)))
        return self.norm(x + _dropout(self.dropout, sublayer(x)))


class FeedForward(nn.Module):
    """Position-wise w2(dropout(relu(w1 x)))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.d_ff, config.d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner, _, dropout, outer = self.net  # the Sequential's own order, called directly (less overhead)
        return outer(_dropout(dropout, torch.relu_(inner(x))))


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, index: int):
        super().__init__()
        self.index = index
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, config.qk_norm,
                                            config.positional)
        self.feed_forward = FeedForward(config)
        self.residuals = nn.ModuleList([Residual(config), Residual(config)])

    def forward(self, x, mask, trace=None, positions=None, packing: Packing | None = None):
        """`positions`: (len,) absolute positions for RoPE / ALiBi (None: none); `packing`: `x` holds its real
        rows only."""
        site = ("encoder_self", self.index)
        attention = self.self_attn
        x = self.residuals[0](x, lambda y: attention.attend_queries(*attention.project(y, positions, packing), mask,
                                                                    trace, site, positions, packing))
        return self.residuals[1](x, self.feed_forward)


@dataclass
class LayerCache:
    """One decoder layer's keys/values kept between decoding steps, each (batch, heads, len, d_head)."""

    self_kv: tuple[torch.Tensor, torch.Tensor] | None = None
    cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass
class DecoderCache:
    """Per-layer caches for incremental decoding; `length` target positions are already processed."""

    layers: list[LayerCache] = field(default_factory=list)

    @property
    def length(self) -> int:
        first = self.layers[0].self_kv if self.layers else None
        return 0 if first is None else first[0].size(2)

    def select(self, batch_index: torch.Tensor) -> "DecoderCache":
        """A cache for the rows `batch_index` (beam search reorders hypotheses with this)."""

        def pick(kv):
            return None if kv is None else (kv[0].index_select(0, batch_index), kv[1].index_select(0, batch_index))

        return DecoderCache([LayerCache(pick(c.self_kv), pick(c.cross_kv)) for c in self.layers])


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, index: int):
        super().__init__()
        self.index = index
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, config.qk_norm,
                                            config.positional)
        self.cross_attn = MultiHeadAttention(config.d_model, config.n_heads, config.dropout, config.qk_norm)
        self.feed_forward = FeedForward(config)
        self.residuals = nn.ModuleList([Residual(config) for _ in range(3)])

    def forward(self, x, memory, src_mask, tgt_mask, trace=None, cache: LayerCache | None = None, positions=None,
                packing: Packing | None = None, memory_packing: Packing | None = None):
        """`positions`: the new tokens' (len,) absolute positions for RoPE / ALiBi (None: none); the cache holds
        keys already rotated at theirs. `packing` / `memory_packing`: `x` / `memory` hold their real rows only."""
        def self_attention(y):
            q, (k, v) = self.self_attn.project(y, positions, packing)
            if cache is not None:
                if cache.self_kv is not None:
                    k = torch.cat([cache.self_kv[0], k], dim=2)
                    v = torch.cat([cache.self_kv[1], v], dim=2)
                cache.self_kv = (k, v)
            return self.self_attn.attend_queries(q, (k, v), tgt_mask, trace, ("decoder_self", self.index), positions,
                                                 packing)

        def cross_attention(y):
            if cache is None:
                kv = self.cross_attn.keys_values(memory, packing=memory_packing)
            else:
                if cache.cross_kv is None:
                    cache.cross_kv = self.cross_attn.keys_values(memory)
                kv = cache.cross_kv
            return self.cross_attn(y, kv, src_mask, trace, ("cross", self.index), packing=packing)

        x = self.residuals[0](x, self_attention)
        x = self.residuals[1](x, cross_attention)
        return self.residuals[2](x, self.feed_forward)


class Stack(nn.Module):
    """N identical layers, then a final LayerNorm for pre-norm (post-norm layers end normalised)."""

    def __init__(self, layers: list[nn.Module], config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()


class Embedding(nn.Module):
    """Token embedding times sqrt(d_model), plus the positional term, then dropout."""

    def __init__(self, vocab: int, config: ModelConfig):
        super().__init__()
        self.scale = math.sqrt(config.d_model)
        self.tokens = nn.Embedding(vocab, config.d_model)
        self.positions = PositionalEncoding(config.positional, config.max_len, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids, offset=0, positions=True, trace=None, side="src", packing: Packing | None = None):
        """(batch, len, d_model), or with a `packing` its real rows only (rows, d_model)."""
        pos = self.positions(ids.size(1), offset)
        if packing is not None:
            ids, pos = packing.pack(ids), pos[0].index_select(0, packing.positions)
        tokens = self.tokens(ids) * self.scale
        if not positions:
            pos = torch.zeros_like(pos)
        if trace is not None:
            trace.record_embedding(side, tokens, pos)
        return _dropout(self.dropout, tokens + pos)


class Generator(nn.Module):
    """Linear projection to the target vocabulary, then log-softmax."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.proj = nn.Linear(config.d_model, config.tgt_vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.proj(x), dim=-1)


class EncoderDecoder(nn.Module):
    """encode(src) -> memory; decode(memory, tgt prefix) -> hidden states; generator -> log-probs."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self._positions_in_attention = config.positional in IN_ATTENTION  # else the layers ignore positions
        self.src_embed = Embedding(config.src_vocab, config)
        self.tgt_embed = Embedding(config.tgt_vocab, config)
        self.encoder = Stack([EncoderLayer(config, i) for i in range(config.n_enc_layers)], config)
        self.decoder = Stack([DecoderLayer(config, i) for i in range(config.n_dec_layers)], config)
        self.generator = Generator(config)
        joint = {id(p) for p in joint_projections(self)}
        for p in self.parameters():
            if p.dim() > 1:  # Xavier on each matrix: the joint q/k/v projection's three blocks one by one
                for block in p.split(config.d_model) if id(p) in joint else (p,):
                    nn.init.xavier_uniform_(block)
        if config.init == "identity":
            self._identity_init()

    @torch.no_grad()
    def _identity_init(self) -> None:
        """Each layer starts as the identity map but for its output biases (the output weights of every attention
        and feed-forward branch are zero, so x + f(x) = x + bias) and the token embeddings small: the first
        steps train the embeddings and the output weights, and the layers' inner weights once those are no
        longer zero."""
        for embed in (self.src_embed, self.tgt_embed):
            embed.tokens.weight.mul_(IDENTITY_EMBED_SCALE)
        for layer in (*self.encoder.layers, *self.decoder.layers):
            for branch in layer.modules():
                if isinstance(branch, MultiHeadAttention):
                    branch.out_proj.weight.zero_()
            layer.feed_forward.net[-1].weight.zero_()

    def encode(self, src, src_mask, trace: AttentionTrace | None = None, positions: bool = True,
               packing: Packing | None = None):
        """(batch, src_len) ids and (batch, 1, 1, src_len) mask -> memory (batch, src_len, d_model), or with a
        `packing` its real rows only (rows, d_model)."""
        x = self.src_embed(src, positions=positions, trace=trace, side="src", packing=packing)
        where = torch.arange(src.size(1), device=src.device) if positions and self._positions_in_attention else None
        for layer in self.encoder.layers:
            x = layer(x, src_mask, trace, where, packing)
        return self.encoder.norm(x)

    def decode(
        self,
        memory,
        src_mask,
        tgt,
        tgt_mask=None,
        trace: AttentionTrace | None = None,
        cache: DecoderCache | None = None,
        positions: bool = True,
        packing: Packing | None = None,
        memory_packing: Packing | None = None,
    ):
        """Decoder hidden states for `tgt` (batch, n). With a cache, `tgt` holds only the new tokens and
        the cache supplies the earlier ones. `tgt_mask` defaults to the causal mask; pass your own
        (batch, 1, n, cached + n) to add padding or to remove causality for a demonstration. With a `packing`,
        the hidden states of its real rows only (rows, d_model), from a `memory` packed by `memory_packing`."""
        offset = cache.length if cache is not None else 0
        if tgt_mask is None:
            tgt_mask = subsequent_mask(tgt.size(1), offset, device=tgt.device)
        if cache is not None and not cache.layers:
            cache.layers = [LayerCache() for _ in self.decoder.layers]
        x = self.tgt_embed(tgt, offset, positions, trace, side="tgt", packing=packing)
        where = (torch.arange(offset, offset + tgt.size(1), device=tgt.device)
                 if positions and self._positions_in_attention else None)
        for i, layer in enumerate(self.decoder.layers):
            x = layer(x, memory, src_mask, tgt_mask, trace, cache.layers[i] if cache is not None else None, where,
                      packing, memory_packing)
        return self.decoder.norm(x)

    def forward(self, src, tgt, src_mask, tgt_mask, trace: AttentionTrace | None = None):
        """Teacher-forced log-probabilities (batch, tgt_len, tgt_vocab)."""
        memory = self.encode(src, src_mask, trace)
        return self.generator(self.decode(memory, src_mask, tgt, tgt_mask, trace))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
