"""How long does a 20-frame animation take? Prints JSON.

Builds the decode page's animation frames (transformer.charts.animation.decode_specs: per frame the step's cross- and
decoder self-attention charts, i.e. two kaleido renders) for the shipped reverse model, cycling through its
steps to reach --frames, and times the whole export (render every frame + write the file) as GIF and as MP4,
with the kaleido browser already started (its start is reported apart). Target: <= 10 s each on 2 cores.
The machine's load average is printed with the figures: other work on the cores slows kaleido's Chromium.

    python benchmarks/animation.py [--frames 20] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

import torch  # noqa: E402

from transformer.charts import animation  # noqa: E402
from transformer.store.checkpoints import load_bundle  # noqa: E402
from transformer.network.decoding import greedy_decode  # noqa: E402
from transformer.charts.export import image_export_available, shutdown  # noqa: E402

INPUT = "abcdefghijklmno"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    add_cpu_argument(parser)
    args = parser.parse_args()
    ok, why = image_export_available()
    if not ok:
        print(json.dumps({"error": why}))
        sys.exit(1)
    torch.set_num_threads(1)
    bundle = load_bundle(ROOT / "assets" / "checkpoints" / "reverse.safetensors")
    result = greedy_decode(bundle.model, bundle.tokenizer, INPUT, k=5)
    steps = animation.decode_specs(result)
    specs = [steps[i % len(steps)] for i in range(args.frames)]
    start = time.perf_counter()
    animation.figure_pixels(specs[0].figures[0])
    out = {"frames": args.frames, "figures_per_frame": 2, "decode_steps": len(steps),
           "kaleido_start_s": round(time.perf_counter() - start, 2), "load_before": os.getloadavg()[0],
           "cpus": os.cpu_count()}
    for fmt in animation.FORMATS:
        times, size = [], 0
        for _ in range(args.repeats):
            start = time.perf_counter()
            size = len(animation.animation_bytes(specs, fmt, fps=4))
            times.append(time.perf_counter() - start)
        out[f"{fmt}_s"] = round(statistics.median(times), 2)
        out[f"{fmt}_runs_s"] = [round(t, 2) for t in times]
        out[f"{fmt}_bytes"] = size
    frames = animation.render_frames(specs)
    out["frame_size"] = list(frames[0].shape[:2])
    for fmt in animation.FORMATS:
        start = time.perf_counter()
        animation.encode(frames, fmt, 4)
        out[f"{fmt}_encode_only_s"] = round(time.perf_counter() - start, 2)
    out["machine"] = machine()
    shutdown()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
