"""The training forward: the network's own modules and parameters, run on the real tokens only, through an
attention kernel faster than the network's written-out one.

`packed_logits` is what `Trainer.step` runs. It walks the model's layers and calls their residual connections,
norms, feed-forward networks, projections and generator, exactly as the network does, but
- each side of the batch runs on its real rows only (`packing.Packing`), unless it is mostly real tokens
  (`DENSE`), where it runs padded (`packing.Grid`);
- attention takes ready additive masks (built once per pass) and runs `fast_attention`: on the CPU, for short
  sequences, the arithmetic written out with the mask and the scale added inside one `baddbmm` (and short rows
  padded for the softmax: `row_softmax`); otherwise torch's fused `scaled_dot_product_attention`.

Its logits, loss and gradients equal the network's padded pass's to float rounding (tests/unit/test_fast_forward.py);
a default training step is ~12% cheaper than the padded pass (docs/MEASUREMENTS.md). Nothing is traced here:
every chart comes from the network's own forward (`transformer.network`).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from transformer.network.attention import MultiHeadAttention
from transformer.network.embeddings import Embedding, dropout_if_active
from transformer.network.layers import DecoderLayer, EncoderLayer
from transformer.network.masks import padding_mask, subsequent_mask
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import PAD

from .packing import Grid, Packing

# A side (sources or targets) whose real rows fill at least this much of its grid runs padded: there the gathers
# cost more than the rows they save (numbers' preset, 87% real in grids of 6-7: 5.6 ms a step packed against 5.2
# padded; addition's, 73-75%: 15.3 against 15.9; reverse's, 56%: 8.0 against 9.4; one thread, 2026-11-26).
DENSE = 0.85
# Up to this many (query, key) pairs per head, the CPU kernel writes attention out. Forward + backward,
# 64 x 4 heads of d_head 16, one thread's CPU time: 21 x 21 2.0 ms written out against SDPA's 2.8 ms (a
# default-model training step 1-3.5% cheaper in alternating runs); 32 x 32 about equal; 64 x 64 SDPA 17%
# cheaper, 128 x 128 1.5x.
WRITTEN_OUT_MAX = 32 * 32
# torch's CPU softmax over rows shorter than one of its vectors (16 floats under AVX-512, 8 under AVX2) runs them
# as a slow tail: forward and backward, (256, 8, 8) 522 µs against 153 padded to 16 under AVX-512, (256, 5, 5) 227
# against 98 padded to 8 under AVX2 (one thread, an Intel Xeon family 6 model 167, 2026-11-30). `addition`'s step
# (rows of 5 and 8 keys) 0.93-0.95x under AVX-512, ~1x under AVX2; tasks with rows of 16 keys or more: unchanged.
# Other kernels (ARM's): no padding.
SOFTMAX_WIDTH = {"AVX512": 16, "AVX2": 8}.get(torch.backends.cpu.get_cpu_capability(), 1)

Layout = Packing | Grid


def packed_logits(model: EncoderDecoder, src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, vocab) logits (before the log-softmax) for every non-pad target of `tgt`[:, 1:], and those targets.

    The encoder keeps the real source tokens. The decoder keeps the positions whose next token is scored: targets
    are right-padded, so those are a prefix of each row, and under the causal mask they attend only to each other.
    """
    targets = tgt[:, 1:]
    scored = Packing.of(targets != PAD)
    sources, decoder = _layout(src != PAD), _layout(targets != PAD)
    src_mask = additive_mask(padding_mask(src))  # every source holds </s> at least: no row fully masked
    tgt_mask = additive_mask(subsequent_mask(targets.size(1), device=tgt.device))

    x = _embed(model.src_embed, src, sources)
    positions = model.attention_positions(0, src.size(1), src.device)
    for layer in model.encoder.layers:
        x = _encoder_layer(layer, x, sources, src_mask, positions)
    memory = model.encoder.norm(x)

    x = _embed(model.tgt_embed, tgt[:, :-1], decoder)
    positions = model.attention_positions(0, targets.size(1), tgt.device)
    for layer in model.decoder.layers:
        x = _decoder_layer(layer, x, decoder, tgt_mask, positions, memory, sources, src_mask)
    hidden = model.decoder.norm(x)
    if isinstance(decoder, Grid):
        hidden = scored.pack(hidden)
    return model.generator.proj(hidden), scored.pack(targets)


