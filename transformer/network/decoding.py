"""Decoding: batched greedy (evaluation); traced step-by-step greedy with forced tokens, teacher forcing and
beam search (the app, the CLI, the benchmarks).

Every function here runs under `torch.no_grad()`, never calls `.train()`/`.eval()` and never writes to the
model: the caller puts the model in eval mode once, and one cached model may serve many threads. Per-call
state (the KV cache, the attention traces) lives in local objects only.

Step t (0-based) reads the decoder prefix `<s> y_0 .. y_{t-1}` and chooses `y_t`; its decoder
self-attention row has t + 1 keys, its cross-attention row one key per source token (`</s>` included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import torch

from transformer.i18n import t
from .budget import BudgetError, decode_estimate
from .masks import padding_mask
from .model import DecoderCache, EncoderDecoder
from .special_tokens import BOS, EOS, PAD
from .tokenizers import SPECIALS, Tokenizer
from .trace import AttentionTrace

Source = str | Sequence[int]  # text, or token ids (taken as they are: no <s>/</s> added)


class DecodeError(ValueError):
    """The input or a decoding option cannot be used with this model; the message says why."""


class DecodeBudgetError(DecodeError, BudgetError):
    """The traces of this decode would exceed the model budget (AP_MODEL_BUDGET_MB): refused before any
    work. Both a DecodeError (pages show its message like any decode error) and a BudgetError."""


def check_decode_budget(model: EncoderDecoder, source_len: int, steps: int, json_output: bool = False,
                        detail: bool = False) -> None:
    """DecodeBudgetError when a traced decode of `source_len` tokens for up to `steps` steps (`json_output`:
    plus its JSON text; `detail`: a detailed trace) would need more memory than AP_MODEL_BUDGET_MB allows (see
    transformer.network.budget)."""
    estimate = decode_estimate(model.config, source_len, steps, json_output, detail=detail)
    if not estimate.fits():
        raise DecodeBudgetError(estimate.message())


@torch.no_grad()
def greedy_batch(model: EncoderDecoder, src: torch.Tensor, max_len: int, memory: torch.Tensor | None = None
                 ) -> torch.Tensor:
    """Greedy outputs for a padded (batch, src_len) source batch, with a KV cache and no trace
    (`memory`: src already encoded).

    Returns (batch, <= max_len) ids without <s>; rows end with </s> then <pad>, or are cut at max_len.
    """
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask) if memory is None else memory
    cache = DecoderCache()
    token = torch.full((src.size(0), 1), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
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


# ----------------------------------------------------------------------------------------------- results


class Candidate(NamedTuple):
    """One of the top-k next tokens of a step."""

    piece: str
    id: int
    prob: float


@dataclass(frozen=True)
class DecodeStep:
    """One greedy step. Attention rows are float32, layers x heads x keys, batch dimension dropped."""

    index: int
    token: int
    piece: str
    prob: float  # the model's probability of `token` (also when it was forced)
    topk: list[Candidate]  # the model's own top-k, best first
    forced: bool
    self_attention: torch.Tensor  # (layers, heads, index + 1): this step's decoder self-attention row
    cross_attention: torch.Tensor  # (layers, heads, src_len): this step's cross-attention row
    log_probs: torch.Tensor  # (tgt_vocab,): the full next-token distribution

    @property
    def log_prob(self) -> float:
        return float(self.log_probs[self.token])


@dataclass(frozen=True)
class DecodeResult:
    """A finished step-by-step greedy decode.

    `output_ids` exclude `<s>`; they end with `</s>` when `finished`, otherwise they were cut at max_len.
    Full attention matrices for the finished sequence come from `attention()`: decoder queries and keys are
    `prefix_pieces`, cross-attention keys and encoder queries/keys are `source_pieces`.
    """

    source_ids: list[int]  # with the closing </s>
    source_pieces: list[str]
    output_ids: list[int]
    output_pieces: list[str]
    output_text: str
    steps: list[DecodeStep]
    encoder_self: torch.Tensor  # (enc_layers, heads, src_len, src_len)
    finished: bool

    @property
    def prefix_pieces(self) -> list[str]:
        """What the decoder read at each step: <s> and every output but the last."""
        return [SPECIALS[BOS]] + self.output_pieces[:-1]

    @property
    def score(self) -> float:
        """Sum of the log-probabilities of the output tokens (comparable with `BeamResult.score`)."""
        return sum(step.log_prob for step in self.steps)

    @property
    def decoder_self(self) -> torch.Tensor:
        """(dec_layers, heads, T, T), assembled from the step rows; zero above the diagonal."""
        layers, heads, _ = self.steps[0].self_attention.shape
        size = len(self.steps)
        full = torch.zeros(layers, heads, size, size)
        for step in self.steps:
            full[:, :, step.index, : step.index + 1] = step.self_attention
        return full

    @property
    def cross(self) -> torch.Tensor:
        """(dec_layers, heads, T, src_len), assembled from the step rows."""
        return torch.stack([step.cross_attention for step in self.steps], dim=2)

    def attention(self) -> dict[str, torch.Tensor]:
        """Every kind of attention for the finished sequence, keyed like `AttentionTrace.attention`."""
        return {"encoder_self": self.encoder_self, "decoder_self": self.decoder_self, "cross": self.cross}

    def to_dict(self) -> dict:
        """Plain JSON-able data (the CLI's `decode --json` shape); attention indexed [layer][head][query][key]."""
        return {
            "input_tokens": self.source_pieces,
            "output_tokens": self.output_pieces,
            "output": self.output_text,
            "finished": self.finished,
            "steps": [
                {"token": s.piece, "prob": s.prob, "forced": s.forced, "topk": [[c.piece, c.prob] for c in s.topk]}
                for s in self.steps
            ],
            "attention": {kind: matrix.tolist() for kind, matrix in self.attention().items()},
        }


@dataclass(frozen=True)
class TeacherForcedResult:
    """One teacher-forced pass: position t reads `target_ids[: t + 1]` and should predict `expected_ids[t]`."""

    source_ids: list[int]  # with the closing </s>
    source_pieces: list[str]
    target_ids: list[int]  # decoder input: <s> + target tokens
    target_pieces: list[str]
    expected_ids: list[int]  # target tokens + </s>
    log_probs: torch.Tensor  # (T, tgt_vocab)
    trace: AttentionTrace | None  # the whole traced pass (encoder and decoder), batch size 1

    @property
    def predicted_ids(self) -> list[int]:
        return self.log_probs.argmax(-1).tolist()

    @property
    def expected_probs(self) -> torch.Tensor:
        """(T,): the probability given to the right next token at each position."""
        return self.log_probs.gather(1, torch.tensor(self.expected_ids)[:, None])[:, 0].exp()


@dataclass(frozen=True)
class Hypothesis:
    """A beam-search sequence (without <s>) and its summed log-probability."""

    ids: list[int]
    pieces: list[str]
    text: str
    score: float
    finished: bool  # ends with </s>; otherwise it was cut at max_len

    @property
    def normalized_score(self) -> float:
        """Score per token (</s> included): compares sequences of different lengths fairly."""
        return self.score / len(self.ids)


@dataclass(frozen=True)
class BeamResult:
    """Beam search outcome. `best` has the highest summed log-probability among the finished hypotheses;
    `hypotheses` lists every finished one, best first (or, if none finished, the beams cut at max_len)."""

    best: Hypothesis
    hypotheses: list[Hypothesis]
    beam: int

    @property
    def ids(self) -> list[int]:
        return self.best.ids

    @property
    def text(self) -> str:
        return self.best.text

    @property
    def score(self) -> float:
        return self.best.score


# ----------------------------------------------------------------------------------------------- checks


def _token_ids(tokenizer: Tokenizer, source: Source, vocab: int) -> list[int]:
    """Ids of text (TokenizerError names unknown characters) or given ids, checked to lie in 0..vocab-1."""
    if isinstance(source, str):
        return tokenizer.encode(source)
    ids = [int(i) for i in source]
    bad = sorted({i for i in ids if not 0 <= i < vocab})
    if bad:
        raise DecodeError(f"token ids must lie in 0..{vocab - 1}; got {bad}")
    return ids


def checked_source_ids(model: EncoderDecoder, tokenizer: Tokenizer, source: Source) -> list[int]:
    """Validated source ids followed by </s> (no <pad>: the encoder would mask it out)."""
    ids = _token_ids(tokenizer, source, model.config.src_vocab)
    if not ids:
        raise DecodeError(t("messages.empty_input"))
    if PAD in ids:
        raise DecodeError(t("messages.pad_input"))
    limit = model.config.max_len - 1
    if len(ids) > limit:
        raise DecodeError(t("messages.input_too_long", n=len(ids), most=limit))
    return ids + [EOS]


def step_budget(model: EncoderDecoder, max_len: int | None) -> int:
    """Output tokens allowed: `max_len`, by default the model's positional budget."""
    limit = model.config.max_len
    if max_len is None:
        return limit
    if not isinstance(max_len, int) or not 1 <= max_len <= limit:
        raise DecodeError(f"max_len must be an integer in 1..{limit}, got {max_len!r}")
    return max_len


def _check_force(model: EncoderDecoder, force: dict[int, int] | None) -> dict[int, int]:
    force = dict(force or {})
    vocab = model.config.tgt_vocab
    for step, token in force.items():
        if not isinstance(step, int) or step < 0:
            raise DecodeError(f"forced step must be an integer >= 0, got {step!r}")
        if not isinstance(token, int) or not 0 <= token < vocab:
            raise DecodeError(f"forced token at step {step} must be an id in 0..{vocab - 1}, got {token!r}")
    return force


# ----------------------------------------------------------------------------------------------- decoding


def batch_of_one(ids: list[int], model: EncoderDecoder) -> torch.Tensor:
    """`ids` as a batch of one sequence, on the model's device."""
    return torch.tensor([ids], device=next(model.parameters()).device)


def _plain(t: torch.Tensor) -> torch.Tensor:
    """A compact float32 CPU copy for results (a row sliced from a trace would keep the whole trace alive)."""
    return t.to("cpu", torch.float32).contiguous()


def _open_mask(tgt: torch.Tensor) -> torch.Tensor:
    """A target mask hiding nothing (batch 1, so no padding): every position sees the whole prefix."""
    return torch.ones(1, 1, 1, tgt.size(1), dtype=torch.bool, device=tgt.device)


def _next_log_probs(model, memory, src_mask, prefix, cache, trace, positions, causal) -> torch.Tensor:
    """Next-token log-probs after `prefix` (batch 1). With a cache only the uncached tokens are fed;
    without one the whole prefix is recomputed, with the causal mask or (causal=False) no target mask."""
    tgt = batch_of_one(prefix[cache.length :] if cache is not None else prefix, model)
    tgt_mask = None if causal else _open_mask(tgt)
    hidden = model.decode(memory, src_mask, tgt, tgt_mask, trace, cache, positions)
    return model.generator(hidden[0, -1])


def _step(index, token, forced, log_probs, trace, tokenizer, k) -> DecodeStep:
    probs = log_probs.exp()
    top = probs.topk(k)
    return DecodeStep(
        index=index,
        token=token,
        piece=tokenizer.piece(token),
        prob=float(probs[token]),
        topk=[Candidate(tokenizer.piece(i), i, p) for p, i in zip(top.values.tolist(), top.indices.tolist())],
        forced=forced,
        self_attention=_plain(trace.weights("decoder_self")[:, 0, :, -1]),
        cross_attention=_plain(trace.weights("cross")[:, 0, :, -1]),
        log_probs=_plain(log_probs),
    )


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoder,
    tokenizer: Tokenizer,
    source: Source,
    max_len: int | None = None,
    k: int = 5,
    force: dict[int, int] | None = None,
    positions: bool = True,
    causal: bool = True,
    use_cache: bool = True,
) -> DecodeResult:
    """Greedy decoding one token at a time, tracing every step's attention.

    Stops after `</s>` or `max_len` output tokens (default: the model's max_len). `force={t: id}` emits `id`
    at step t instead of the argmax and continues greedily from it. `positions=False` removes the
    positional encodings (encoder and decoder). `causal=False` recomputes the whole prefix each step with
    no causal mask, so earlier prefix positions also see later ones; at inference the prefix is all the
    decoder has, so use `teacher_forced` to show what the causal mask hides. `use_cache=False` recomputes
    the prefix with the causal mask (same result, slower: the benchmarks' baseline).

    Raises TokenizerError for characters the model does not know, DecodeError for empty or overlong
    input and bad options (both are ValueErrors).
    """
    src_ids = checked_source_ids(model, tokenizer, source)
    budget = step_budget(model, max_len)
    force = _check_force(model, force)
    if not isinstance(k, int) or k < 1:
        raise DecodeError(f"k must be a positive integer, got {k!r}")
    check_decode_budget(model, len(src_ids), budget)
    k = min(k, model.config.tgt_vocab)
    src = batch_of_one(src_ids, model)
    src_mask = padding_mask(src)
    encoder_trace = AttentionTrace()
    memory = model.encode(src, src_mask, encoder_trace, positions)
    cache = DecoderCache() if causal and use_cache else None
    prefix, steps = [BOS], []
    for index in range(budget):
        trace = AttentionTrace()
        log_probs = _next_log_probs(model, memory, src_mask, prefix, cache, trace, positions, causal)
        token = force.get(index, int(log_probs.argmax()))
        steps.append(_step(index, token, index in force, log_probs, trace, tokenizer, k))
        prefix.append(token)
        if token == EOS:
            break
    output = prefix[1:]
    return DecodeResult(
        source_ids=src_ids,
        source_pieces=tokenizer.pieces(src_ids),
        output_ids=output,
        output_pieces=tokenizer.pieces(output),
        output_text=tokenizer.decode(output),
        steps=steps,
        encoder_self=_plain(encoder_trace.weights("encoder_self")[:, 0]),
        finished=output[-1] == EOS,
    )


