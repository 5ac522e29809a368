"""Sampling instead of greedy decoding: temperature, top-k and top-p (nucleus) filtering, seeded draws.

At each step the model's logits go through three stages, each recorded as a full distribution over the
target vocabulary (float64, summing to 1):

    probs     = softmax(logits)                 the model's own distribution (temperature 1)
    tempered  = softmax(logits / temperature)   sharper below 1, flatter above
    filtered  = tempered, keeping only the top_k most likely tokens, then the smallest set of the most
                likely whose mass is >= top_p, renormalised

and the token is drawn from `filtered` with a `torch.Generator` seeded by `seed`, so a seed always gives the
same output. Temperature -> 0 and top_k = 1 both give greedy decoding. No attention is traced (the KV
cache of `transformer.network.decoding` is used as in greedy decoding); like every decoder here, nothing is written
to the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from .decoding import DecodeError, Source, batch_of_one, checked_source_ids, step_budget
from .masks import padding_mask
from .model import DecoderCache, EncoderDecoder
from .special_tokens import BOS, EOS
from .tokenizers import Tokenizer

MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class SampleSettings:
    """How to sample; `top_k` None and `top_p` 1 switch those filters off. Invalid values raise DecodeError
    (a ValueError) with a message that says what is allowed."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise DecodeError(f"temperature must be a finite number > 0, got {t!r}")
        k = self.top_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise DecodeError(f"top-k must be a whole number >= 1, got {k!r}")
        p = self.top_p
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:  # also refuses nan
            raise DecodeError(f"top-p must be a number in (0, 1], got {p!r}")
        s = self.seed
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_SEED:
            raise DecodeError(f"seed must be a whole number in 0..{MAX_SEED}, got {s!r}")


def filter_logits(logits: torch.Tensor, settings: SampleSettings) -> dict[str, torch.Tensor]:
    """{"probs", "tempered", "filtered"}: the three (vocab,) float64 distributions of one step from its logits
    (see the module docstring). Ties at the top-k / top-p boundary are broken by token id, lowest first."""
    x = logits.detach().to("cpu", torch.float64)
    probs = torch.softmax(x, -1)
    tempered = torch.softmax((x - x.max()) / settings.temperature, -1)  # no overflow as temperature -> 0
    order = torch.sort(tempered, descending=True, stable=True).indices
    keep = torch.zeros_like(tempered, dtype=torch.bool)
    kept = order[: settings.top_k] if settings.top_k is not None else order
    if settings.top_p < 1:  # the smallest prefix whose mass reaches top_p: the tokens before each hold < top_p
        mass = tempered[kept] / tempered[kept].sum()
        kept = kept[torch.cumsum(mass, 0) - mass < settings.top_p]
    keep[kept] = True
    filtered = torch.where(keep, tempered, torch.zeros_like(tempered))
    return dict(probs=probs, tempered=tempered, filtered=filtered / filtered.sum())


@dataclass(frozen=True)
class SampleStep:
    """One sampling step: the model's logits, the distributions derived from them, and the token drawn."""

    index: int
    token: int
    piece: str
    logits: torch.Tensor  # (tgt_vocab,) float32: the model's raw next-token scores
    probs: torch.Tensor  # (tgt_vocab,) float64: softmax(logits)
    tempered: torch.Tensor  # softmax(logits / temperature)
    filtered: torch.Tensor  # after top-k and top-p, renormalised (0 for dropped tokens)

    @property
    def kept(self) -> int:
        """How many tokens the filters left to draw from."""
        return int((self.filtered > 0).sum())

    @property
    def prob(self) -> float:
        """The probability the token was drawn with."""
        return float(self.filtered[self.token])

    def to_dict(self, tokenizer: Tokenizer, k: int) -> dict:
        """The step with the `k` most likely tokens of the model's own distribution, and the drawn one."""
        top = self.probs.topk(min(k, len(self.probs))).indices.tolist()
        ids = top + ([self.token] if self.token not in top else [])
        return {
            "index": self.index, "token": self.token, "piece": self.piece, "kept": self.kept,
            "candidates": [{"id": i, "piece": tokenizer.piece(i), "logit": float(self.logits[i]),
                            "prob": float(self.probs[i]), "tempered": float(self.tempered[i]),
                            "filtered": float(self.filtered[i])} for i in ids],
        }


