"""Training in a worker process: ProcessJob has TrainingJob's API (start / pause / resume / stop / step(n) /
snapshot() / bundle() / join / heartbeat) but trains in a child process of its own, so a run never
shares an interpreter with the web server's page reruns (issue 10).

Which one to use: the Streamlit app uses ProcessJob. TrainingJob (transformer.runs.thread_job, a thread) stays for
notebooks, the CLI and scripts, where a second process buys nothing and a Trainer is at hand.
transformer.runs.ray_job.RayJob is a ProcessJob whose worker is a Ray actor placed on a cluster by Ray: the
same worker loop (transformer.runs.relay) and the same parent side, over Ray calls instead of a pipe.

How it works
- The child is a fresh interpreter (`python -c`, as multiprocessing's "spawn" starts one: forking a
  process whose torch thread pools run is unsafe), handed one end of a socket pair framed by
  multiprocessing's Connection, and this process's sys.path. It is not started through
  multiprocessing.Process: spawn re-runs the parent's __main__ script in the child, and inside a Streamlit
  script run __main__ is the app script itself (Streamlit installs it as sys.modules["__main__"]), so every
  worker would first run the whole app. It (transformer.runs.relay) builds the Trainer and runs an ordinary
  TrainingJob (with `threads` torch threads, default 1 as TrainingJob). Its main thread relays: it applies the
  commands that come down the pipe and sends progress (step, loss, steps/s, state, new history rows, new
  probe results) every PUBLISH_EVERY seconds while something changed. Messages are pickled with the plain
  pickler and sent as bytes, so no tensor travels through shared memory that a killed child takes along.
- Weights travel as a CPU state_dict (torch.save bytes, read back with weights_only=True) after a pause, a
  stop or the end, on request (bundle() while running: one round trip, taken between steps), and every
  WEIGHTS_EVERY seconds while running, each in the progress message taken after the copy: the parent never
  holds weights ahead of the progress it shows, even from a worker killed between the two. So bundle() of a
  job that is not stepping needs no round trip, and a killed worker leaves weights at most WEIGHTS_EVERY
  seconds old (the card's "steps" says which step).
- pause() and stop() send the command and wait for the child's answer, which it sends only after its
  TrainingJob's own pause() / stop() returned (between steps); the progress that answers is what
  snapshot() shows from then on, so a page never shows a step the run then moves past. Commands carry a
  sequence number and each progress message names the last command it reflects: progress sent before a
  command never undoes the state that command set.
- A small reader thread per job applies the child's messages. When the pipe ends without the child's
  goodbye, the child died: the job becomes "error" with finished_reason "killed" and a message naming the
  signal (SIGKILL: from outside, or the out-of-memory killer), as soon as the kernel closes the pipe; the
  last snapshot and weights stay readable. An exception in the child (divergence, CUDA out of memory, a
  failing probe) is TrainingJob's "error" state, relayed with its message and the last progress.
- Capacity (transformer.runs.queue): start() counts the run against its owner's and client's shares of live
  runs (RunLimitError); start(), resume() and step(n) ask the job's RunQueue for a slot and
  wait in line (state "queued", position()) when none is free; QueueFullError when the line is full. A run
  gives its slot back whenever it stops stepping, paused included (it keeps its process and weights). A
  queued run that never started has no process until its turn: a full line must not hold 32 interpreters.
- Parking: a paused run (or one waiting in line, its worker paused) asked to park() (by RunQueue.park_idle:
  idle too long, or too many workers alive) has its worker send its whole state (TrainingJob.saved: weights,
  optimiser and schedule states, batch and dropout generators, step count, history, probes) and end. The run
  stays paused or in line (snapshot().parked); when it steps again (resume, step(n), its turn in line) a new
  worker restores that state, so its losses and weights are those of a run that never paused, bit for bit on
  the CPU.
- A child ignores SIGINT (Ctrl-C in the server's terminal reaches the whole process group) and ends,
  stopping its run after the step under way, when its pipe closes: when the server exits or dies, even by
  SIGKILL. The reader thread waits for (reaps) its worker, so no zombie is left either.
- The probe runs in the child, so it must be picklable (a module-level function, or an instance of a
  module-level class such as transformer.runs.probe.Probe, the app's); its results come back pickled.
  set_probe_text(text) changes the text of a probe that has a `text` attribute (assigning probe.text in the
  server changes only the server's copy).
- Starting a worker costs an interpreter start and `import torch`: ~2-3 s of CPU before the first step
  (measured on the 2-core machine; far longer in wall time when it is loaded). launch_worker() starts one
  that waits for its run, so a caller may start it ahead of time and hand it over through `launcher`.

Snapshot states are TrainingJob's (idle, running, paused, stopped, finished, error) plus "queued".
"""

