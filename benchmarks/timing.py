"""Helpers shared by the benchmark scripts: where a figure was measured (`machine()`), the CPU kind a run emulates
(`--cpu`, `use_cpu_kind()`), timing, and the headless Chromium that paints charts.

Every script prints `machine()` with its figures: the CPU model (lscpu), torch's CPU capability, torch's threads,
the CPUs this process may run on and the load average. `--cpu avx2` caps torch's and oneDNN's kernels to AVX2 on
this machine (`ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`): a stand-in for a learner's laptop without
AVX-512 and native bfloat16, by ISA cap on the same cores, not a different machine. It is set before torch is
imported, and every process a script starts (a server, its workers, a CLI run) inherits it, with any GPU hidden.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
import time

# Every benchmark's and browser test's headless Chromium: Debian's package (never Playwright's download), without
# its omnibox popups, pages of their own (chrome://omnibox-popup.top-chrome) loaded for every new window, i.e. every
# page Playwright opens: 0.8-1.3 s of CPU beside the page being timed, which a learner's browser spent when its
# window opened.
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run",
                 "--disable-features=PreloadTopChromeWebUI,WebUIOmniboxPopup,WebUIOmniboxAimPopup"]
PRESET_SECONDS = 15.0  # issue 25: every preset to its bar within this, through the CLI and the Train page
CPU_KINDS = {"native": {}, "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}}


def add_cpu_argument(parser) -> None:
    """`--cpu native|avx2` on a script's parser (the choice itself is applied by use_cpu_kind())."""
    parser.add_argument("--cpu", choices=tuple(CPU_KINDS), default="native",
                        help="avx2: cap torch and oneDNN to AVX2, a learner's CPU without AVX-512 or native bfloat16")


def use_cpu_kind(argv: list[str] | None = None) -> str:
    """Apply the `--cpu` kind named in `argv` (default sys.argv) to this process's environment, and hide any GPU;
    call it before torch is imported (RuntimeError after: torch reads the caps once). Returns the kind."""
    argv = sys.argv[1:] if argv is None else argv
    kind = "native"
    for i, arg in enumerate(argv):
        if arg == "--cpu" and i + 1 < len(argv):
            kind = argv[i + 1]
        elif arg.startswith("--cpu="):
            kind = arg.split("=", 1)[1]
    caps = CPU_KINDS.get(kind, {})
    if caps and "torch" in sys.modules and any(os.environ.get(k) != v for k, v in caps.items()):
        raise RuntimeError("use_cpu_kind() must run before torch is imported")
    os.environ.update(caps)
    # The scripts time CPUs. On a machine with a GPU a run's device "auto" trains there (the accelerator machine's
    # first figures of 2026-11-26 were its H200's, not its Xeon's): no GPU unless CUDA_VISIBLE_DEVICES names one.
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    return kind


ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # what decides torch's kernels and bfloat16's speed


@functools.cache
def lscpu() -> dict[str, str]:
    """lscpu's "Name: value" lines ({} where lscpu is missing), read once a process."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return {name.strip(): value.strip() for name, _, value in (line.partition(":") for line in out.splitlines())}


def cpu_model() -> str:
    """The CPU's model name as lscpu prints it (the platform's processor string where lscpu is missing)."""
    import platform

    return lscpu().get("Model name") or platform.processor() or platform.machine()


def cpu_kind() -> dict:
    """What tells two CPUs of one model name apart (a VM's "AMD EPYC" is a Zen 3 or a Zen 5): lscpu's family and
    model numbers, and which of ISA_FLAGS the CPU has."""
    info = lscpu()
    flags = set(info.get("Flags", "").split())
    return {"family": info.get("CPU family"), "model": info.get("Model"),
            "isa": [flag for flag in ISA_FLAGS if flag in flags]}


def machine(torch_threads: int | None = None) -> dict:
    """Where a figure was measured: CPU model and kind (`cpu_kind`), torch's CPU capability (what its kernels use
    here, caps included), the caps set, torch's intra-op threads (`torch_threads` when the measured work sets its
    own), the CPUs this process may run on, the load average now, and whether torch sees a GPU."""
    import torch

    return {
        "cpu_model": cpu_model(),
        "cpu_kind": cpu_kind(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_caps": {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if k in os.environ},
        "torch_threads": torch.get_num_threads() if torch_threads is None else torch_threads,
        "cpus": os.cpu_count(), "affinity": sorted(os.sched_getaffinity(0)),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),  # False where use_cpu_kind() ran: the figures are the CPU's
    }


def plot_page() -> str:
    """An HTML page with plotly.js inlined and one empty <div id='plot'> to paint into."""
    from plotly.offline import get_plotlyjs

    return f"<html><body><div id='plot'></div><script>{get_plotlyjs()}</script></body></html>"


def median_ms(fn, repeats: int, digits: int = 2) -> float:
    """Median wall time of `fn()` over `repeats` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), digits)