@dataclass(frozen=True)
class SampleResult:
    """A finished sampled decode; `output_ids` exclude <s> and end with </s> when `finished`."""

    source_ids: list[int]
    output_ids: list[int]
    output_pieces: list[str]
    output_text: str
    steps: list[SampleStep]
    finished: bool
    settings: SampleSettings

    def to_dict(self, tokenizer: Tokenizer, k: int = 5) -> dict:
        s = self.settings
        return {
            "output": self.output_text, "output_ids": self.output_ids, "finished": self.finished,
            "sample": {"temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p, "seed": s.seed},
            "steps": [step.to_dict(tokenizer, k) for step in self.steps],
        }


@torch.no_grad()
def sample(model: EncoderDecoder, tokenizer: Tokenizer, source: Source, settings: SampleSettings | None = None,
           max_len: int | None = None) -> SampleResult:
    """Decode `source` by drawing each token from the filtered distribution (one seeded generator per call).

    Stops after `</s>` or `max_len` tokens (default: the model's max_len). Raises TokenizerError or
    DecodeError (ValueErrors) for input or settings that cannot be used, before any work.
    """
    settings = settings or SampleSettings()
    src_ids = checked_source_ids(model, tokenizer, source)
    budget = step_budget(model, max_len)
    generator = torch.Generator().manual_seed(settings.seed)
    src = batch_of_one(src_ids, model)
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    cache = DecoderCache()
    prefix, steps = [BOS], []
    for t in range(budget):
        hidden = model.decode(memory, src_mask, batch_of_one(prefix[cache.length:], model), cache=cache)
        logits = model.generator.proj(hidden[0, -1]).to("cpu", torch.float32)
        dist = filter_logits(logits, settings)
        token = int(torch.multinomial(dist["filtered"], 1, generator=generator))
        steps.append(SampleStep(t, token, tokenizer.piece(token), logits, **dist))
        prefix.append(token)
        if token == EOS:
            break
    output = prefix[1:]
    return SampleResult(src_ids, output, tokenizer.pieces(output), tokenizer.decode(output), steps,
                        output[-1] == EOS, settings)


def samples(model: EncoderDecoder, tokenizer: Tokenizer, source: Source, settings: SampleSettings, n: int,
            max_len: int | None = None) -> list[SampleResult]:
    """`n` samples with seeds `settings.seed`, `settings.seed + 1`, ...: each reproducible on its own."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DecodeError(f"the number of samples must be a whole number >= 1, got {n!r}")
    if settings.seed + n - 1 > MAX_SEED:
        raise DecodeError(f"seed must be at most {MAX_SEED - n + 1} to draw {n} samples")
    return [sample(model, tokenizer, source, replace(settings, seed=settings.seed + i), max_len) for i in range(n)]


@torch.no_grad()
def output_logits(model: EncoderDecoder, tokenizer: Tokenizer, source: Source, output_ids: list[int]
                  ) -> torch.Tensor:
    """(len(output_ids), tgt_vocab) float32: the raw logits the model gives at each step of a decode that
    wrote `output_ids`, from one causal pass over `<s> output_ids[:-1]` (log_softmax of a row equals that
    step's log-probs in `greedy_decode`, up to float rounding)."""
    src_ids = checked_source_ids(model, tokenizer, source)
    if not output_ids:
        raise DecodeError("there are no output tokens to score")
    prefix = [BOS] + list(output_ids[:-1])
    if len(prefix) > model.config.max_len:
        raise DecodeError(f"the output is {len(output_ids)} tokens long; this model writes at most "
                          f"{model.config.max_len}")
    src = batch_of_one(src_ids, model)
    src_mask = padding_mask(src)
    hidden = model.decode(model.encode(src, src_mask), src_mask, batch_of_one(prefix, model))
    return model.generator.proj(hidden[0]).to("cpu", torch.float32)
