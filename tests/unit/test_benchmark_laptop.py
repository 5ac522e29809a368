"""benchmarks/laptop.py: issue 25's items from its benchmarks' output, item 5's two first-visit readings together."""

from __future__ import annotations

import json
import sys

from benchmarks import laptop


def clicks(code_ms: float, met: bool) -> dict:
    """click_latency.py's output, as far as laptop.items reads it (a --cold-only run has no step clicks)."""
    return {"targets": {"cold_start_ms": 3000, "first_visit_ms": 1000, "step_click_ms": 150},
            "met": {"cold_start_ms": True, "first_visit_ms": met},
            "cold_start_ms": {"median": 2400},
            "first_visit_ms": {"code": {"p50": code_ms}, "masks": {"p50": 300.0}}}


def test_both_first_visit_readings_are_item_5_each_with_its_own_verdict():
    at_once = {**clicks(1591, met=False), "step_click_ms": {"browser": {"p50": 19.5}}}
    at_once["met"]["step_click_ms"] = True
    found = laptop.items({"click_latency": at_once, "read_first": clicks(422, met=True)})
    assert [entry["item"].split(".")[0] for entry in found] == ["5", "5", "5", "6"]
    visits = {entry["item"]: entry for entry in found if "first visit" in entry["item"]}
    read_item = f"5. first visit to each other page, clicked {laptop.READ_S} s after the first chart, median (ms)"
    assert list(visits) == ["5. first visit to each other page, clicked at once, median (ms)", read_item]
    once, read = visits.values()
    assert once["figure"] == {"code": 1591, "masks": 300.0} and once["met"] is False
    assert read["figure"] == {"code": 422, "masks": 300.0} and read["met"] is True


def test_a_benchmark_that_did_not_run_leaves_its_items_out():
    found = laptop.items({"click_latency": "exit status 1: no Chromium", "read_first": clicks(400, met=True)})
    assert [entry["item"] for entry in found] == [
        f"5. first visit to each other page, clicked {laptop.READ_S} s after the first chart, median (ms)"]


def test_each_cpu_kind_keeps_its_own_results(tmp_path, monkeypatch):
    """A run under the AVX2 cap after a native one (the README's order) leaves both runs' JSON, each as printed."""
    monkeypatch.setattr(laptop, "RESULTS", tmp_path)
    echo_cpu = "import json, sys; print(json.dumps({'cpu': sys.argv[sys.argv.index('--cpu') + 1]}))"
    monkeypatch.setitem(laptop.RUNS, "echo", ([sys.executable, "-c", echo_cpu], False))
    assert laptop.run("echo", "native") == {"cpu": "native"}
    assert laptop.run("echo", "avx2") == {"cpu": "avx2"}
    kept = {path.name: json.loads(path.read_text()) for path in tmp_path.iterdir()}
    assert kept == {"laptop-native-echo.json": {"cpu": "native"}, "laptop-avx2-echo.json": {"cpu": "avx2"}}
