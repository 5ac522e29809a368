"""Attention masks, in one convention: boolean, True = may attend.

Source padding mask: (batch, 1, 1, src_len), broadcast over heads and queries.
Target mask: padding AND subsequent, (batch, 1, tgt_len, tgt_len).
"""

from __future__ import annotations

import torch

from .special_tokens import PAD


def padding_mask(ids: torch.Tensor, pad: int = PAD) -> torch.Tensor:
    """(batch, len) token ids -> (batch, 1, 1, len): True where the key is a real token."""
    return (ids != pad)[:, None, None, :]


def subsequent_mask(size: int, offset: int = 0, device=None) -> torch.Tensor:
    """(1, 1, size, offset + size): query i (at absolute position offset + i) sees keys 0..offset + i."""
    queries = torch.arange(offset, offset + size, device=device)[:, None]
    keys = torch.arange(offset + size, device=device)[None, :]
    return (keys <= queries)[None, None]


def target_mask(ids: torch.Tensor, pad: int = PAD) -> torch.Tensor:
    """(batch, len) target ids -> (batch, 1, len, len): padding AND subsequent."""
    return padding_mask(ids, pad) & subsequent_mask(ids.size(1), device=ids.device)
