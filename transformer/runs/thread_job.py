"""The thread backend of `job.Job`: a TrainingJob runs a Trainer in a daemon thread of this process, with a
per-process cap on live jobs.

A thread shares its interpreter with whatever else the process does: TrainingJob is for notebooks, the CLI and
scripts (and the worker process of a ProcessJob runs one); the app trains in worker processes
(`process_job.ProcessJob`, the same interface, on the server's queue).

A script or notebook that ends while a job trains stops it after the step under way and waits for it (at most
EXIT_WAIT seconds): a thread left inside torch's C++ code as the interpreter ends aborts the whole process
("terminate called without an active exception", exit status 134).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from transformer.bundle import ModelBundle
from transformer.training.trainer import Trainer

from .job import MAX_PROBES, SETTLE_TIMEOUT, TRAINING_THREADS, Ending, Job, JobLimitError, JobSnapshot, State

MAX_CONCURRENT_JOBS = 4  # per process: training jobs whose thread is alive (running or paused)
EXIT_WAIT = 10.0  # seconds the interpreter's exit waits, in all, for live jobs to end their step under way

_live_jobs: set["TrainingJob"] = set()
_live_jobs_lock = threading.Lock()


class TrainingJob(Job):
    """Runs `trainer` in a daemon thread with `threads` torch threads (see `Job`; max_steps defaults to the
    trainer's `steps`; the probe runs in the training thread)."""

    def __init__(
        self,
        trainer: Trainer,
        max_steps: int | None = None,
        max_seconds: float | None = None,
        target_exact_match: float | None = None,
        probe: Callable[[ModelBundle], Any] | None = None,
        probe_every: int = 50,
        idle_timeout: float | None = None,
        threads: int = TRAINING_THREADS,
    ):
        super().__init__(max_steps or trainer.config.steps, max_seconds, target_exact_match, probe, probe_every,
                         idle_timeout)
        self.trainer = trainer
        self.threads = threads  # torch threads, set by the job's thread (torch.set_num_threads is process-wide)
        self._model_lock = threading.Lock()  # held by the thread while it changes the model
        self._bundles_waiting = 0  # bundle() calls waiting for the model lock (the thread lets them in)
        self._state = threading.Condition()  # guards everything below; wakes the thread on commands
        self._status = State.IDLE
        self._paused = False
        self._pending = 0  # steps still to run while paused (step(n))
        self._stop_requested = False
        self._stepping = False  # the thread is inside a step (pause() and stop() wait for it to end)
        self._error: str | None = None
        self._reason: str | None = None
        self._heartbeat = time.monotonic()
        self._probes: list[tuple[int, Any]] = []
        self._history: list[dict] = []  # published copies of trainer.history rows
        self._progress = (trainer.step_count, trainer.elapsed, trainer.last_loss)  # published after each step
        self._rate: deque[tuple[float, int]] = deque(maxlen=50)  # (time, step) of recent steps
        self._thread = threading.Thread(target=self._run, name="training-job", daemon=True)
        # Set when _run returns. join() waits on this, not on Thread.join: on Python 3.11 a Thread.join
        # interrupted by Ctrl-C leaves is_alive() False while the thread still runs (a CPython bug).
        self._ended = threading.Event()

    # -- control -----------------------------------------------------------------------------------
    def start(self, paused: bool = False) -> None:
        """Start the thread (paused=True: start paused, e.g. to single-step). JobLimitError when full."""
        with _live_jobs_lock, self._state:
            if self._status != State.IDLE:
                raise RuntimeError(f"this job was already started (state '{self._status}')")
            if len(_live_jobs) >= MAX_CONCURRENT_JOBS:
                raise JobLimitError(
                    f"{MAX_CONCURRENT_JOBS} training jobs are already running on this server; "
                    "stop one or wait for one to finish, then try again"
                )
            _live_jobs.add(self)
            self._paused = paused
            self._status = State.PAUSED if paused else State.RUNNING
            self._heartbeat = time.monotonic()
        self._thread.start()

    def pause(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Stop stepping (cancels what is left of a step(n)); returns once the step under way has ended,
        so the step count a caller reads next is the one the job stays at."""
        self._command(paused=True, pending=0)
        self._settle(timeout)

    def resume(self) -> None:
        self._command(paused=False, pending=0)

    def step(self, n: int = 1) -> None:
        """Run exactly `n` more steps, then stay paused (an idle job starts paused first)."""
        if n < 1:
            raise ValueError(f"step count must be at least 1, got {n}")
        with self._state:
            idle = self._status == State.IDLE
        if idle:
            self.start(paused=True)
        self._command(paused=True, pending=n)

    def stop(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """End the thread after the current step and return once it has ended (or after `timeout`);
        an idle job just becomes stopped."""
        with self._state:
            if self._status == State.IDLE:
                self._status, self._reason = State.STOPPED, Ending.STOPPED
            self._stop_requested = True
            self._state.notify_all()
        if threading.current_thread() is not self._thread:
            self.join(timeout)

    def heartbeat(self) -> None:
        """Tell the job its page is still open (see idle_timeout)."""
        with self._state:
            self._heartbeat = time.monotonic()

    def set_probe_text(self, text: str) -> None:
        """Probe `text` from the next probe on (for a probe with a `text` attribute, like transformer.runs.probe's
        Probe). ProcessJob has the same method; there the probe lives in the worker process."""
        if hasattr(self.probe, "text"):
            self.probe.text = text  # assigning a str is atomic: the training thread reads it at its next probe

    def join(self, timeout: float | None = None) -> bool:
        return self._thread.ident is None or self._ended.wait(timeout)

    def position(self) -> int | None:
        """0 while it steps (it never waits in a line: a full process refuses it), else None."""
        with self._state:
            return 0 if self._status == State.RUNNING else None

    def _settle(self, timeout: float) -> None:
        """Wait until the thread is between steps (it finishes the step under way first)."""
        if threading.current_thread() is self._thread:
            return
        with self._state:
            self._state.wait_for(lambda: not self._stepping, timeout)

    def _command(self, paused: bool, pending: int) -> None:
        with self._state:
            if self._status in (State.RUNNING, State.PAUSED):
                self._heartbeat = time.monotonic()  # a command is a sign of life (a long pause is no timeout)
                self._paused, self._pending = paused, pending
                self._status = State.PAUSED if paused and not pending else State.RUNNING
                self._state.notify_all()

    # -- reading -----------------------------------------------------------------------------------
    def snapshot(self) -> JobSnapshot:
        """A consistent copy of the job's progress, taken without waiting for the current step."""
        with self._state:
            step, elapsed, loss = self._progress
            return JobSnapshot(
                step=step,
                state=self._status,
                history=[dict(row) for row in self._history],
                probes=list(self._probes),
                error=self._error,
                steps_per_s=self._steps_per_s(),
                elapsed=elapsed,
                finished_reason=self._reason,
                loss=loss,
                max_steps=self.max_steps,
                max_seconds=self.max_seconds,
            )

    def bundle(self, name: str | None = None) -> ModelBundle:
        """A copy of the current weights (taken between steps), with the model card."""
        with self._state:
            self._bundles_waiting += 1
        try:
            with self._model_lock:
                return self.trainer.bundle(name)
        finally:
            with self._state:
                self._bundles_waiting -= 1

    def saved(self) -> dict:
        """What this job needs to go on exactly, in another process (`restore`): its trainer's state, its probes
        and probe interval. Take it while the job is paused (between steps)."""
        with self._model_lock:
            trainer = self.trainer.state()
        with self._state:
            return {"trainer": trainer, "probes": list(self._probes), "probe_every": self.probe_every}

    def restore(self, saved: dict) -> None:
        """Go on from `saved()` of a job built from the same settings; call before `start`."""
        self.trainer.restore(saved["trainer"])
        with self._state:
            self._probes, self.probe_every = list(saved["probes"]), saved["probe_every"]
            self._history = [dict(row) for row in self.trainer.history]
            self._progress = (self.trainer.step_count, self.trainer.elapsed, self.trainer.last_loss)

    def _steps_per_s(self) -> float:
        if self._status != State.RUNNING or len(self._rate) < 2:
            return 0.0
        (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    # -- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        torch.set_num_threads(self.threads)
        try:
            if self.trainer.step_count == 0:
                self._record_probe()
            while (stop_reason := self._wait_for_turn()) is None:
                with self._model_lock:
                    self.trainer.step()
                    finish_reason = self._after_step()
                if finish_reason is not None:
                    return self._end(State.FINISHED, finish_reason)
                if self._bundles_waiting:  # a lock is not fair: re-taken at once, it starved bundle() for
                    time.sleep(0.001)  # many seconds (a worker's progress stalled behind its weights copy)
            self._end(State.STOPPED, stop_reason)
        except Exception as exc:  # noqa: BLE001 - any failure must reach the page, with the model kept
            self._publish()
            self._end(State.ERROR, Ending.ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            with _live_jobs_lock:
                _live_jobs.discard(self)
            self._ended.set()

    def _wait_for_turn(self) -> str | None:
        """Block while paused; None when a step should run now, else the reason to stop."""
        with self._state:
            self._stepping = False
            self._state.notify_all()
            while True:
                if self._stop_requested:
                    return Ending.STOPPED
                silent = time.monotonic() - self._heartbeat
                if self.idle_timeout is not None and not self._paused and silent > self.idle_timeout:
                    return Ending.SESSION_GONE
                if not self._paused or self._pending:
                    self._pending = max(0, self._pending - 1)
                    self._stepping = True
                    return None
                self._status = State.PAUSED
                self._state.wait(timeout=0.5)

    def _after_step(self) -> str | None:
        """Probe and evaluate as scheduled, publish progress; the reason to finish, if any."""
        trainer, step = self.trainer, self.trainer.step_count
        if step % self.probe_every == 0:
            self._record_probe()
        if step >= self.max_steps:
            out_of_budget = Ending.MAX_STEPS
        elif self.max_seconds is not None and trainer.elapsed >= self.max_seconds:
            out_of_budget = Ending.TIME_LIMIT
        else:
            out_of_budget = None
        reached = False
        if step % trainer.config.eval_every == 0 or out_of_budget:
            reached = trainer.evaluate_for_target(self.target)
        if out_of_budget and not reached and trainer.history[-1]["decoding"] != "greedy":
            # the final figures come from a confirmation: at the target, the run reached it (the check on fewer
            # inputs can fall short where these reach it: 98.5% on 200, 99.1% on 1,000)
            reached = trainer.confirm(self.target)
        self._publish()
        return Ending.TARGET if reached else out_of_budget

    def _publish(self) -> None:
        trainer = self.trainer
        with self._state:
            self._progress = (trainer.step_count, trainer.elapsed, trainer.last_loss)
            self._history.extend(trainer.history[len(self._history) :])
            self._rate.append((time.monotonic(), trainer.step_count))

    def _record_probe(self) -> None:
        if self.probe is None:
            return
        result = self.probe(self.trainer.bundle())
        with self._state:
            self._probes.append((self.trainer.step_count, result))
            if len(self._probes) > MAX_PROBES:
                self._probes = self._probes[::2]  # MAX_PROBES is even: keeps step 0 and the newest, evenly spaced
                self.probe_every *= 2

    def _end(self, state: str, reason: str, error: str | None = None) -> None:
        with self._state:
            self._status, self._reason, self._error = state, reason, error
            self._stepping = False
            self._state.notify_all()


def _stop_live_jobs() -> None:
    """At the interpreter's exit (atexit runs before daemon threads are cut off): every live job stops after its
    step under way, and is waited for."""
    with _live_jobs_lock:
        jobs = list(_live_jobs)
    for job in jobs:
        job.stop(timeout=0)
    deadline = time.monotonic() + EXIT_WAIT
    for job in jobs:
        job.join(max(0.0, deadline - time.monotonic()))


atexit.register(_stop_live_jobs)