def additive_mask(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A boolean mask (True = may attend) as the term the kernel adds to the scores: 0 where a key may be
    attended, the most negative `dtype` value where not. For masks with no row fully masked."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)


def fast_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                   dropout_p: float = 0.0, bias: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + bias + mask) v for (batch, heads, len, d_head) tensors, `mask` additive
    (`additive_mask`, no row fully masked): what `network.attention.attention` computes, untraced."""
    additive = mask if bias is None else bias if mask is None else mask + bias
    if not (q.is_cpu and q.size(-2) * k.size(-2) <= WRITTEN_OUT_MAX):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=additive, dropout_p=dropout_p)
    batch, heads, queries, d_head = q.shape
    q, k, v = (x.reshape(batch * heads, x.size(2), d_head) for x in (q, k, v))
    scale = 1 / math.sqrt(d_head)
    if additive is None:
        scores = torch.bmm(q, k.transpose(1, 2)).mul_(scale)
    else:  # (batch, heads, queries or 1, keys) -> (batch * heads, queries or 1, keys); one shared by all: (q, k)
        shared = additive.dim() == 4 and additive.size(0) == additive.size(1) == 1
        additive = additive[0, 0] if shared else additive.expand(batch, heads, *additive.shape[-2:]).flatten(0, 1)
        scores = torch.baddbmm(additive, q, k.transpose(1, 2), alpha=scale)
    weights = row_softmax(scores)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return torch.bmm(weights, v).view(batch, heads, queries, d_head)


def row_softmax(scores: torch.Tensor) -> torch.Tensor:
    """torch.softmax over the last dimension; a row shorter than SOFTMAX_WIDTH padded with keys of -inf (weight
    0, gradient 0) up to it, and cut back after."""
    keys = scores.size(-1)
    if keys >= SOFTMAX_WIDTH:
        return torch.softmax(scores, -1)
    return torch.softmax(F.pad(scores, (0, SOFTMAX_WIDTH - keys), value=float("-inf")), -1)[..., :keys]


def _layout(real: torch.Tensor) -> Layout:
    """A (batch, length) side as its real rows, or whole where they fill DENSE of it."""
    packing = Packing.of(real)
    return packing if packing.index.numel() < DENSE * real.numel() else Grid(*real.shape)


def _embed(embedding: Embedding, ids: torch.Tensor, rows: Layout) -> torch.Tensor:
    """Embedding.forward on the rows of `rows` only."""
    tokens = embedding.tokens(rows.pack(ids)) * embedding.scale
    return dropout_if_active(embedding.dropout, tokens + rows.place(embedding.positions(ids.size(1))))


def _attend(attention: MultiHeadAttention, x: torch.Tensor, rows: Layout, mask: torch.Tensor,
            positions: torch.Tensor | None = None, memory: torch.Tensor | None = None,
            memory_rows: Layout | None = None) -> torch.Tensor:
    """MultiHeadAttention.forward on `rows`: self-attention, or with a `memory` cross-attention over it."""
    heads, d_head, d = attention.n_heads, attention.d_head, attention.d_model
    weight, bias = attention.in_proj_weight, attention.in_proj_bias
    if memory is None:
        q, k, v = rows.heads(F.linear(x, weight, bias), heads, d_head)
    else:
        (q,) = rows.heads(F.linear(x, weight[:d], bias[:d]), heads, d_head)
        k, v = memory_rows.heads(F.linear(memory, weight[d:], bias[d:]), heads, d_head)
    q, k = attention.positioned_queries(q, positions), attention.positioned_keys(k, positions)
    out = fast_attention(q, k, v, mask, attention.dropout if attention.training else 0.0,
                         attention.position_bias(positions, k.size(2), q.dtype))
    return attention.out_proj(rows.rows(out))


def _encoder_layer(layer: EncoderLayer, x: torch.Tensor, rows: Layout, mask: torch.Tensor,
                   positions: torch.Tensor | None) -> torch.Tensor:
    """EncoderLayer.forward on `rows`."""
    x = layer.residuals[0](x, functools.partial(_attend, layer.self_attn, rows=rows, mask=mask, positions=positions))
    return layer.residuals[1](x, layer.feed_forward)


def _decoder_layer(layer: DecoderLayer, x: torch.Tensor, rows: Layout, tgt_mask: torch.Tensor,
                   positions: torch.Tensor | None, memory: torch.Tensor, memory_rows: Layout,
                   src_mask: torch.Tensor) -> torch.Tensor:
    """DecoderLayer.forward on `rows`, attending to `memory` on `memory_rows`."""
    x = layer.residuals[0](x, functools.partial(_attend, layer.self_attn, rows=rows, mask=tgt_mask,
                                                positions=positions))
    x = layer.residuals[1](x, functools.partial(_attend, layer.cross_attn, rows=rows, mask=src_mask,
                                                memory=memory, memory_rows=memory_rows))
    return layer.residuals[2](x, layer.feed_forward)
