"""Training throughput (target tokens/s) of our EncoderDecoder against torch.nn.Transformer.

Both get the same shape (layers, d_model, heads, d_ff, pre-norm, no dropout), token embeddings scaled by
sqrt(d_model) plus the same sinusoidal positions, a linear generator of the same size, the same padding
and causal masks, the same optimiser, loss and clipping, and the very same batches (reverse, lengths
10-19). Ours trains as the Trainer does, through `packing.packed_logits` (the real tokens only; the same loss
and gradients as the padded pass). The two models take turns batch by batch, so that other load on the
machine hits both alike.
Prints one JSON object; ratio = ours / torch (above 1: ours is faster). The cpu figures count this
thread's CPU time instead of wall time: other processes' load moves them far less. Target (issue 15):
ratio >= 1.3.

    python benchmarks/throughput.py [--rounds 5] [--steps 40] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

import torch  # noqa: E402
from torch import nn  # noqa: E402

from transformer.network.config import ModelConfig  # noqa: E402
from transformer.network.model import EncoderDecoder  # noqa: E402
from transformer.training.fast_forward import packed_logits  # noqa: E402
from transformer.network.positional import sinusoidal_table  # noqa: E402
from transformer.network.special_tokens import PAD  # noqa: E402
from transformer.tasks import make_task  # noqa: E402
from transformer.training.config import MODEL_DEFAULTS  # noqa: E402

# nn.Transformer warns that pre-norm layers cannot use its nested-tensor inference path; training never does.
warnings.filterwarnings("ignore", message="enable_nested_tensor is True")

SHAPES = {
    "default": dict(MODEL_DEFAULTS),
    "larger": {"n_enc_layers": 2, "n_dec_layers": 2, "d_model": 128, "n_heads": 8, "d_ff": 512, "dropout": 0.0},
}


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with embeddings, positions and generator matching EncoderDecoder's."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.scale = math.sqrt(config.d_model)
        self.src_embed = nn.Embedding(config.src_vocab, config.d_model)
        self.tgt_embed = nn.Embedding(config.tgt_vocab, config.d_model)
        self.register_buffer("positions", sinusoidal_table(config.max_len, config.d_model), persistent=False)
        self.transformer = nn.Transformer(
            config.d_model, config.n_heads, config.n_enc_layers, config.n_dec_layers, config.d_ff,
            dropout=config.dropout, batch_first=True, norm_first=config.norm == "pre",
        )
        self.proj = nn.Linear(config.d_model, config.tgt_vocab)

    def embed(self, table: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        return table(ids) * self.scale + self.positions[: ids.size(1)]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1))
        src_pad = src == PAD
        hidden = self.transformer(
            self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt_in), tgt_mask=causal,
            src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True,
        )
        return self.proj(hidden)


def make_step(model: nn.Module, logits_fn):
    """One training step as the Trainer does it: Adam, cross-entropy on logits, clipping. `logits_fn(src, tgt)`
    gives (rows, vocab) logits and their (rows,) targets (pad targets, if any, are ignored)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9, fused=True)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)

    def step(src: torch.Tensor, tgt: torch.Tensor) -> None:
        loss = loss_fn(*logits_fn(src, tgt))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def compare(shape: dict, batches: list, rounds: int) -> dict:
    config = ModelConfig(src_vocab=30, tgt_vocab=30, max_len=24, **shape)
    ours = EncoderDecoder(config)
    peer = TorchTransformer(config)
    steps = {
        "ours": make_step(ours, lambda src, tgt: packed_logits(ours, src, tgt)),
        "torch": make_step(peer, lambda src, tgt: (peer(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten())),
    }
    tokens = sum(int((tgt[:, 1:] != PAD).sum()) for _, tgt in batches)
    for step in steps.values():  # warm-up
        for src, tgt in batches[:3]:
            step(src, tgt)
    seconds = {name: torch.zeros(rounds, len(batches)) for name in steps}  # [round, batch], wall
    cpu = {name: torch.zeros(rounds, len(batches)) for name in steps}  # the same in this thread's CPU time
    for r in range(rounds):
        for i, (src, tgt) in enumerate(batches):
            order = list(steps) if i % 2 == 0 else list(reversed(steps))  # alternate who goes first
            for name in order:
                start, start_cpu = time.perf_counter(), time.thread_time()
                steps[name](src, tgt)
                seconds[name][r, i] = time.perf_counter() - start
                cpu[name][r, i] = time.thread_time() - start_cpu
    # best: each batch's fastest round (filters out bursts of other load); median: whole rounds
    best = {name: tokens / float(s.min(dim=0).values.sum()) for name, s in seconds.items()}
    median = {name: tokens / float(s.sum(dim=1).median()) for name, s in seconds.items()}
    median_cpu = {name: tokens / float(s.sum(dim=1).median()) for name, s in cpu.items()}
    summary = {name: {"tokens_per_s_best": round(best[name]), "tokens_per_s_median": round(median[name]),
                      "tokens_per_cpu_s_median": round(median_cpu[name])} for name in steps}
    return {
        "shape": shape,
        "parameters": {"ours": ours.num_parameters(), "torch": sum(p.numel() for p in peer.parameters())},
        **summary,
        "ratio_best": round(best["ours"] / best["torch"], 3),
        "ratio_median": round(median["ours"] / median["torch"], 3),
        "ratio_cpu_median": round(median_cpu["ours"] / median_cpu["torch"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40, help="batches per round")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    add_cpu_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    task = make_task("reverse", min_len=10, max_len=19)
    tokenizer, generator = task.make_tokenizer(), torch.Generator().manual_seed(0)
    batches = [task.batch(args.batch_size, generator, tokenizer) for _ in range(args.steps)]
    print(json.dumps({
        "benchmark": "training throughput, target tokens/s: our EncoderDecoder vs torch.nn.Transformer",
        "threads": args.threads, "batch_size": args.batch_size, "batches_per_round": args.steps,
        "rounds": args.rounds, "target_ratio": 1.3,
        "results": [compare(shape, batches, args.rounds) for shape in SHAPES.values()],
        "machine": machine(),
    }))


if __name__ == "__main__":
    main()