@torch.no_grad()
def teacher_forced(
    model: EncoderDecoder,
    tokenizer: Tokenizer,
    source: Source,
    target: Source,
    causal: bool = True,
    trace: bool = True,
    positions: bool = True,
    detail: bool = False,
) -> TeacherForcedResult:
    """One pass over `<s> target` as the decoder input, every position predicting its next token.

    With `causal=False` the target mask is dropped, so each position also attends to the
    tokens it should predict: the decoder self-attention puts weight above the diagonal and the
    predictions change. `target` excludes the closing </s> (it is expected at the last position);
    it may be empty. `trace=False` skips recording (faster); `detail=True` records a detailed trace (every
    layer's intermediate tensors too).
    """
    src_ids = checked_source_ids(model, tokenizer, source)
    tgt_ids = [BOS] + _token_ids(tokenizer, target, model.config.tgt_vocab)
    if len(tgt_ids) > model.config.max_len:
        raise DecodeError(t("messages.target_too_long", n=len(tgt_ids) - 1, most=model.config.max_len - 1))
    if trace:
        check_decode_budget(model, len(src_ids), len(tgt_ids), detail=detail)
    record = AttentionTrace(detail=detail) if trace else None
    src, tgt = batch_of_one(src_ids, model), batch_of_one(tgt_ids, model)
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask, record, positions)
    hidden = model.decode(memory, src_mask, tgt, None if causal else _open_mask(tgt), record, positions=positions)
    return TeacherForcedResult(
        source_ids=src_ids,
        source_pieces=tokenizer.pieces(src_ids),
        target_ids=tgt_ids,
        target_pieces=tokenizer.pieces(tgt_ids),
        expected_ids=tgt_ids[1:] + [EOS],
        log_probs=_plain(model.generator(hidden[0])),
        trace=record,
    )


