"""Builds every pretrained model in assets/checkpoints/ with the project's own CLI, from each task's zoo recipe
(`transformer.training.presets`: the row that also holds the task's preset and bar). Each run stops at its step
budget or once held-out greedy exact match reaches its target, whichever comes first; both are deterministic for a
seed on one torch thread.

    python assets/build_zoo.py [TASK...]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformer.cli import main  # noqa: E402  (after the sys.path insert)
from transformer.training.presets import PRESETS  # noqa: E402

OUT = ROOT / "assets" / "checkpoints"


def build(task: str) -> int:
    """Train `task`'s shipped checkpoint; the CLI's exit status."""
    print(f"== {task}", file=sys.stderr)
    return main(["train", "--task", task, *PRESETS[task].zoo, "--name", task, "--out", str(OUT / f"{task}.safetensors"),
                 "--force"])


def run(tasks: list[str]) -> int:
    unknown = [task for task in tasks if task not in PRESETS or not PRESETS[task].zoo]
    if unknown:
        print(f"error: no zoo recipe for {', '.join(unknown)}; tasks: {', '.join(PRESETS)}", file=sys.stderr)
        return 2
    for task in tasks or [task for task, row in PRESETS.items() if row.zoo]:
        if status := build(task):
            return status
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