from __future__ import annotations

import dataclasses
import io
import multiprocessing
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch

from transformer.bundle import ModelBundle
from transformer.network.config import ModelConfig
from transformer.network.model import EncoderDecoder
from transformer.network.tokenizers import tokenizer_from_dict
from transformer.tasks import make_task
from transformer.training.config import TrainConfig, card_settings, model_overrides
from transformer.training.trainer import Trainer

from .job import SETTLE_TIMEOUT, TRAINING_THREADS, Ending, Job, JobSnapshot, State
from .queue import RunQueue, server_queue
from .relay import dumps

__all__ = ["ProcessJob"]

IDLING = (State.PAUSED, State.QUEUED)  # states whose worker, if it has one, is not stepping (it may park)
STOP_GRACE = 1.0  # seconds a stop waits for the step under way before it ends the worker (issue: stop within 1 s)
EXIT_GRACE = 5.0  # seconds a worker whose pipe has closed gets to exit before it is killed
MAX_THREADS = 64
# The worker's first lines, run by a fresh interpreter (`python -c`): the socket it was handed, then this
# process's sys.path, then the run's spec.
_BOOT = (
    "import os, pickle, sys\n"
    "from multiprocessing.connection import Connection\n"
    "conn = Connection(int(sys.argv[1]))\n"
    "sys.path[:] = pickle.loads(conn.recv_bytes())\n"
    "from transformer.runs.relay import worker_main\n"
    "import torch._dynamo\n"  # the first optimizer imports it (~1.2 s of CPU): done before a run is waiting
    "try:\n"
    "    spec = pickle.loads(conn.recv_bytes())\n"
    "except EOFError:\n"  # a worker started ahead of time whose server ended before giving it a run
    "    os._exit(0)\n"
    "worker_main(conn, spec)\n"
    "sys.stdout.flush()\n"
    "sys.stderr.flush()\n"
    "os._exit(0)\n"  # its goodbye is sent; tearing down an interpreter with torch took 1-3 s, and stop() waits
)


def launch_worker() -> tuple[subprocess.Popen, Any]:
    """A new worker interpreter and our end of its pipe. It is given this process's sys.path, imports the
    library (torch: most of its start-up), then waits for the spec of the run it is to train; so one may be
    started ahead of time and handed to a ProcessJob later (its `launcher`; the app keeps a warm spare,
    ui/runs.py). Closing the pipe ends it."""
    ours, theirs = multiprocessing.Pipe()  # a socket pair, framed by multiprocessing's Connection
    try:
        proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(theirs.fileno())], stdin=subprocess.DEVNULL,
                                pass_fds=(theirs.fileno(),))
        ours.send_bytes(dumps(list(sys.path)))  # so the worker imports what this process imports
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()  # the worker holds the only other end: its death closes the pipe
    return proc, ours


def _death_message(exitcode: int | None, step: int) -> str:
    kept = f"at step {step:,}; its last snapshot and weights are kept"
    if exitcode is not None and exitcode < 0:
        if -exitcode == signal.SIGKILL:
            return (f"the training process was killed (SIGKILL: stopped from outside, or by the system when "
                    f"memory ran out) {kept}")
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the training process was killed by {name} {kept}"
    return f"the training process ended unexpectedly (exit code {exitcode}) {kept}"


