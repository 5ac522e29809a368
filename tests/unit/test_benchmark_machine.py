"""benchmarks/timing.py: the scripts time the CPU they say, on a machine with a GPU too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers.repo import ROOT

SCRIPT = """
import json, os, sys
sys.path.insert(0, "benchmarks")
from timing import machine, use_cpu_kind
kind = use_cpu_kind(sys.argv[1:])
print(json.dumps({"kind": kind, "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"), **machine()}))
"""


def measured(*args: str, **env: str) -> dict:
    """What a benchmark's process sees after use_cpu_kind(args), in a fresh interpreter with `env` added."""
    clean = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "ATEN_CPU_CAPABILITY",
                                                               "ONEDNN_MAX_CPU_ISA")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=ROOT, env={**clean, **env},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_benchmark_hides_the_gpu_and_says_so_unless_one_is_named():
    native = measured()
    assert native["kind"] == "native" and native["cuda_visible"] == "" and native["cuda"] is False
    assert measured(CUDA_VISIBLE_DEVICES="0")["cuda_visible"] == "0"  # someone timing a GPU on purpose


def test_the_avx2_kind_caps_torchs_kernels():
    capped = measured("--cpu", "avx2")
    assert capped["cpu_caps"] == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert capped["cpu_capability"] in ("AVX2", "DEFAULT") and capped["cuda_visible"] == ""


def test_a_figure_names_the_cpu_kind_not_only_its_model_name():
    """A VM's lscpu says "AMD EPYC" for a Zen 3 with AVX2 and a Zen 5 with AVX-512 alike: the family, model and
    ISA flags tell them apart, and they agree with /proc/cpuinfo and with the kernels torch picked."""
    found = measured()
    kind = found["cpu_kind"]
    cpuinfo = dict(line.split(":", 1) for line in open("/proc/cpuinfo").read().split("\n\n")[0].splitlines()
                   if ":" in line)
    cpuinfo = {k.strip(): v.strip() for k, v in cpuinfo.items()}
    flags = set(cpuinfo.get("flags", "").split())
    assert kind["family"] == cpuinfo["cpu family"] and kind["model"] == cpuinfo["model"]
    assert kind["isa"] == [flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if flag in flags]
    if "avx512f" not in kind["isa"]:
        assert found["cpu_capability"] != "AVX512"


HELPERS = {"timing.py", "serving.py", "launch.py"}  # shared code (serving.py's `__main__` is a timed server)


def test_every_benchmark_script_prints_its_machine():
    """Each benchmark script calls timing.machine() for the figures it prints: a figure names where it was
    measured (issue 25)."""
    import ast

    silent = []
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name in HELPERS:
            continue
        calls = {node.func.id for node in ast.walk(ast.parse(script.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        if "machine" not in calls:
            silent.append(script.name)
    assert silent == []
