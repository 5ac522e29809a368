"""Metrics on held-out pairs: teacher-forced loss and token accuracy, greedy exact match.

Targets are (batch, len) ids after <s>: the tokens, </s>, then <pad>. Only non-pad target positions
are scored, so padding can never count as correct; </s> is scored, so an output that runs on or stops
early is wrong.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from transformer.network.budget import EVAL_CHUNK
from transformer.network.decoding import greedy_batch
from transformer.network.masks import padding_mask
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import PAD
from transformer.tasks import encode_pairs
from transformer.network.tokenizers import Tokenizer

MAX_EVAL_SAMPLES = 100_000  # the shipped reverse model takes about two minutes for these on one core


def teacher_forced_logits(model: EncoderDecoder, src: torch.Tensor, tgt: torch.Tensor,
                          memory: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (batch, len - 1, vocab) predicting tgt[:, 1:] from tgt[:, :-1] (`memory`: src already encoded).

    The decoder gets the causal mask only: targets are right-padded, so a pad key is only ever seen by
    later queries, which are pad positions themselves and are never scored. Scored outputs equal those
    under padding AND causal masking, and the causal-only mask is cheaper to build and broadcast.
    """
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask) if memory is None else memory
    return model.generator.proj(model.decode(memory, src_mask, tgt[:, :-1]))


def fit_width(ids: torch.Tensor, width: int) -> torch.Tensor:
    """Cut or right-pad (with <pad>) to `width` columns."""
    if ids.size(1) >= width:
        return ids[:, :width]
    return F.pad(ids, (0, width - ids.size(1)), value=PAD)


def token_hits(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(batch, len) bool: the prediction equals the target at a non-pad target position."""
    return (fit_width(predicted, target.size(1)) == target) & (target != PAD)


def exact_matches(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(batch,) bool: every non-pad target position (tokens and </s>) is reproduced."""
    return token_hits(predicted, target).sum(dim=1) == (target != PAD).sum(dim=1)


@torch.no_grad()
def evaluate_pairs(
    model: EncoderDecoder,
    tokenizer: Tokenizer,
    pairs: list[tuple[str, str]],
    progress: Callable[[int, int], None] | None = None,
    greedy: bool = True,
) -> dict:
    """exact_match (greedy decoding), token_accuracy and loss (teacher-forced), samples, over `pairs`.

    greedy=False takes exact match from the teacher-forced pass instead: greedy decoding reproduces a
    target exactly if and only if the argmax after every gold prefix is the next gold token (by
    induction over the steps), so the two agree except where two logits tie to rounding error; it
    skips the step-by-step decode, ~5x cheaper, for frequent progress checks."""
    was_training = model.training
    model.eval()
    hits = tokens = exact = 0
    loss_sum = 0.0
    device = next(model.parameters()).device  # a Trainer's model may live on a GPU (TrainConfig.device)
    try:
        for start in range(0, len(pairs), EVAL_CHUNK):
            src, tgt = encode_pairs(tokenizer, pairs[start : start + EVAL_CHUNK])
            src, tgt = src.to(device), tgt.to(device)
            gold = tgt[:, 1:]
            memory = model.encode(src, padding_mask(src))  # shared by the teacher-forced and greedy passes
            logits = teacher_forced_logits(model, src, tgt, memory)
            loss_sum += float(F.cross_entropy(logits.transpose(1, 2), gold, ignore_index=PAD, reduction="sum"))
            forced = logits.argmax(-1)
            hits += int(token_hits(forced, gold).sum())
            tokens += int((gold != PAD).sum())
            output = greedy_batch(model, src, gold.size(1), memory) if greedy else forced
            exact += int(exact_matches(output, gold).sum())
            if progress is not None:
                progress(min(start + EVAL_CHUNK, len(pairs)), len(pairs))
    finally:
        model.train(was_training)
    return {
        "exact_match": exact / len(pairs),
        "token_accuracy": hits / tokens,
        "loss": loss_sum / tokens,
        "samples": len(pairs),
        "decoding": "greedy" if greedy else "teacher_forced",
    }


def check_samples(samples: int) -> None:
    """ValueError unless 1 <= samples <= MAX_EVAL_SAMPLES (every held-out count a user may ask for)."""
    if not 1 <= samples <= MAX_EVAL_SAMPLES:
        raise ValueError(f"samples must be between 1 and {MAX_EVAL_SAMPLES:,}, got {samples:,}")


def evaluate_bundle(bundle, samples: int, seed: int, progress: Callable[[int, int], None] | None = None) -> dict:
    """Metrics of a ModelBundle on freshly generated held-out pairs (the CLI `eval`, the checkpoints page)."""
    check_samples(samples)
    return evaluate_pairs(bundle.model, bundle.tokenizer, bundle.task.pairs(samples, seed, "heldout"), progress)
