"""The encoder-decoder Transformer of "Attention Is All You Need", after the Annotated Transformer.

Pre-norm residual sublayers by default (post-norm, the paper's, as an option), multi-head attention,
position-wise feed-forward, embeddings scaled by sqrt(d_model), log-softmax generator. Positions: sinusoidal
(default) or learned added to the embeddings, none, or RoPE / ALiBi in self-attention only (encoder and
decoder; cross-attention relates two different sequences, so its queries and keys get no positions there).
Attention is reported through an optional `AttentionTrace`; modules never keep per-call state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from .attention import MultiHeadAttention, joint_projections
from .config import ModelConfig
from .embeddings import Embedding
from .layers import DecoderLayer, EncoderLayer, LayerCache
from .masks import subsequent_mask
from .positional import IN_ATTENTION
from .trace import AttentionTrace

# init="identity": the token embeddings start at this fraction of Xavier's scale. With the zeroed residual
# outputs, reverse 10-19 reached 99% held-out exact match on 5,400-6,000 training strings instead of 24,000
# (benchmarks/train_reverse.py); 0.1-0.35 did about as well, 0.7 or more much worse.
IDENTITY_EMBED_SCALE = 0.25


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


class Stack(nn.Module):
    """N identical layers, then a final LayerNorm for pre-norm (post-norm layers end normalised)."""

    def __init__(self, layers: list[nn.Module], config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()


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

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor, trace: AttentionTrace | None = None,
               positions: bool = True) -> torch.Tensor:
        """(batch, src_len) ids and (batch, 1, 1, src_len) mask -> memory (batch, src_len, d_model)."""
        x = self.src_embed(src, positions=positions, trace=trace, side="src")
        where = self.attention_positions(0, src.size(1), src.device) if positions else None
        for layer in self.encoder.layers:
            x = layer(x, src_mask, trace, where)
        memory = self.encoder.norm(x)
        if trace is not None:
            trace.keep(("encoder",), memory=memory)
        return memory

    def decode(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        trace: AttentionTrace | None = None,
        cache: DecoderCache | None = None,
        positions: bool = True,
    ) -> torch.Tensor:
        """Decoder hidden states for `tgt` (batch, n). With a cache, `tgt` holds only the new tokens and
        the cache supplies the earlier ones. `tgt_mask` defaults to the causal mask; pass your own
        (batch, 1, n, cached + n) to add padding or to remove causality for a demonstration."""
        offset = cache.length if cache is not None else 0
        if tgt_mask is None:
            tgt_mask = subsequent_mask(tgt.size(1), offset, device=tgt.device)
        if cache is not None and not cache.layers:
            cache.layers = [LayerCache() for _ in self.decoder.layers]
        x = self.tgt_embed(tgt, offset, positions, trace, side="tgt")
        where = self.attention_positions(offset, tgt.size(1), tgt.device) if positions else None
        for i, layer in enumerate(self.decoder.layers):
            x = layer(x, memory, src_mask, tgt_mask, trace, cache.layers[i] if cache is not None else None, where)
        hidden = self.decoder.norm(x)
        if trace is not None:
            trace.keep(("decoder",), hidden=hidden)
        return hidden

    def attention_positions(self, offset: int, length: int, device) -> torch.Tensor | None:
        """The (length,) absolute positions self-attention turns (RoPE) or biases (ALiBi) by; None for the schemes
        that add positions to the embeddings instead."""
        if self.config.positional not in IN_ATTENTION:
            return None
        return torch.arange(offset, offset + length, device=device)

    def forward(self, src, tgt, src_mask, tgt_mask, trace: AttentionTrace | None = None):
        """Teacher-forced log-probabilities (batch, tgt_len, tgt_vocab)."""
        memory = self.encode(src, src_mask, trace)
        return self.generator(self.decode(memory, src_mask, tgt, tgt_mask, trace))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
