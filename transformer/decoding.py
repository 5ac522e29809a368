"""Decoding: batched greedy (fast, for evaluation)."""

from __future__ import annotations

import torch

from .masks import BOS, EOS, PAD, padding_mask
from .model import DecoderCache, EncoderDecoder


@torch.no_grad()
def greedy_batch(model: EncoderDecoder, src: torch.Tensor, max_len: int) -> torch.Tensor:
    """Greedy outputs for a padded (batch, src_len) source batch, with a KV cache and no trace.

    Returns (batch, <= max_len) ids without <s>; rows end with </s> then <pad>, or are cut at max_len.
    """
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    cache = DecoderCache()
    token = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    out = []
    for _ in range(max_len):
        hidden = model.decode(memory, src_mask, token, cache=cache)
        token = model.generator.proj(hidden[:, -1]).argmax(-1, keepdim=True)  # argmax of logits == of log-probs
        token = token.masked_fill(done[:, None], PAD)
        out.append(token)
        done |= token[:, 0] == EOS
        if done.all():
            break
    return torch.cat(out, dim=1)
