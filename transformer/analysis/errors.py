"""Where a model fails: greedy decodes of N held-out inputs, counted by input length and output position, the
most frequent wrong tokens, and every failing input with its first wrong step.

Output position p (0-based) is decode step p: the answer's tokens, then </s>. An output is right when it
writes every one of them (and so stops at the answer's </s>). Position accuracy compares the greedy output
with the answer position by position; the wrong-token counts and each failure's step are taken at the first
position where they differ (after it, the output is conditioned on its own mistake).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from transformer.network.budget import evaluation_estimate
from transformer.network.decoding import greedy_batch
from .evaluation import EVAL_CHUNK, check_samples, fit_width
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import EOS, PAD
from transformer.tasks import Task, encode_pairs
from transformer.network.tokenizers import Tokenizer

EXTRA_STEPS = 8  # decode steps past the longest answer (for the produced text; an output that runs on ends in …)


@dataclass(frozen=True)
class Failure:
    """A held-out input the model gets wrong; `step` is the 0-based first wrong decode step."""

    source: str
    expected: str
    produced: str
    step: int
    expected_piece: str
    produced_piece: str


@dataclass(frozen=True)
class ErrorAnalysis:
    """Counts over `samples` held-out inputs (arrays indexed alike: `lengths` in characters, positions 0..)."""

    samples: int  # inputs analysed (fewer than asked for when a task has fewer held-out inputs)
    seed: int
    lengths: np.ndarray  # distinct input lengths, ascending
    length_counts: np.ndarray  # inputs of each length
    length_exact: np.ndarray  # of which decoded exactly right
    position_counts: np.ndarray  # inputs whose answer has position p (tokens and </s>)
    position_hits: np.ndarray  # of which the greedy output has the answer's token at p
    first_errors: np.ndarray  # failing inputs whose first wrong step is p
    confusions: list[tuple[str, str, int]]  # (expected, produced, count) at first wrong steps, most frequent first
    failures: list[Failure]  # in the order drawn

    @property
    def exact_match(self) -> float:
        return 1 - len(self.failures) / self.samples


def _first_wrong(output: torch.Tensor, gold: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch, len) bool hits at the answer's positions, and (batch,) the first wrong position (-1: none)."""
    live = gold != PAD
    hits = (fit_width(output, gold.size(1)) == gold) & live
    wrong = live & ~hits
    first = torch.where(wrong.any(1), wrong.int().argmax(1), torch.full_like(wrong[:, 0], -1, dtype=torch.long))
    return hits, first


@torch.no_grad()
def analyse_errors(model: EncoderDecoder, tokenizer: Tokenizer, task: Task, samples: int, seed: int) -> ErrorAnalysis:
    """Greedy-decode `samples` held-out inputs of `task` (batched, KV-cached, at most EXTRA_STEPS steps past the
    longest answer and the model's max_len) and count where the outputs go wrong. Refused (BudgetError) before
    any decoding when the memory estimate exceeds the model budget. The model must be in eval mode."""
    check_samples(samples)
    pairs = task.pairs(samples, seed, "heldout")
    device = next(model.parameters()).device
    by_length: dict[int, list[int]] = {}
    width = max(len(tokenizer.encode(t)) for _, t in pairs) + 1
    steps = min(width + EXTRA_STEPS, model.config.max_len)
    longest = max(len(tokenizer.encode(s)) for s, _ in pairs) + 1
    evaluation_estimate(model.config, samples, longest, steps + 1).check()
    counts, hits_at, firsts = np.zeros(width, np.int64), np.zeros(width, np.int64), np.zeros(width, np.int64)
    confusions, failures = Counter(), []
    for start in range(0, len(pairs), EVAL_CHUNK):
        chunk = pairs[start : start + EVAL_CHUNK]
        src, tgt = (t.to(device) for t in encode_pairs(tokenizer, chunk))
        gold = tgt[:, 1:]
        output = greedy_batch(model, src, steps).cpu()
        output = fit_width(output, width) if output.size(1) < width else output  # all stopped early: pad
        gold = gold.cpu()
        hits, first = _first_wrong(output, gold)
        n = gold.size(1)
        counts[:n] += (gold != PAD).sum(0).numpy()
        hits_at[:n] += hits.sum(0).numpy()
        for row, ((source, expected), step) in enumerate(zip(chunk, first.tolist())):
            tally = by_length.setdefault(len(source), [0, 0])
            tally[0] += 1
            tally[1] += step < 0
            if step < 0:
                continue
            ids = output[row].tolist()
            produced = tokenizer.decode(ids[: ids.index(EOS)]) if EOS in ids else tokenizer.decode(ids) + "…"
            want, got = tokenizer.piece(int(gold[row, step])), tokenizer.piece(int(output[row, step]))
            firsts[step] += 1
            confusions[want, got] += 1
            failures.append(Failure(source, expected, produced, step, want, got))
    lengths = sorted(by_length)
    return ErrorAnalysis(
        samples=len(pairs), seed=seed, lengths=np.array(lengths),
        length_counts=np.array([by_length[n][0] for n in lengths]),
        length_exact=np.array([by_length[n][1] for n in lengths]),
        position_counts=counts, position_hits=hits_at, first_errors=firsts,
        confusions=[(want, got, n) for (want, got), n in confusions.most_common()], failures=failures)
