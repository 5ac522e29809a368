"""The worker's side of a training run in a process of its own (transformer.runs.process_job's ProcessJob, and
transformer.runs.ray_job's actor): build the run from the spec the server sent, start it paused, then relay
commands in and progress and weights out over a connection until the run ends or the server goes.

The messages are tuples, pickled with the plain pickler and sent as bytes (`dumps`): commands ("pause", seq),
("resume", seq), ("step", seq, n), ("stop", seq), ("bundle", seq), ("park", seq), ("heartbeat",),
("probe_text", text); answers ("ready", model config, tokenizer), ("progress", seq, progress, final, weights),
("parked", seq, state), ("failed", message), ("goodbye",). ProcessJob's docstring says what each side promises.
"""

from __future__ import annotations

import io
import pickle
import signal
import time

import torch

from transformer.training.trainer import Trainer

from .job import State
from .thread_job import TrainingJob

PUBLISH_EVERY = 0.1  # seconds between the worker's progress messages (only sent when something changed)
WEIGHTS_EVERY = 2.0  # seconds between weight copies a running worker sends (what survives a SIGKILL)
CHILD_SETTLE = 600.0  # seconds the worker waits for its step under way on pause / stop (the parent waits less)


def dumps(message) -> bytes:
    """A message as the pipe carries it: pickled with the plain pickler, as bytes (no tensor in shared memory)."""
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _dumps_state(saved: dict) -> bytes:
    """A paused job's `saved()` as bytes: the trainer's tensors through torch.save, the probes pickled."""
    buffer = io.BytesIO()
    torch.save(saved["trainer"], buffer)
    return dumps({**saved, "trainer": buffer.getvalue()})


def _loads_state(blob: bytes) -> dict:
    saved = pickle.loads(blob)
    return {**saved, "trainer": torch.load(io.BytesIO(saved["trainer"]), weights_only=True)}


