"""How fast is traced step-by-step decoding? Prints JSON.

For two model shapes (3 layers x 8 heads, d_model 128; 2 layers x 4 heads, d_model 64), randomly
initialised and seeded, with </s> suppressed so every run writes exactly `--tokens` tokens, in the same run:
  traced_cached     greedy_decode: one step at a time, KV cache, every step's attention traced
  traced_no_cache   greedy_decode(use_cache=False): the whole prefix recomputed (and traced) each step
  untraced_batch    greedy_batch: KV cache, fused attention, no trace (what training's evaluation uses)
as median milliseconds per generated token, wall clock and process CPU time (one torch thread by default,
so CPU time is the call's own cost even while other work shares the cores). Then, end to end on the 3x8
model, one greedy_decode and one beam_search (width 4) of a typical 16-letter reverse input, against the
decode page's 100 ms budget for a step click (the page may have to decode again when the input or a
forced token changes). When the shipped checkpoint exists, the same end-to-end figures for it (a real
decode that stops at </s>).

    python benchmarks/decode_speed.py [--threads 1] [--repeats 7] [--tokens 17] [--checkpoint PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import string
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

import torch  # noqa: E402

from transformer.store.checkpoints import load_bundle  # noqa: E402
from transformer.network.config import ModelConfig  # noqa: E402
from transformer.network.decoding import beam_search, greedy_batch, greedy_decode  # noqa: E402
from transformer.network.model import EncoderDecoder  # noqa: E402
from transformer.network.special_tokens import EOS  # noqa: E402
from transformer.network.tokenizers import CharTokenizer  # noqa: E402

SHAPES = {"3x8_d128": dict(n_enc_layers=3, n_dec_layers=3, d_model=128, n_heads=8, d_ff=512),
          "2x4_d64": dict(n_enc_layers=2, n_dec_layers=2, d_model=64, n_heads=4, d_ff=256)}
INPUT = "thequickbrownfox"  # 16 letters, like the reverse task's longest default inputs
STEP_BUDGET_MS = 100.0


def build(shape: dict, vocab: int) -> EncoderDecoder:
    """A seeded random model in eval mode that never emits </s> (so every decode has the same length)."""
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig(src_vocab=vocab, tgt_vocab=vocab, max_len=64, **shape)).eval()
    with torch.no_grad():
        model.generator.proj.bias[EOS] = -1e4
    return model


def median_ms(fn, repeats: int) -> dict:
    """Median wall and process-CPU time of `fn()` in ms, after one warm-up call. On one torch thread the CPU
    time is what the call costs; wall time above it is time spent waiting for a core (other work)."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return {"wall": statistics.median(wall), "cpu": statistics.median(cpu)}


def per_token(model, tokenizer, tokens: int, repeats: int) -> dict:
    src = torch.tensor([tokenizer.encode(INPUT) + [EOS]])
    runs = {
        "traced_cached": lambda: greedy_decode(model, tokenizer, INPUT, max_len=tokens),
        "traced_no_cache": lambda: greedy_decode(model, tokenizer, INPUT, max_len=tokens, use_cache=False),
        "untraced_batch": lambda: greedy_batch(model, src, tokens),
    }
    assert len(runs["traced_cached"]().steps) == tokens
    out = {name: {f"{clock}_ms_per_token": round(ms / tokens, 3) for clock, ms in median_ms(fn, repeats).items()}
           for name, fn in runs.items()}
    ratio = out["traced_no_cache"]["cpu_ms_per_token"] / out["traced_cached"]["cpu_ms_per_token"]
    return {**out, "no_cache_over_cached_cpu": round(ratio, 2), "parameters": model.num_parameters()}


def end_to_end(model, tokenizer, repeats: int, max_len: int | None = None) -> dict:
    """One greedy_decode and one width-4 beam_search of INPUT, whole calls, median ms."""
    greedy = median_ms(lambda: greedy_decode(model, tokenizer, INPUT, max_len=max_len), repeats)
    beam = median_ms(lambda: beam_search(model, tokenizer, INPUT, beam=4, max_len=max_len), repeats)
    return {
        "greedy_steps": len(greedy_decode(model, tokenizer, INPUT, max_len=max_len).steps),
        **{f"greedy_decode_{clock}_ms": round(ms, 1) for clock, ms in greedy.items()},
        **{f"beam4_{clock}_ms": round(ms, 1) for clock, ms in beam.items()},
        "step_budget_ms": STEP_BUDGET_MS,
        "greedy_cpu_within_budget": greedy["cpu"] <= STEP_BUDGET_MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=len(INPUT) + 1, help="tokens generated per decode")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "assets/checkpoints/reverse.safetensors")
    add_cpu_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = CharTokenizer(string.ascii_lowercase)
    models = {name: build(shape, tokenizer.vocab_size) for name, shape in SHAPES.items()}
    report = {
        "machine": machine(),  # other work on the machine skews every figure: its load is in here
        "input": INPUT,
        "tokens_per_decode": args.tokens,
        "per_token": {name: per_token(m, tokenizer, args.tokens, args.repeats) for name, m in models.items()},
        "end_to_end_3x8_d128": end_to_end(models["3x8_d128"], tokenizer, args.repeats, args.tokens),
    }
    if args.checkpoint.exists():
        bundle = load_bundle(args.checkpoint)
        report["end_to_end_checkpoint"] = {"checkpoint": args.checkpoint.name,
                                           "parameters": bundle.model.num_parameters(),
                                           **end_to_end(bundle.model, bundle.tokenizer, args.repeats)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
