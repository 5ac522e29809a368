"""A padded batch traced through the model with its masks, as in training (teacher forcing): what the
Masks page shows. No streamlit here; pages call these and hand the arrays to chart builders.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from transformer.i18n import t
from transformer.network.budget import decode_estimate, evaluation_estimate
from transformer.network.decoding import greedy_batch
from transformer.network.masks import padding_mask, target_mask
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import PAD
from transformer.tasks import encode_pairs
from transformer.network.tokenizers import Tokenizer
from transformer.network.trace import AttentionTrace
from .batch_size import MAX_BATCH, MIN_BATCH


class BatchError(ValueError):
    """The inputs cannot form a batch for this model; the message says why."""


@dataclass(frozen=True)
class MaskedBatch:
    """One padded batch through a real traced forward pass, as in training (teacher forcing).

    The decoder reads each target row without its last column (`tgt_in`); position t should predict
    `tgt_out[:, t]` (<pad> where nothing is scored). The masks are the ones passed to the model; the trace
    holds them again, broadcast to (batch, heads, queries, keys), for every kind and layer.
    """

    sources: list[str]
    targets: list[str]
    src: torch.Tensor  # (B, S): tokens </s> <pad>...
    tgt_in: torch.Tensor  # (B, T): <s> tokens [</s>] <pad>...
    tgt_out: torch.Tensor  # (B, T): tokens </s> <pad>...
    src_pieces: list[list[str]]
    tgt_pieces: list[list[str]]
    src_mask: torch.Tensor  # (B, 1, 1, S)
    tgt_mask: torch.Tensor  # (B, 1, T, T) causal, or (B, 1, 1, T) padding only
    causal: bool
    trace: AttentionTrace
    log_probs: torch.Tensor  # (B, T, tgt_vocab)

    @property
    def predictions(self) -> torch.Tensor:
        """(B, T): the argmax next token at every decoder position."""
        return self.log_probs.argmax(-1)

    @property
    def scored(self) -> torch.Tensor:
        """(B, T) bool: positions whose prediction training scores (the expected token is not <pad>)."""
        return self.tgt_out != PAD


def varied_lengths(examples: list[str], n: int = 3) -> list[str]:
    """Up to `n` examples of clearly different lengths (the shortest, the longest, and ones between): a batch
    of them shows its padding."""
    ordered = sorted(dict.fromkeys(examples), key=len)
    if len(ordered) <= n:
        return ordered
    short, long_ = len(ordered[0]), len(ordered[-1])
    picked = [ordered[0], ordered[-1]]
    for i in range(1, n - 1):
        goal = short + (long_ - short) * i / (n - 1)
        picked.insert(-1, min((e for e in ordered if e not in picked), key=lambda e: abs(len(e) - goal)))
    return picked


def _check_texts(model: EncoderDecoder, tokenizer: Tokenizer, texts: list[str], too_long: str) -> None:
    """Each text encodes (TokenizerError names unknown characters) within the model's length budget (else the
    message of catalog key `too_long`)."""
    limit = model.config.max_len - 1
    for text in texts:
        if len(tokenizer.encode(text)) > limit:
            raise BatchError(t(too_long, text=repr(text), most=limit))


def check_sources(model: EncoderDecoder, tokenizer: Tokenizer, sources: list[str]) -> None:
    """BatchError (or TokenizerError) unless `sources` can form one batch for this model."""
    if not MIN_BATCH <= len(sources) <= MAX_BATCH:
        raise BatchError(t("messages.batch_size", lo=MIN_BATCH, hi=MAX_BATCH, n=len(sources)))
    if not all(sources):
        raise BatchError(t("messages.batch_empty"))
    _check_texts(model, tokenizer, sources, "messages.input_too_long_in_batch")


@torch.no_grad()
def greedy_targets(model: EncoderDecoder, tokenizer: Tokenizer, sources: list[str]) -> list[str]:
    """The model's own greedy output for each source, decoded in one batch (no trace)."""
    check_sources(model, tokenizer, sources)
    src, _ = encode_pairs(tokenizer, [(s, "") for s in sources])
    estimate = evaluation_estimate(model.config, len(sources), src.shape[1])
    if not estimate.fits():
        raise BatchError(estimate.message())
    out = greedy_batch(model, src, model.config.max_len - 1)
    return [tokenizer.decode(row) for row in out.tolist()]


@torch.no_grad()
def masked_batch(model: EncoderDecoder, tokenizer: Tokenizer, pairs: list[tuple[str, str]],
                 causal: bool = True) -> MaskedBatch:
    """Pad (source, target) pairs with `encode_pairs`, build the masks with `masks.padding_mask` /
    `masks.target_mask`, and run one traced teacher-forced pass. `causal=False` replaces the target mask
    by its padding part alone, so every decoder position also sees the later ones."""
    check_sources(model, tokenizer, [s for s, _ in pairs])
    _check_texts(model, tokenizer, [target for _, target in pairs], "messages.target_too_long_in_batch")
    src, tgt = encode_pairs(tokenizer, pairs)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    estimate = decode_estimate(model.config, src.shape[1], tgt_in.shape[1], rows=len(pairs))
    if not estimate.fits():  # the trace holds every row's scores and weights
        raise BatchError(estimate.message())
    src_mask = padding_mask(src)
    tgt_mask = target_mask(tgt_in) if causal else padding_mask(tgt_in)
    trace = AttentionTrace()
    log_probs = model(src, tgt_in, src_mask, tgt_mask, trace)
    return MaskedBatch(
        sources=[s for s, _ in pairs], targets=[t for _, t in pairs], src=src, tgt_in=tgt_in, tgt_out=tgt_out,
        src_pieces=[tokenizer.pieces(row) for row in src.tolist()],
        tgt_pieces=[tokenizer.pieces(row) for row in tgt_in.tolist()],
        src_mask=src_mask, tgt_mask=tgt_mask, causal=causal, trace=trace, log_probs=log_probs.float(),
    )


def weight_above_diagonal(weights: torch.Tensor) -> torch.Tensor:
    """Total weight each query row puts on later keys: (..., Q, K) -> (..., Q)."""
    return torch.triu(weights, diagonal=1).sum(-1)