@torch.no_grad()
def beam_search(
    model: EncoderDecoder,
    tokenizer: Tokenizer,
    source: Source,
    beam: int = 4,
    max_len: int | None = None,
    positions: bool = True,
) -> BeamResult:
    """Beam search of width `beam` with a shared KV cache (reordered by `DecoderCache.select`).

    Each step extends every live beam, keeps the `beam` best non-final candidates, and moves a candidate
    ending in `</s>` to the finished list when it ranks among the `beam` best (so beam=1 is exactly greedy).
    It stops when no live beam can still beat the best finished score (log-probs only fall as sequences
    grow), when none is left, or after `max_len` tokens. Summed log-probs favour short outputs; each
    hypothesis also reports a length-normalised score. A wider beam usually, not always, beats greedy:
    greedy's own prefix can drop out of the beam.
    """
    src_ids = checked_source_ids(model, tokenizer, source)
    budget = step_budget(model, max_len)
    if not isinstance(beam, int) or beam < 1:
        raise DecodeError(f"beam width must be a positive integer, got {beam!r}")
    src = batch_of_one(src_ids, model)
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask, positions=positions)
    cache, vocab = DecoderCache(), model.config.tgt_vocab
    seqs, scores = batch_of_one([BOS], model), torch.zeros(1, device=src.device)
    finished: list[tuple[list[int], float]] = []
    for _ in range(budget):
        memory_rows = memory.expand(len(seqs), -1, -1)
        hidden = model.decode(memory_rows, src_mask, seqs[:, -1:], cache=cache, positions=positions)
        candidates = (scores[:, None] + model.generator(hidden[:, -1])).flatten()
        top = candidates.topk(min(2 * beam, candidates.numel()))
        rows, tokens = top.indices // vocab, top.indices % vocab
        is_end = tokens == EOS
        for i in is_end[:beam].nonzero()[:, 0].tolist():
            finished.append((seqs[rows[i], 1:].tolist() + [EOS], float(top.values[i])))
        keep = (~is_end).nonzero()[:, 0][:beam]
        seqs = torch.cat([seqs[rows[keep]], tokens[keep, None]], dim=1)
        scores = top.values[keep]
        cache = cache.select(rows[keep])
        if not len(keep) or (finished and max(s for _, s in finished) >= float(scores.max())):
            break
    return _beam_result(tokenizer, finished, seqs[:, 1:].tolist(), scores.tolist(), beam)


def _beam_result(tokenizer, finished, live_ids, live_scores, beam) -> BeamResult:
    def hypothesis(ids, score, done):
        return Hypothesis(ids, tokenizer.pieces(ids), tokenizer.decode(ids), score, done)

    hypotheses = [hypothesis(ids, s, True) for ids, s in finished]
    if not hypotheses:
        hypotheses = [hypothesis(ids, s, False) for ids, s in zip(live_ids, live_scores)]
    hypotheses.sort(key=lambda h: h.score, reverse=True)
    return BeamResult(best=hypotheses[0], hypotheses=hypotheses, beam=beam)