def _state_bytes(model: torch.nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def worker_main(conn, spec: dict) -> None:
    """The worker process: build the run, start it paused, then relay until it ends or the server goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(conn, spec)


def serve(conn, spec: dict) -> None:
    """Build the run, start it paused, then relay over `conn` until the run ends or `conn` does (EOFError
    or OSError: the server is gone). `conn` is a multiprocessing Connection, or anything with its
    send_bytes / recv_bytes / poll (transformer.runs.ray_job runs this in a thread of a Ray actor)."""
    try:
        torch.set_num_threads(spec["threads"])
        trainer = Trainer(spec["train"], spec["model"])
        job = TrainingJob(trainer, spec["max_steps"], spec["max_seconds"], spec["target"], spec["probe"],
                          spec["probe_every"], spec["idle_timeout"], spec["threads"])
        if spec.get("resume") is not None:  # a parked run: go on from its state
            job.restore(_loads_state(spec["resume"]))
        conn.send_bytes(dumps(("ready", trainer.model.config.to_dict(), trainer.tokenizer.to_dict())))
        job.start(paused=True)
    except Exception as exc:  # noqa: BLE001 - the parent shows it; nothing was trained
        try:
            conn.send_bytes(dumps(("failed", f"{type(exc).__name__}: {exc}")))
            conn.send_bytes(dumps(("goodbye",)))
        except OSError:
            pass
        return
    try:
        Relay(conn, job).run()
    except (EOFError, OSError):  # the server is gone: stop the run and end quietly
        job.stop(timeout=CHILD_SETTLE)
    except Exception as exc:  # noqa: BLE001 - e.g. a probe result that cannot be pickled: say so, then end
        job.stop(timeout=CHILD_SETTLE)
        try:
            message = f"the worker could not report its progress: {type(exc).__name__}: {exc}"
            conn.send_bytes(dumps(("failed", message)))
            conn.send_bytes(dumps(("goodbye",)))
        except OSError:
            pass


class Relay:
    """The worker's main thread: commands in, progress and weights out."""

    def __init__(self, conn, job: TrainingJob):
        self.conn, self.job = conn, job
        self.seq = 0  # the last command handled
        self.history_sent = 0
        self.probe_steps_sent: list[int] = []
        self.last_key = None
        self.weights_step: int | None = None
        self.weights_time = time.monotonic()

    def run(self) -> None:
        while True:
            if self.conn.poll(PUBLISH_EVERY):
                if self.handle(pickle.loads(self.conn.recv_bytes())) == "parked":
                    return
            if self.job.join(0):
                self.publish(final=True)
                self.send(("goodbye",))
                return
            self.publish()

    def handle(self, message: tuple) -> str | None:
        """Apply one command; "parked" once the run's state is sent and the worker is to end."""
        kind, job = message[0], self.job
        if kind == "heartbeat":
            job.heartbeat()
            return
        if kind == "probe_text":
            if hasattr(job.probe, "text"):
                job.probe.text = message[1]
            return
        if kind == "pause":
            job.pause(timeout=CHILD_SETTLE)
        elif kind == "resume":
            job.resume()
        elif kind == "step":
            job.step(message[2])
        elif kind == "stop":
            job.stop(timeout=CHILD_SETTLE)
        elif kind == "park" and job.snapshot().state == State.PAUSED:
            self.publish(force=True)  # the weights and progress it stays at, then its whole state
            self.send(("parked", message[1], _dumps_state(job.saved())))
            job.stop(timeout=CHILD_SETTLE)
            return "parked"
        self.seq = message[1]
        self.publish(force=True, weights=kind == "bundle")
        return None

    def publish(self, force: bool = False, final: bool = False, weights: bool = False) -> None:
        """Send the progress if it changed (or `force`, `final`), with a copy of the weights if asked (`weights`),
        due (every WEIGHTS_EVERY seconds while running) or not sent yet for the step the job stays at."""
        snap = self.job.snapshot()
        stepping = snap.state == State.RUNNING
        copy = None
        due = self.weights_step != snap.step and (not stepping or time.monotonic() - self.weights_time > WEIGHTS_EVERY)
        if weights or due:
            copy = self.copy_weights()
            snap = self.job.snapshot()  # the copy waits for the step under way; a running job may take more since
        probe_steps = [step for step, _ in snap.probes]
        key = (snap.step, snap.state, len(snap.history), probe_steps[-1:], len(probe_steps), snap.error)
        if copy is None and key == self.last_key and not (force or final):
            return
        self.last_key = key
        if probe_steps[: len(self.probe_steps_sent)] == self.probe_steps_sent:
            probes_from = len(self.probe_steps_sent)
        else:  # the job thinned its probes: send them all again
            probes_from = 0
        progress = {
            "step": snap.step, "state": snap.state, "reason": snap.finished_reason, "error": snap.error,
            "elapsed": snap.elapsed, "loss": snap.loss, "steps_per_s": snap.steps_per_s,
            "history_from": self.history_sent, "history": snap.history[self.history_sent:],
            "probes_from": probes_from, "probes": snap.probes[probes_from:],
        }
        self.send(("progress", self.seq, progress, final, copy))
        self.history_sent, self.probe_steps_sent = len(snap.history), probe_steps

    def copy_weights(self) -> tuple[dict, bytes] | None:
        """(card, state_dict bytes) of the model, taken between steps on the CPU; None when no copy could be made
        (e.g. out of memory: the parent keeps older weights)."""
        try:
            bundle = self.job.bundle()
            weights = _state_bytes(bundle.model)
        except Exception:  # noqa: BLE001 - see above
            self.weights_step, self.weights_time = self.job.snapshot().step, time.monotonic()
            return None
        self.weights_step, self.weights_time = bundle.card["steps"], time.monotonic()
        return bundle.card, weights

    def send(self, message) -> None:
        self.conn.send_bytes(dumps(message))