class ProcessJob(Job):
    """A training run in a worker process of its own; TrainingJob's API (see the module docstring).

    Built from the settings a Trainer is built from (`train`, `model`: ValueError now for anything the
    Trainer would refuse); max_steps, max_seconds, target_exact_match, probe, probe_every and idle_timeout
    mean what they mean for TrainingJob. `threads`: torch threads in the worker. `queue`: the RunQueue
    that grants it a slot (default: the server's, transformer.runs.queue.server_queue()). `launcher`: what
    gives the job its worker when its turn comes, as launch_worker() does (default: launch_worker; the
    app's hands over a worker it started ahead of time, when it has one). `owner`, `client`: whose run it is, for
    the queue's shares of live runs (None: not counted).
    """
    PARKS = True  # a paused run may hand its worker back (RayJob's actor keeps its place instead)

    def __init__(
        self,
        train: TrainConfig,
        model: dict | None = None,
        max_steps: int | None = None,
        max_seconds: float | None = None,
        target_exact_match: float | None = None,
        probe: Callable[[ModelBundle], Any] | None = None,
        probe_every: int = 50,
        idle_timeout: float | None = None,
        threads: int = TRAINING_THREADS,
        queue: RunQueue | None = None,
        launcher: Callable[[], tuple[subprocess.Popen, Any]] = launch_worker,
        owner: str | None = None,
        client: str | None = None,
    ):
        super().__init__(max_steps or train.steps, max_seconds, target_exact_match, probe, probe_every, idle_timeout)
        self.train = train.validate()
        self.model_overrides = model_overrides(model)
        self.task = make_task(train.task, **train.task_params)
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
            raise ValueError(f"threads must be a whole number from 1 to {MAX_THREADS}, got {threads!r}")
        if probe is not None:
            try:
                pickle.dumps(probe)
            except Exception as exc:  # noqa: BLE001 - pickling fails in many ways
                raise ValueError(
                    "the probe runs in the worker process, so it must be picklable (a module-level function, "
                    f"or an instance of a module-level class): {type(exc).__name__}: {exc}"
                ) from None
        self.threads = threads
        self.queue = server_queue() if queue is None else queue
        self.launcher = launcher
        self.owner, self.client = owner, client

        self._lock = threading.Condition()  # guards everything below; wakes pause() / stop() / bundle()
        self._status = State.IDLE
        self._reason: str | None = None
        self._error: str | None = None
        self._progress = (0, 0.0, float("nan"), 0.0)  # step, elapsed, loss, steps/s, as the worker sent them
        self._history: list[dict] = []
        self._probes: list[tuple[int, Any]] = []
        self._weights: tuple[dict, bytes] | None = None  # the worker's last (card, state_dict bytes)
        self._model_config: ModelConfig | None = None  # and tokenizer: sent by the worker once it is ready
        self._tokenizer = None
        self._mode: tuple = ("pause",)  # what the worker should do once it has a slot: run, or step n
        self._in_queue = False  # it holds a slot of self.queue, or waits for one
        self._slot_lock = threading.Lock()  # held while giving the slot back (see _settle_slot)
        self._proc = None
        self._conn = None
        self._ready = False  # the worker has built its TrainingJob and obeys commands
        self._sent = 0  # sequence number of the last command sent
        self._acked = 0  # of the last command the worker has answered
        self._stopping = False
        self._goodbye = False  # the worker ended of its own accord, after its final progress
        self._ended = threading.Event()
        self._parked: bytes | None = None  # a parked run's whole state, until a new worker has restored it
        self._paused_at: float | None = None  # when park_idle first saw it paused with a worker

    # -- control -----------------------------------------------------------------------------------
    def start(self, paused: bool = False) -> None:
        """Start training (paused=True: start the worker paused, e.g. to single-step). When the server
        runs its limit of workers the job waits in line ("queued"); QueueFullError when the line is full,
        RunLimitError when its owner or client has as many live runs as it may."""
        with self._lock:
            if self._status != State.IDLE:
                raise RuntimeError(f"this job was already started (state '{self._status}')")
        with self._counted(), self._lock:
            if paused:
                self._status = State.PAUSED
                self._spawn()
            else:
                self._mode = ("run",)
                self._want_slot()
        self._settle_slot()

    def pause(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Stop stepping (cancels what is left of a step(n)); returns once the worker is between steps and
        the snapshot shows the step it stays at. A queued job leaves the line and stays paused."""
        with self._lock:
            if self._status in (State.RUNNING, State.QUEUED):
                self._mode = ("pause",)
                if self._status == State.RUNNING and self._ready:
                    seq = self._command("pause")
                    self._lock.wait_for(lambda: self._acked >= seq or self._ended.is_set(), timeout)
                if self._status in (State.RUNNING, State.QUEUED):  # (a worker that died meanwhile says so instead)
                    self._status = State.PAUSED
        self._settle_slot()

    def resume(self) -> None:
        """Train on (cancels what is left of a step(n)); waits in line when the server is full."""
        self._want_to_step(("run",))

    def step(self, n: int = 1) -> None:
        """Run exactly `n` more steps, then stay paused (an idle job starts first)."""
        if n < 1:
            raise ValueError(f"step count must be at least 1, got {n}")
        with self._counted():
            self._want_to_step(("step", n))

    def stop(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """End the worker after the current step and return once it has ended (or after `timeout`); a job
        without a worker (idle, queued, paused before its first turn) just becomes stopped. A worker still
        busy STOP_GRACE seconds after the command (a long step or evaluation) is ended at once: its memory
        goes back to the system and the last weights it sent stay (their card names their step)."""
        with self._lock:
            if self._ended.is_set():
                return
            self._stopping = True
            if self._proc is None:
                self._status, self._reason, self._parked = State.STOPPED, Ending.STOPPED, None
                self._ended.set()
            elif self._ready:
                self._command("stop")
            else:  # still importing torch: nothing trained yet, nothing to save
                self._terminate()
            if self._status == State.QUEUED:
                self._status = State.PAUSED  # out of the line now; the worker's last word follows
        self._settle_slot()
        if not self.join(min(timeout, STOP_GRACE)):
            with self._lock:
                if self._proc is not None and not self._ended.is_set():
                    self._terminate()
            self.join(timeout)

    def park(self, timeout: float = SETTLE_TIMEOUT) -> bool:
        """Hand the worker of a paused run (or of one waiting in line, its worker paused) back: it sends the run's
        whole state and ends (see the module docstring). True when the run is parked now; False when it had no idle
        worker, or the worker did not answer within `timeout` seconds."""
        with self._lock:
            if not self.PARKS or self._status not in IDLING or not self._ready or self._stopping:
                return False
            seq = self._command("park")
            self._lock.wait_for(lambda: self._acked >= seq or self._ended.is_set(), timeout)
            return self._parked is not None and self._proc is None

    def paused_since(self) -> float | None:
        """When this run was first seen paused, or waiting in line, with a live worker (time.monotonic()), None when
        it is not; for RunQueue.park_idle, which asks every few seconds (a command to step again starts the clock
        afresh)."""
        with self._lock:
            if self._status not in IDLING or not self._ready or self._stopping:
                self._paused_at = None
            elif self._paused_at is None:
                self._paused_at = time.monotonic()
            return self._paused_at

    def ended(self) -> bool:
        """Whether the run has ended (stopped, finished, failed, killed); never blocks."""
        return self._ended.is_set()

    def heartbeat(self) -> None:
        """Tell the job its page is still open (see idle_timeout)."""
        with self._lock:
            if self._ready and not self._ended.is_set():
                self._send(("heartbeat",))

    def set_probe_text(self, text: str) -> None:
        """Probe `text` from the next probe on (for a probe with a `text` attribute, like the app's)."""
        if hasattr(self.probe, "text"):
            self.probe.text = text
        with self._lock:
            if self._ready and not self._ended.is_set():
                self._send(("probe_text", text))

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the worker to end; True when it has (or the job never started)."""
        with self._lock:
            if self._status == State.IDLE:
                return True
        return self._ended.wait(timeout)

    def wait_while(self, state: str, timeout: float, past_step: int | None = None) -> str:
        """The state once it is no longer `state` (or, given `past_step`, once the run has stepped beyond it), or
        after `timeout` seconds (woken by the worker's messages, not by polling; no snapshot is copied: a class
        server's live views each wait twenty times a second)."""
        with self._lock:
            self._lock.wait_for(lambda: self._status != state
                                or (past_step is not None and self._progress[0] > past_step), timeout)
            return self._status

    def position(self) -> int | None:
        """0 while it holds a slot, k when it is k-th in line for one, None otherwise (RunQueue.position)."""
        return self.queue.position(self)

    @property
    def pid(self) -> int | None:
        """The worker's process id (None before it was started)."""
        return None if self._proc is None else self._proc.pid

    # -- reading -----------------------------------------------------------------------------------
    def snapshot(self) -> JobSnapshot:
        """A consistent copy of the job's progress as the worker last reported it (no round trip)."""
        with self._lock:
            step, elapsed, loss, rate = self._progress
            return JobSnapshot(
                step=step,
                state=self._status,
                history=[dict(row) for row in self._history],
                probes=list(self._probes),
                error=self._error,
                steps_per_s=rate if self._status == State.RUNNING else 0.0,
                elapsed=elapsed,
                finished_reason=self._reason,
                loss=loss,
                max_steps=self.max_steps,
                max_seconds=self.max_seconds,
                parked=self._parked is not None,
            )

    def bundle(self, name: str | None = None, timeout: float = SETTLE_TIMEOUT) -> ModelBundle:
        """A copy of the current weights (on the CPU) with the model card. A running worker is asked for
        them (it answers between steps); otherwise, and when it cannot answer, they are the last it sent.
        Before the worker has sent any, the untrained model (built here, from the same seed)."""
        with self._lock:
            if self._status == State.RUNNING and self._ready and not self._ended.is_set():
                seq = self._command("bundle")
                self._lock.wait_for(lambda: self._acked >= seq or self._ended.is_set(), timeout)
            weights, config, tokenizer = self._weights, self._model_config, self._tokenizer
        if weights is None:
            trainer = Trainer(dataclasses.replace(self.train, device="cpu"), self.model_overrides)
            bundle = trainer.bundle(name)
            bundle.card["train"] = card_settings(self.train, bundle.task)
            return bundle
        card, blob = weights
        with torch.random.fork_rng(devices=[]):  # initialising the model must not move the server's RNG
            model = EncoderDecoder(config)
        model.load_state_dict(torch.load(io.BytesIO(blob), weights_only=True))
        card = dict(card, name=name) if name else dict(card)
        return ModelBundle(model.eval(), tokenizer, self.task, card)

    # -- the parent's side, under self._lock ---------------------------------------------------------
    @contextmanager
    def _counted(self):
        """While an idle job starts: counted against its owner's and client's shares of live runs (RunLimitError
        when either is full); a start that fails leaves the count as it was."""
        with self._lock:
            idle = self._status == State.IDLE
        if idle:
            self.queue.admit(self, self.owner, self.client)
        try:
            yield
        except BaseException:
            if idle:
                self.queue.leave(self)
            raise

    def _want_to_step(self, mode: tuple) -> None:
        with self._lock:
            self._paused_at = None
            if self._stopping:
                pass  # a stop that is still under way (it timed out) wins
            elif self._status in (State.IDLE, State.PAUSED):
                self._mode = mode
                self._want_slot()
            elif self._status == State.RUNNING:
                self._mode = mode
                if self._ready:
                    self._send_mode()
            elif self._status == State.QUEUED:
                self._mode = mode  # what it does when its turn comes
        self._settle_slot()

    def _want_slot(self) -> None:
        """Take a slot and step, or wait in line (QueueFullError leaves everything as it was)."""
        place = self.queue.acquire(self, self._granted)
        self._in_queue = True
        if place == 0:
            self._go()
        else:
            self._status = State.QUEUED

    def _granted(self) -> None:
        """The queue gave this job its slot (called from the thread whose release freed it)."""
        with self._lock:
            if self._status == State.QUEUED:
                return self._go()
            if not self._in_queue:
                return None
            self._in_queue = False  # it no longer waited (paused or stopped meanwhile): the slot goes back
            notify = self.queue.release_later(self)
        notify()

    def _go(self) -> None:
        self._status = State.RUNNING
        if self._proc is None:
            self._spawn()
        elif self._ready:
            self._send_mode()

    def _send_mode(self) -> None:
        if self._mode[0] == "run":
            self._command("resume")
        elif self._mode[0] == "step":
            self._command("step", self._mode[1])

    def _command(self, name: str, *args) -> int:
        self._sent += 1
        self._send((name, self._sent, *args))
        return self._sent

    def _send(self, message) -> None:
        try:
            self._conn.send_bytes(dumps(message))
        except (OSError, ValueError):
            pass  # the worker is gone; the reader thread reports how

    def _spec(self) -> dict:
        """What the worker builds its run from (relay.serve)."""
        return {
            "train": self.train, "model": self.model_overrides, "max_steps": self.max_steps,
            "max_seconds": self.max_seconds, "target": self.target, "probe": self.probe,
            "probe_every": self.probe_every, "idle_timeout": self.idle_timeout, "threads": self.threads,
            "resume": self._parked,
        }

    def _terminate(self) -> None:
        """End the worker at once (it has not built its run yet, or a stop's grace ran out)."""
        self._proc.terminate()

    def _spawn(self) -> None:
        spec = self._spec()
        try:
            proc, ours = self.launcher()
        except Exception as exc:  # noqa: BLE001 - e.g. out of processes or memory: the page must hear why
            self._status, self._reason = State.ERROR, Ending.ERROR
            self._error = f"the training process could not start: {type(exc).__name__}: {exc}"
            self._ended.set()
            return
        try:
            ours.send_bytes(dumps(spec))
        except (OSError, ValueError):
            pass  # the worker is gone already: the reader thread reports how
        self._proc, self._conn = proc, ours
        self.queue.worker_started(self)
        threading.Thread(target=self._read, args=(ours, proc), name="training-worker-reader", daemon=True).start()
        if self.queue.workers > self.queue.max_workers:  # past the cap: the longest-paused hand theirs back
            threading.Thread(target=self.queue.park_idle, name="training-park", daemon=True).start()

    def _settle_slot(self) -> None:
        """Give the slot (or the place in line) back unless the job is running or queued. Two threads may
        get here at once (a command and the reader); the second waits until the runs the first let in have
        been told, so whoever returns from pause() or stop() sees the next run already started."""
        with self._slot_lock:
            with self._lock:
                if not self._in_queue or self._status in (State.RUNNING, State.QUEUED):
                    return
                self._in_queue = False
                notify = self.queue.release_later(self)
            notify()

    # -- the reader thread ---------------------------------------------------------------------------
    def _read(self, conn, proc) -> None:
        try:
            while True:
                try:
                    message = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    break
                self._receive(message)
        finally:
            self._worker_ended(conn, proc)

    def _receive(self, message: tuple) -> None:
        with self._lock:
            self._apply(message)
            self._lock.notify_all()
        self._settle_slot()

    def _apply(self, message: tuple) -> None:
        kind = message[0]
        if kind == "progress":
            _, seq, p, final, weights = message
            if weights is not None:
                self._weights = weights
            self._progress = (p["step"], p["elapsed"], p["loss"], p["steps_per_s"])
            self._history[p["history_from"]:] = p["history"]
            self._probes[p["probes_from"]:] = p["probes"]
            current = seq == self._sent and not (self._status == State.QUEUED and p["state"] == State.PAUSED)
            if final or current:
                self._status, self._reason, self._error = p["state"], p["reason"], p["error"]
            self._acked = max(self._acked, seq)
        elif kind == "parked" and not self._stopping:  # the worker sent the run's state and ends (the reader
            self._parked, self._acked = message[2], max(self._acked, message[1])  # thread reaps it); stopping:
            self._proc, self._conn, self._ready = None, None, False  # it just ends, as stop() expects
            if self._status == State.RUNNING:  # resumed while it parked: a new worker goes on from the state
                self._spawn()
        elif kind == "ready":
            self._parked = None  # restored in the new worker
            self._model_config = ModelConfig.from_dict(message[1])
            self._tokenizer = tokenizer_from_dict(message[2])
            self._ready = True
            if hasattr(self.probe, "text"):
                self._send(("probe_text", self.probe.text))
            if self._status == State.RUNNING:
                self._send_mode()
        elif kind == "failed":  # the worker could not build its run
            self._status, self._reason, self._error = State.ERROR, Ending.ERROR, message[1]
        elif kind == "goodbye":
            self._goodbye = True

    def _worker_ended(self, conn, proc) -> None:
        try:
            proc.wait(EXIT_GRACE)
        except subprocess.TimeoutExpired:  # it closed the pipe but hangs: it can no longer be told anything
            proc.kill()
            proc.wait()
        conn.close()
        self.queue.worker_ended(self)
        with self._lock:
            if proc is not self._proc:  # a parked run's worker: the run goes on (in a new worker, when it steps)
                return
        self._mark_ended(lambda step: _death_message(proc.returncode, step))

    def _mark_ended(self, death_message: Callable[[int], str]) -> None:
        """The worker is gone: without its goodbye (and unasked) it was killed, death_message(step) says
        how; the slot goes back, then join() returns."""
        with self._lock:
            self._ready = False
            if not self._goodbye:
                if self._stopping:
                    self._status, self._reason = State.STOPPED, Ending.STOPPED
                elif self._status != State.ERROR:
                    self._status, self._reason = State.ERROR, Ending.KILLED
                    self._error = death_message(self._progress[0])
            elif self._status in (State.RUNNING, State.PAUSED, State.QUEUED):  # it ended without a final word on it
                self._status, self._reason = State.STOPPED, self._reason or Ending.STOPPED
        self._settle_slot()  # before join() returns: the next run in line has started by then
        with self._lock:
            self._ended.set()
            self._lock.notify_all()
