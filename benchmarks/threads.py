"""Training speed against torch's intra-op thread count, where the loop runs, and OpenMP's wait policy.

Each case runs in a fresh process (OMP_WAIT_POLICY only counts if set before torch loads): the default
Trainer (reverse, tuned model) takes `--steps` steps either in the main thread or in a background
thread while the main thread polls the way a page does (a little torch work every 100 ms); optionally
with one extra busy process holding a core, as another user or session would. Prints one JSON object.
Other processes on the machine change these figures; load_avg is reported.

    python benchmarks/threads.py [--steps 150] [--repeats 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()


def child(threads: int, where: str, steps: int) -> dict:
    """Runs in the measured process: seconds for `steps` training steps."""
    import torch

    sys.path.insert(0, str(ROOT))
    from transformer.training.config import TrainConfig
    from transformer.training.trainer import Trainer

    torch.set_num_threads(threads)
    trainer = Trainer(TrainConfig())
    result = {}

    def train() -> None:
        torch.set_num_threads(threads)
        trainer.step()  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            trainer.step()
        result["seconds"] = time.perf_counter() - start
        result["threads_seen"] = torch.get_num_threads()

    if where == "main":
        train()
    else:
        worker = threading.Thread(target=train, daemon=True)
        worker.start()
        while worker.is_alive():  # the page's poll: a snapshot, a small chart's worth of tensor work
            torch.randn(64, 64) @ torch.randn(64, 64)
            worker.join(0.1)
    return result


def spin() -> None:
    """A busy process holding one core."""
    while True:
        pass


def measure(threads: int, where: str, policy: str, busy: bool, steps: int) -> dict:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    hog = subprocess.Popen([sys.executable, __file__, "--spin"]) if busy else None
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(threads), where, str(steps)],
            env=env, capture_output=True, text=True, check=True,
        ).stdout
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--spin", action="store_true", help=argparse.SUPPRESS)
    add_cpu_argument(parser)
    args = parser.parse_args()
    if args.spin:
        spin()
    if args.child:
        threads, where, steps = args.child
        print(json.dumps(child(int(threads), where, int(steps))))
        return
    cases = []
    for busy, where, policy, threads in itertools.product(
        (False, True), ("main", "background"), ("default", "PASSIVE"), (1, 2)
    ):
        if threads == 1 and policy == "PASSIVE":
            continue  # one thread never waits for a team
        results = [measure(threads, where, policy, busy, args.steps) for _ in range(args.repeats)]
        runs = [r["seconds"] for r in results]
        cases.append({
            "threads": threads, "where": where, "omp_wait_policy": policy, "busy_process": busy,
            "threads_seen_by_training": results[0]["threads_seen"],
            "steps_per_s_best": round(args.steps / min(runs), 1),
            "steps_per_s_median": round(args.steps / statistics.median(runs), 1),
        })
        print(json.dumps(cases[-1]), file=sys.stderr, flush=True)
    print(json.dumps({
        "benchmark": "training steps/s vs torch threads (default reverse Trainer)",
        "steps": args.steps, "repeats": args.repeats, "machine": machine(),
        "cases": cases,
    }))


if __name__ == "__main__":
    main()
