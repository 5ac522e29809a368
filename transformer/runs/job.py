"""A training run, whatever runs it: the `Job` interface its three backends share, and what it reports.

- `thread_job.TrainingJob`: a Trainer in a thread of this process (notebooks, the CLI, scripts);
- `process_job.ProcessJob`: a Trainer in a worker process of its own, on the server's queue (the app);
- `ray_job.RayJob`: a ProcessJob whose worker is a Ray actor on a cluster (`AP_RAY_ADDRESS`).

`transformer.runs.make_job` picks the app's backend. A page drives a job only through this interface and polls
`snapshot()`: its `State`, and once it has ended its `Ending` (`finished_reason`) and any error.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from transformer.bundle import ModelBundle

# Torch intra-op threads, set by each job's thread (torch.set_num_threads is process-wide). Measured with
# benchmarks/threads.py on this 2-core machine (load ~2.5 from other work), default Trainer, steps/s, median
# of 2, main thread / background thread: 1 thread 53 / 42; 2 threads 11 / 30 (OpenMP's busy-wait against
# the other load); 2 threads with OMP_WAIT_POLICY=PASSIVE 30 / 29. With one more busy process: 1 thread
# 42 / 52, 2 threads 14 / 27 (PASSIVE 36 / 35). End to end, reverse 10-19 to 99% took 8.8-9.1 s with one
# thread and 14.4 s with two (PASSIVE). One thread also leaves the other core to the server and a second session.
TRAINING_THREADS = 1

SETTLE_TIMEOUT = 10.0  # seconds pause() and stop() wait for the step under way (an evaluation can be in it)
WAIT_EVERY = 0.02  # seconds between snapshots while wait_while polls (a backend that is told of changes waits on them)
MAX_PROBES = 120  # probe results kept; beyond it every other one is dropped and the probe interval doubles


class State(StrEnum):
    """A run's state (`JobSnapshot.state`): not started, waiting for a training slot, training, paused, or ended:
    stopped, finished or failed (why: an `Ending`). Each member is its string: it equals it and prints as it."""

    IDLE = "idle"
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    FINISHED = "finished"
    ERROR = "error"


class Ending(StrEnum):
    """Why a run ended (`JobSnapshot.finished_reason`): a FINISHED run by TARGET, MAX_STEPS or TIME_LIMIT, a STOPPED
    one by STOPPED or SESSION_GONE, an ERROR by ERROR or KILLED (its worker died without a word). Each member is its
    string, as `State`'s (the CLI's JSON prints it)."""

    TARGET = "target reached"
    MAX_STEPS = "max steps"
    TIME_LIMIT = "time limit"
    STOPPED = "stopped"
    SESSION_GONE = "session gone"
    ERROR = "error"
    KILLED = "killed"


OUT_OF_BUDGET = (Ending.MAX_STEPS, Ending.TIME_LIMIT)  # a run that trained all it was allowed


class JobLimitError(RuntimeError):
    """Too many training jobs are running in this process."""


@dataclass(frozen=True)
class JobSnapshot:
    """A consistent copy of a job's progress, safe to read from any thread: `state` a `State`, `finished_reason` an
    `Ending` once it has ended, `error` the message of a failed run."""

    step: int
    state: str
    history: list[dict]
    probes: list[tuple[int, Any]]
    error: str | None
    steps_per_s: float
    elapsed: float
    finished_reason: str | None
    loss: float
    max_steps: int
    max_seconds: float | None
    parked: bool = False  # paused, its worker handed back: the next step starts a new one from its state

    @property
    def ended(self) -> bool:
        """Whether the run is over (finished, stopped or failed): it trains no further."""
        return self.state in (State.FINISHED, State.STOPPED, State.ERROR)

    def seconds_left(self) -> float | None:
        """Seconds of training left at most, at the current rate (to max_steps, or to the time limit when that comes
        sooner); None while the job is not running or has no rate yet."""
        if self.state != State.RUNNING or self.steps_per_s <= 0:
            return None
        left = (self.max_steps - self.step) / self.steps_per_s
        return left if self.max_seconds is None else min(left, max(0.0, self.max_seconds - self.elapsed))

    def short_of(self, target: float | None) -> tuple[int, int] | None:
        """(inputs exactly right, inputs) of the final evaluation of a run that ran out of steps or time under
        `target`; None for any other run. A count, not a rate: 98.96% would print as the 99.0% it missed."""
        last = self.history[-1] if self.history else None
        if target is None or last is None or self.finished_reason not in OUT_OF_BUDGET \
                or last["exact_match"] >= target:
            return None
        return round(last["exact_match"] * last["samples"]), last["samples"]


class Job(ABC):
    """A training run controlled from any thread and read through `snapshot()`.

    It stops at `max_steps`, after `max_seconds` of training, or once held-out exact match reaches
    `target_exact_match` (confirmed on the trainer's confirm_samples pairs; a run out of steps or time is evaluated
    so, and reached its target if that evaluation does). `probe(bundle)` runs where the model
    trains, at step 0 and every `probe_every` steps; its results come back with their step. A running job that
    hears no `heartbeat()` for `idle_timeout` seconds stops itself ("session gone")."""

    def __init__(self, max_steps: int, max_seconds: float | None = None, target_exact_match: float | None = None,
                 probe: Callable[[ModelBundle], Any] | None = None, probe_every: int = 50,
                 idle_timeout: float | None = None):
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.target = target_exact_match
        self.probe = probe
        self.probe_every = max(1, probe_every)
        self.idle_timeout = idle_timeout

    @abstractmethod
    def start(self, paused: bool = False) -> None:
        """Start training (paused: start paused, e.g. to single-step); JobLimitError when there is no room."""

    @abstractmethod
    def pause(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Stop stepping; returns once the step under way has ended, so the step read next is the one it stays at."""

    @abstractmethod
    def resume(self) -> None:
        """Train on after a pause."""

    @abstractmethod
    def step(self, n: int = 1) -> None:
        """Run exactly `n` more steps, then stay paused (an idle job starts paused first)."""

    @abstractmethod
    def stop(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """End the run for good after the step under way; returns once it has ended (or after `timeout`)."""

    @abstractmethod
    def heartbeat(self) -> None:
        """Tell the job its page is still open (see idle_timeout)."""

    @abstractmethod
    def set_probe_text(self, text: str) -> None:
        """Probe `text` from the next probe on (a probe with a `text` attribute, like probe.Probe)."""

    @abstractmethod
    def join(self, timeout: float | None = None) -> bool:
        """Wait for the run to end; True when it has (or never started)."""

    @abstractmethod
    def position(self) -> int | None:
        """k >= 1 while the run is k-th in its server's line; 0 while it holds a training slot; None otherwise."""

    @abstractmethod
    def snapshot(self) -> JobSnapshot:
        """A consistent copy of the job's progress, taken without waiting for the step under way."""

    def wait_while(self, state: str, timeout: float, past_step: int | None = None) -> str:
        """The job's state once it is no longer `state` (or, given `past_step`, once it has stepped beyond it), or
        after `timeout` seconds: a page that polls shows a run's end, or its first step, when it comes rather than
        at its next poll."""
        deadline = time.monotonic() + timeout
        while ((now := self.snapshot()).state == state and (past_step is None or now.step <= past_step)
               and (left := deadline - time.monotonic()) > 0):
            time.sleep(min(WAIT_EVERY, left))
        return now.state

    @abstractmethod
    def bundle(self, name: str | None = None) -> ModelBundle:
        """A copy of the current weights (taken between steps), with the model card."""
