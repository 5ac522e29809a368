"""Head ablation: knock attention heads out and measure what each one is worth.

A head's output is its slice of the input to the attention's output projection (heads are concatenated
before `out_proj`). Ablating it replaces that slice, at every position, with zeros (`zero`) or with its
mean over a reference batch of held-out pairs (`mean`). Only the output changes: the head's attention
weights are still computed and traced, so charts can show them marked as not contributing.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import torch

from transformer.network.attention import MultiHeadAttention
from .evaluation import evaluate_pairs, teacher_forced_logits
from .knockout import KINDS, MODES, Head
from transformer.network.model import EncoderDecoder
from transformer.network.special_tokens import PAD
from transformer.tasks import encode_pairs
from transformer.network.tokenizers import Tokenizer


def module_of(model: EncoderDecoder, kind: str, layer: int) -> MultiHeadAttention:
    """The attention module of one kind in one layer."""
    if kind == "encoder_self":
        return model.encoder.layers[layer].self_attn
    block = model.decoder.layers[layer]
    return block.self_attn if kind == "decoder_self" else block.cross_attn


def all_heads(model: EncoderDecoder) -> list[Head]:
    """Every head of the model, kind by kind, layer by layer."""
    config = model.config
    layers = {"encoder_self": config.n_enc_layers, "decoder_self": config.n_dec_layers, "cross": config.n_dec_layers}
    return [Head(kind, layer, head) for kind in KINDS for layer in range(layers[kind])
            for head in range(config.n_heads)]


def check_heads(model: EncoderDecoder, heads: Iterable[Head]) -> list[Head]:
    """The heads, sorted and without repeats; a ValueError names the first the model does not have."""
    known = set(all_heads(model))
    config = model.config
    for head in heads:
        if head not in known:
            layers = config.n_enc_layers if head.kind == "encoder_self" else config.n_dec_layers
            raise ValueError(f"{head} is not in this model: it has {layers} layer(s) of {head.kind} attention "
                             f"with {config.n_heads} heads each")
    return sorted(set(heads))


def _slices(model: EncoderDecoder, heads: Iterable[Head]) -> dict[tuple[str, int], list[int]]:
    grouped: dict[tuple[str, int], list[int]] = {}
    for head in heads:
        grouped.setdefault((head.kind, head.layer), []).append(head.head)
    return grouped


@contextmanager
def _pre_hooks(model: EncoderDecoder, sites: Iterable[tuple[str, int]], hook: Callable) -> Iterator[None]:
    """`hook(site, module, args)` as a forward pre-hook on the output projection of each site's attention."""
    handles = [module_of(model, *site).out_proj.register_forward_pre_hook(
        lambda module, args, site=site: hook(site, module, args)) for site in sites]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def head_means(model: EncoderDecoder, tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> dict:
    """Each attention's concatenated head outputs averaged over the non-pad positions of a teacher-forced
    pass over `pairs`: {(kind, layer): (d_model,) tensor}, the values `mean` ablation puts in."""
    src, tgt = encode_pairs(tokenizer, pairs)
    device = next(model.parameters()).device
    src, tgt = src.to(device), tgt.to(device)
    real = {"encoder_self": src != PAD, "decoder_self": tgt[:, :-1] != PAD, "cross": tgt[:, :-1] != PAD}
    means = {}

    def record(site, module, args):
        rows = args[0][real[site[0]]]  # (positions, d_model): padding left out
        means[site] = rows.mean(dim=0)

    was_training = model.training
    model.eval()
    try:
        with _pre_hooks(model, {(h.kind, h.layer) for h in all_heads(model)}, record):
            teacher_forced_logits(model, src, tgt)
    finally:
        model.train(was_training)
    return means


@contextmanager
def ablated(model: EncoderDecoder, heads: Iterable[Head], mode: str = "zero",
            means: dict | None = None) -> Iterator[EncoderDecoder]:
    """The model with `heads` knocked out while the block runs (every path: batched, traced, cached). `mean`
    mode needs `means` from head_means()."""
    heads = check_heads(model, heads)
    if mode not in MODES:
        raise ValueError(f"unknown ablation mode {mode!r}: one of {', '.join(MODES)}")
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs the head means of a reference batch (head_means)")
    d_head = model.config.d_model // model.config.n_heads
    grouped = _slices(model, heads)

    def knock_out(site, module, args):
        x = args[0].clone()
        for head in grouped[site]:
            part = slice(head * d_head, (head + 1) * d_head)
            x[..., part] = 0.0 if mode == "zero" else means[site][part]
        return (x, *args[1:])

    with _pre_hooks(model, grouped, knock_out):
        yield model


def exact_match(model: EncoderDecoder, tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> float:
    """Greedy exact match, read from one teacher-forced pass: greedy decoding reproduces a target if and only
    if the argmax after every gold prefix is the next gold token (evaluate_pairs), ~5x cheaper than decoding."""
    return evaluate_pairs(model, tokenizer, pairs, greedy=False)["exact_match"]


def importance(model: EncoderDecoder, tokenizer: Tokenizer, pairs: list[tuple[str, str]], mode: str = "zero",
               means: dict | None = None, removal: bool = True,
               progress: Callable[[int, int], None] | None = None) -> dict:
    """Greedy exact match on `pairs` intact (`baseline`), with each head ablated alone (`heads`: kind, layer,
    head, exact_match, drop; 0-based layer and head), and with `removal`, as heads are removed one after
    another, most important first (`removal`: how many are removed, the last one, the exact match)."""
    heads = all_heads(model)
    total, done = (2 if removal else 1) * len(heads) + 1, 0

    def measure(knocked: list[Head]) -> float:
        nonlocal done
        with ablated(model, knocked, mode, means):
            value = exact_match(model, tokenizer, pairs)
        done += 1
        if progress is not None:
            progress(done, total)
        return value

    baseline = measure([])
    rows = [{"kind": h.kind, "layer": h.layer, "head": h.head, "exact_match": (em := measure([h])),
             "drop": baseline - em} for h in heads]
    ranked = [heads[i] for i in sorted(range(len(heads)), key=lambda i: -rows[i]["drop"])]
    result = {"baseline": baseline, "samples": len(pairs), "mode": mode, "heads": rows}
    if removal:
        result["removal"] = [{"removed": 0, "head": None, "exact_match": baseline}] + [
            {"removed": count, "head": str(ranked[count - 1]), "exact_match": measure(ranked[:count])}
            for count in range(1, len(ranked) + 1)]
    return result
