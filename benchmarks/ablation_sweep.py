"""How long does a head-importance sweep take? Prints JSON (issue 13 target: <= 10 s for every head of a
shipped 2+2 layer x 4 head model on 500 inputs, on 2 cores).

In the same run, on the same held-out inputs and with the same head ablated each time:
  ours   ablation.importance(removal=False): greedy exact match read from one teacher-forced pass per head
  peer   the straightforward sweep: batched greedy decoding (greedy_batch) per head, exact match counted
Both give the same exact match for every head (checked and reported). Wall clock and process CPU time, one
torch thread by default (the app's setting), best of --repeats.

    python benchmarks/ablation_sweep.py [--checkpoint assets/checkpoints/reverse.safetensors] [--samples 500]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

import torch  # noqa: E402

from transformer.analysis import ablation  # noqa: E402
from transformer.store.checkpoints import load_bundle  # noqa: E402
from transformer.network.decoding import greedy_batch  # noqa: E402
from transformer.analysis.evaluation import exact_matches  # noqa: E402
from transformer.tasks import encode_pairs  # noqa: E402

TARGET_S = 10.0


def peer_sweep(bundle, pairs) -> dict:
    """Each head ablated alone, exact match by greedy decoding."""
    src, tgt = encode_pairs(bundle.tokenizer, pairs)
    model = bundle.model.eval()
    result = {}
    for head in [None, *ablation.all_heads(model)]:
        with ablation.ablated(model, [] if head is None else [head]), torch.no_grad():
            output = greedy_batch(model, src, tgt.size(1) - 1)
        result[str(head)] = int(exact_matches(output, tgt[:, 1:]).sum()) / len(pairs)
    return result


def ours_sweep(bundle, pairs) -> dict:
    found = ablation.importance(bundle.model, bundle.tokenizer, pairs, removal=False)
    heads = {str(ablation.Head(r["kind"], r["layer"], r["head"])): r["exact_match"] for r in found["heads"]}
    return {"None": found["baseline"], **heads}


def timed(fn, repeats: int) -> tuple[dict, dict]:
    best = None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        value = fn()
        spent = {"wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3)}
        best = spent if best is None or spent["wall_s"] < best["wall_s"] else best
    return value, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "assets" / "checkpoints" / "reverse.safetensors")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    add_cpu_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_bundle(args.checkpoint)
    pairs = bundle.task.pairs(args.samples, 1, "heldout")
    ours, ours_time = timed(lambda: ours_sweep(bundle, pairs), args.repeats)
    peer, peer_time = timed(lambda: peer_sweep(bundle, pairs), args.repeats)
    config = bundle.config
    print(json.dumps({
        "checkpoint": str(args.checkpoint.relative_to(ROOT) if args.checkpoint.is_relative_to(ROOT)
                          else args.checkpoint),
        "shape": f"{config.n_enc_layers}+{config.n_dec_layers} layers x {config.n_heads} heads, d_model "
                 f"{config.d_model}", "heads": len(ours) - 1, "samples": args.samples, "threads": args.threads,
        "ours_teacher_forced": ours_time, "peer_greedy_decoding": peer_time,
        "speedup": round(peer_time["wall_s"] / ours_time["wall_s"], 2),
        "same_exact_match_every_head": all(abs(ours[k] - peer[k]) < 1e-9 for k in peer),
        "target_s": TARGET_S, "within_target": ours_time["wall_s"] <= TARGET_S,
        "machine": machine(),
    }, indent=2))


if __name__ == "__main__":
    main()
