"""What the tests of training runs share, whatever runs them (a worker process, a Ray actor): waiting for a run's
state (each test file with its own bound), the children this process has, and the lifecycle and the finish at max
steps every backend must go through the same way."""

from __future__ import annotations

import os
import time

from transformer.network.decoding import greedy_decode
from transformer.runs.probe import ProbeResult


def waiter(timeout: float, what: str):
    """A test file's `wait_for(condition, timeout=timeout, what=what)`: polls `condition` every 10 ms and fails,
    naming `what`, once `timeout` seconds have passed."""

    def wait_for(condition, timeout: float = timeout, what: str = what) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.01)

    return wait_for


def child_pids() -> set[int]:
    """This process's children, live or zombie (not yet reaped), from /proc; a multiprocessing resource tracker
    (which another test may have started, and which lives as long as this process) left out."""
    children = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"resource_tracker" not in command:
            children.add(int(entry))
    return children


def starts_paused_then_steps_and_runs(job, wait_for) -> None:
    """A job whose probe (text "ab", probing every step) is slow: started paused, it probes the untrained model;
    three single steps with a new probe text; then running, it trains on and keeps its history. `wait_for`: the
    test file's (`waiter`)."""
    job.start(paused=True)
    wait_for(lambda: job.snapshot().probes)  # it is up: it probed the untrained model
    assert job.snapshot().state == "paused" and job.snapshot().step == 0 and job.position() is None

    job.set_probe_text("ba")
    job.step(3)
    wait_for(lambda: job.snapshot().state == "paused" and job.snapshot().step == 3)
    assert job.snapshot().probes == [(0, "ab"), (1, "ba"), (2, "ba"), (3, "ba")]

    job.resume()
    assert job.position() == 0
    wait_for(lambda: job.snapshot().step >= 11 and job.snapshot().steps_per_s > 0)
    assert job.snapshot().state == "running" and job.snapshot().history[0]["step"] == 10


def pauses_steps_and_stops(job, wait_for) -> None:
    """A running job: paused, it stays at its step and gives its slot back; five steps exactly; resumed, a bundle
    taken between steps; stopped, its last weights kept. `wait_for`: the test file's (`waiter`)."""
    job.pause()  # returns once the run is between steps: the step shown is the step it stays at
    paused = job.snapshot()
    assert paused.state == "paused" and job.position() is None  # a paused run gives its slot back
    time.sleep(0.4)
    assert job.snapshot().step == paused.step
    sent = job._sent
    assert job.bundle().card["steps"] == paused.step and job._sent == sent  # no round trip while paused

    job.step(5)  # exactly 5 more, then paused again
    wait_for(lambda: job.snapshot().state == "paused" and job.snapshot().step == paused.step + 5)
    time.sleep(0.3)
    assert job.snapshot().step == paused.step + 5

    job.resume()
    wait_for(lambda: job.snapshot().step >= paused.step + 8)
    bundle = job.bundle("mine")  # while running: asked of the run, taken between steps
    assert bundle.name == "mine" and paused.step + 8 <= bundle.card["steps"] <= job.snapshot().step + 1
    job.stop()
    assert job.join(timeout=0)  # stop() returned after the run ended
    final = job.snapshot()
    assert (final.state, final.finished_reason) == ("stopped", "stopped")
    assert job.bundle().card["steps"] == final.step and final.step >= bundle.card["steps"]


def finished_at_max_steps(job):
    """A job with max_steps=15 and the app's probe of "abc" every 5 steps, joined: finished at step 15, evaluated
    as its settings say, its weights those of step 15 and working; returns its last probe's result."""
    snap = job.snapshot()
    assert (snap.state, snap.finished_reason, snap.step) == ("finished", "max steps", 15)
    assert [(r["step"], r["decoding"], r["samples"]) for r in snap.history] == [
        (10, "teacher_forced", 8), (15, "teacher_forced", 8), (15, "greedy", 16)]
    bundle = job.bundle()
    assert bundle.card["steps"] == 15 and bundle.card["exact_match"] == snap.history[-1]["exact_match"]
    assert greedy_decode(bundle.model, bundle.tokenizer, "ab").output_pieces  # the weights work here
    assert [step for step, _ in snap.probes] == [0, 5, 10, 15]
    result = snap.probes[-1][1]
    assert isinstance(result, ProbeResult) and result.error is None and result.source == "abc"
    return result
