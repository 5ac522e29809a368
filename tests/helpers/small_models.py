"""A small `reverse` model and a held-out batch for the network's own tests (qk-norm, RoPE and ALiBi)."""

from __future__ import annotations

import torch

from transformer.network.config import ModelConfig
from transformer.network.model import EncoderDecoder
from transformer.tasks import encode_pairs, make_task

TASK = make_task("reverse", min_len=2, max_len=6)
TOKENIZER = TASK.make_tokenizer()


def small_model(seed: int = 0, **config) -> EncoderDecoder:
    """Two encoder and two decoder layers over TOKENIZER's vocabulary with `config`'s settings, initialised from
    `seed`, in eval mode; a qk-norm's scales are random (ones would hide a missing scale, or a norm applied after
    the rotation)."""
    torch.manual_seed(seed)
    model = EncoderDecoder(ModelConfig(TOKENIZER.vocab_size, TOKENIZER.vocab_size, 2, 2, **config)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.uniform_(0.5, 3.0)
    return model


def heldout_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Six held-out pairs as (sources, targets) id tensors."""
    return encode_pairs(TOKENIZER, TASK.pairs(6, seed=3, split="heldout"))
