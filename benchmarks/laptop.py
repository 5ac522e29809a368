"""Issue 25's items on this machine in one go, for a session that has a CPU kind not yet measured. Prints JSON.

Runs, one after another (never two at once: they share the cores), the benchmarks behind the items: muon_step.py and
all_tasks.py pinned to one core (`taskset -c 1`, as a training process runs beside a browser), train_page.py on the
`addition` preset (the slowest to its bar), click_latency.py (each first visit clicked the moment the first chart
shows), and click_latency.py's cold starts again with the first visits READ_S seconds later (a learner who reads the
home page first: a page that needs torch no longer waits for its import, ui/warm.py). Each one's JSON is kept in
benchmarks/results/laptop-<cpu>-<name>.json (all_tasks.py's lines as a list), so a run under the AVX2 cap keeps the
native run's; then one entry per item: the figure, its target and whether it is met, each taken from those files, and
the machine. A benchmark that fails is named with the end of its error output, and the items it measures are left
out. With `--cpu avx2` every benchmark caps torch's kernels to AVX2 (timing.add_cpu_argument). 11-12 minutes on a
2-core Zen 4, Zen 5 or Intel Xeon with AMX.

    python benchmarks/laptop.py [--cpu native|avx2] [--only muon_step,click_latency,read_first]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PINNED = ["taskset", "-c", "1"]
READ_S = 2  # seconds between the first chart and the first visits in `read_first`
RUNS = {  # name: (command, whether it prints one JSON document per line)
    "muon_step": (PINNED + [sys.executable, "benchmarks/muon_step.py"], False),
    "all_tasks": (PINNED + [sys.executable, "benchmarks/all_tasks.py"], True),
    "train_page": ([sys.executable, "benchmarks/train_page.py", "--task", "addition", "--rounds", "3"], False),
    "click_latency": ([sys.executable, "benchmarks/click_latency.py"], False),
    "read_first": ([sys.executable, "benchmarks/click_latency.py", "--cold-only", "--starts", "3", "--visitors", "1",
                    "--pause", str(READ_S)], False),
}


def run(name: str, cpu: str) -> dict | list | str:
    """Run benchmark `name` with `--cpu cpu`; its JSON (kept in RESULTS), or the end of its error output."""
    command, lines = RUNS[name]
    print(f"== {name}", file=sys.stderr, flush=True)
    done = subprocess.run([*command, "--cpu", cpu], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return f"exit status {done.returncode}: {done.stderr[-1500:]}"
    out = [json.loads(line) for line in done.stdout.splitlines() if line.strip()] if lines else json.loads(done.stdout)
    if isinstance(out, dict) and "skipped" in out:  # a browser benchmark on a machine without Chromium
        return f"skipped: {out['skipped']}"
    (RESULTS / f"laptop-{cpu}-{name}.json").write_text(json.dumps(out, indent=1))
    return out


def item(what: str, figure, target, met: bool) -> dict:
    return {"item": what, "figure": figure, "target": target, "met": met}


PAGE_ITEMS = {  # train_page.py's figures of each worker nice level: the item each reads
    "start_to_finished_s": "2. addition to its bar on the Train page (s)",
    "start_to_finished_over_cli": "3. Start -> Finished over the CLI's training",
    "first_step_ms": "3. Start -> first progress line (ms)",
    "page_rate_over_bare": "4. the page's training rate over the bare run's (at least)",
}


def items(found: dict) -> list[dict]:
    """Issue 25's items from the benchmarks' output (those whose benchmark ran), each with the target and the verdict
    its benchmark gave (a figure is at most its target unless the item says "at least")."""
    out = []
    if isinstance(muon := found.get("muon_step"), dict):
        ratios = {r["task"]: r["cpu"]["muon_over_adam"] for r in muon["results"]}
        out.append(item("1. Muon / Adam, CPU time a step", ratios, muon["target_muon_over_adam"],
                        all(r["met"] for r in muon["results"])))
    if isinstance(tasks := found.get("all_tasks"), list):
        seconds = {r["task"]: r["seconds_to_bar"] for r in tasks}
        out.append(item("2. every preset to its bar, the CLI's path (s)", seconds, tasks[0]["target_seconds"],
                        all(r["within_target"] for r in tasks)))
    if isinstance(page := found.get("train_page"), dict):
        for nice, shown in page["summary"].items():
            if nice.startswith("nice "):
                out += [item(f"{what}, worker at {nice}", shown[name], page["targets"][name], shown["met"][name])
                        for name, what in PAGE_ITEMS.items()]
    clicks, read = (got if isinstance(got := found.get(name), dict) else {} for name in ("click_latency", "read_first"))
    if clicks:
        out += [item("5. fresh server, first chart on Home, median (ms)", clicks["cold_start_ms"]["median"],
                     clicks["targets"]["cold_start_ms"], clicks["met"]["cold_start_ms"]),
                first_visits("clicked at once", clicks)]
    if read:
        out.append(first_visits(f"clicked {READ_S} s after the first chart", read))
    if "step_click_ms" in clicks:
        out.append(item("6. decode step click, median (ms)", clicks["step_click_ms"]["browser"]["p50"],
                        clicks["targets"]["step_click_ms"], clicks["met"]["step_click_ms"]))
    return out


def first_visits(when: str, clicks: dict) -> dict:
    """Item 5's first visits from one click_latency.py run: each page's median."""
    return item(f"5. first visit to each other page, {when}, median (ms)",
                {page: v["p50"] for page, v in clicks["first_visit_ms"].items()},
                clicks["targets"]["first_visit_ms"], clicks["met"]["first_visit_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cpu_argument(parser)
    parser.add_argument("--only", default=",".join(RUNS), help="comma-separated benchmarks of: " + ", ".join(RUNS))
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    if unknown := [n for n in names if n not in RUNS]:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    use_cpu_kind()
    RESULTS.mkdir(exist_ok=True)
    began = time.monotonic()
    found = {name: run(name, args.cpu) for name in names}
    print(json.dumps({"benchmark": "laptop", "cpu": args.cpu, "items": items(found),
                      "failed": {name: out for name, out in found.items() if isinstance(out, str)},
                      "minutes": round((time.monotonic() - began) / 60, 1),
                      "machine": machine(torch_threads=1)}, indent=1))  # the benchmarks train and serve on one


if __name__ == "__main__":
    main()
