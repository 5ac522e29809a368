"""ProcessJob: training in a worker process, with TrainingJob's guarantees; the device setting.

Every test here starts real worker processes (fresh interpreters that import torch: the slow part), so
the tests share workers where they can and tiny models keep the training itself short.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import pytest
import torch
from helpers.jobs import (
    child_pids, finished_at_max_steps, pauses_steps_and_stops, starts_paused_then_steps_and_runs, waiter,
)
from helpers.worker_probes import FailingProbe, TextProbe

from transformer.network.decoding import greedy_decode
from transformer.runs.job import JobLimitError, JobSnapshot
from transformer.runs.probe import Probe
from transformer.runs.process_job import ProcessJob
from transformer.runs.queue import QueueFullError, RunQueue
from transformer.runs.relay import WEIGHTS_EVERY, Relay
from transformer.runs.thread_job import TrainingJob
from transformer.training.config import TrainConfig
from transformer.training.devices import resolve_device
from transformer.training.trainer import Trainer

TINY_MODEL = {"n_enc_layers": 1, "n_dec_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}
TINY_TRAIN = TrainConfig(task="copy", task_params={"min_len": 1, "max_len": 4}, steps=100_000, batch_size=8,
                         lr=3e-3, warmup=5, eval_every=10, eval_samples=8, confirm_samples=16, device="cpu")
BOOT = 60.0  # seconds a worker may take to start: importing torch takes 2 s idle, far more on a loaded machine
wait_for = waiter(BOOT, "the worker")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture
def make_job():
    """ProcessJobs on their own queue (limit 4), stopped afterwards; then no worker process is left."""
    before = child_pids()
    queue = RunQueue(limit=4, max_queued=4)
    jobs = []

    def make(train: TrainConfig = TINY_TRAIN, **kwargs):
        job = ProcessJob(train, TINY_MODEL, **{"queue": queue, **kwargs})
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.stop(timeout=0)
    for job in jobs:
        assert job.join(timeout=BOOT)
    assert queue.running == queue.waiting == 0
    assert child_pids() <= before


# -- lifecycle ----------------------------------------------------------------------------------------
def test_start_pause_resume_step_stop(make_job):
    job = make_job(probe=TextProbe("ab", delay=0.02), probe_every=1)  # a slow probe: every step takes 20+ ms
    starts_paused_then_steps_and_runs(job, wait_for)
    pauses_steps_and_stops(job, wait_for)
    assert job.pid not in child_pids()  # ended and reaped


def test_runs_finish_at_max_steps_at_the_target_and_without_heartbeats(make_job):
    at_max = make_job(max_steps=15, probe=Probe("abc"), probe_every=5)  # the app's probe
    at_target = make_job(target_exact_match=0.0)  # any model reaches 0%
    unattended = make_job(idle_timeout=0.5)
    for job in (at_max, at_target, unattended):
        job.start()
    for job in (at_max, at_target, unattended):
        assert job.join(timeout=BOOT)

    result = finished_at_max_steps(at_max)
    assert result.cross.shape[:2] == (1, 2) and result.cross.shape[3] == len(result.source_pieces)

    snap = at_target.snapshot()
    assert (snap.state, snap.finished_reason, snap.step) == ("finished", "target reached", 10)
    assert [(r["decoding"], r["samples"]) for r in snap.history] == [("teacher_forced", 8), ("greedy", 16)]
    assert unattended.snapshot().finished_reason == "session gone"


def test_an_error_in_the_worker_is_reported_with_the_last_snapshot(make_job):
    job = make_job(probe=FailingProbe(at=6), probe_every=3)
    job.start()
    assert job.join(timeout=BOOT)
    snap = job.snapshot()
    assert snap.state == "error" and snap.finished_reason == "error"
    assert "FloatingPointError: probe failed on purpose at step 6" in snap.error
    assert snap.step == 6 and snap.probes == [(0, 0), (3, 3)]  # what the run had got to stays
    assert job.bundle().card["steps"] == 6


def test_stop_ends_a_worker_within_a_second_even_mid_step_and_keeps_the_last_weights(make_job):
    job = make_job(probe=TextProbe("ab", delay=30.0), probe_every=5)  # every probe takes 30 s
    job.start()
    wait_for(lambda: job.snapshot().state == "running" and job.pid is not None, what="the run to start")
    time.sleep(1.0)  # inside the first probe now (or a step): either way, not between steps for 29 s
    pid = job.pid
    began = time.monotonic()
    job.stop()
    took = time.monotonic() - began
    assert took < 1.5, took  # STOP_GRACE (1 s), then the worker is ended: not 30 s
    snap = job.snapshot()
    assert snap.state == "stopped" and job.join(0)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid), timeout=5, what="the worker to end")
    bundle = job.bundle()  # the weights it last sent (taken between steps), with the step they are from
    assert 0 <= bundle.card["steps"] <= snap.step


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_worker_killed_from_outside_is_reported_and_its_weights_stay(make_job):
    job = make_job()
    job.start()
    wait_for(lambda: job.snapshot().step >= 12)
    weights_at = job.bundle().card["steps"]  # the worker sends its weights now
    os.kill(job.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: job.snapshot().state == "error", timeout=5.0, what="the kill to be noticed")
    assert time.monotonic() - killed_at < 3.0
    snap = job.snapshot()
    assert snap.finished_reason == "killed" and "SIGKILL" in snap.error and snap.step >= weights_at
    assert snap.history and snap.history[0]["step"] == 10  # the last snapshot is kept
    assert job.join(timeout=0) and job.position() is None
    bundle = job.bundle()  # the last weights the worker sent, without a worker
    assert weights_at <= bundle.card["steps"] <= snap.step
    assert greedy_decode(bundle.model, bundle.tokenizer, "ab").output_pieces


def test_twenty_start_stop_cycles_leave_no_process_or_thread(make_job):
    before, before_threads = child_pids(), threading.active_count()
    for i in range(20):
        job = make_job()
        job.start(paused=i % 2 == 1)
        job.stop()  # still starting up: it is ended at once, there is nothing to save yet
        assert job.join(timeout=0) and job.snapshot().state == "stopped"
    wait_for(lambda: threading.active_count() <= before_threads, timeout=5, what="reader threads to end")
    assert child_pids() <= before  # (the fixture checks again after stopping every job)


# -- capacity -------------------------------------------------------------------------------------------
def test_runs_beyond_the_limit_wait_in_line_in_order(make_job):
    queue = RunQueue(limit=1, max_queued=2)
    first, second, third, fourth = (make_job(queue=queue) for _ in range(4))
    first.start()
    second.start()
    third.start()
    assert [job.position() for job in (first, second, third)] == [0, 1, 2]
    assert [job.snapshot().state for job in (first, second, third)] == ["running", "queued", "queued"]
    assert second.pid is None and third.pid is None  # no process until its turn
    with pytest.raises(QueueFullError, match="1 training runs are running .* 2 are waiting") as refused:
        fourth.start()
    assert isinstance(refused.value, JobLimitError) and fourth.snapshot().state == "idle"

    first.pause()  # a paused run gives its slot to the next in line
    assert [job.position() for job in (first, second, third)] == [None, 0, 1]
    assert second.snapshot().state == "running" and second.pid is not None
    first.resume()  # and asks again at the back of the line
    assert first.snapshot().state == "queued" and first.position() == 2
    second.stop()
    assert [job.position() for job in (first, third)] == [1, 0] and third.snapshot().state == "running"
    third.pause()
    wait_for(lambda: first.snapshot().step >= 1)  # its own worker, paused meanwhile, trains on
    assert first.position() == 0
    first.stop()  # a running worker: stop() returns once it has ended, between steps
    assert first.join(timeout=0) and first.snapshot().state == "stopped" and queue.running == 0
    assert first.bundle().card["steps"] == first.snapshot().step


def test_a_training_job_changes_its_probe_text_the_same_way():
    probe = TextProbe("ab")
    job = TrainingJob(Trainer(TINY_TRAIN, TINY_MODEL), probe=probe, probe_every=1)
    job.set_probe_text("ba")
    job.step(1)
    wait_for(lambda: job.snapshot().state == "paused" and job.snapshot().step == 1)
    job.stop()
    assert job.join(timeout=20) and probe.text == "ba" and job.snapshot().probes == [(0, "ba"), (1, "ba")]
    TrainingJob(Trainer(TINY_TRAIN, TINY_MODEL)).set_probe_text("no probe: nothing to change")


# -- settings checked before any process starts ------------------------------------------------------------
def test_bad_settings_and_unpicklable_probes_are_refused_at_once():
    with pytest.raises(ValueError, match="lr"):
        ProcessJob(dataclasses.replace(TINY_TRAIN, lr=-1.0))
    with pytest.raises(ValueError, match="max_len come from the task"):
        ProcessJob(TINY_TRAIN, {"max_len": 8})
    with pytest.raises(ValueError, match="divisible"):
        ProcessJob(TINY_TRAIN, {"d_model": 16, "n_heads": 3})
    with pytest.raises(ValueError, match="must be picklable"):
        ProcessJob(TINY_TRAIN, probe=lambda bundle: None)
    with pytest.raises(ValueError, match="threads"):
        ProcessJob(TINY_TRAIN, threads=0)
    with pytest.raises(ValueError, match="step count"):
        ProcessJob(TINY_TRAIN).step(0)


# -- device ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["gpu", "CUDA", "", None, 0])
def test_an_unknown_device_is_refused_everywhere(bad):
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda"):
        resolve_device(bad)
    with pytest.raises(ValueError, match="device must be one of"):
        dataclasses.replace(TINY_TRAIN, device=bad).validate()
    with pytest.raises(ValueError, match="device must be one of"):
        Trainer(dataclasses.replace(TINY_TRAIN, device=bad))
    with pytest.raises(ValueError, match="device must be one of"):
        ProcessJob(dataclasses.replace(TINY_TRAIN, device=bad))


@no_cuda
def test_cuda_without_cuda_is_refused_with_the_reason():
    cuda = dataclasses.replace(TINY_TRAIN, device="cuda")
    for build in (cuda.validate, lambda: Trainer(cuda), lambda: ProcessJob(cuda)):
        with pytest.raises(ValueError, match=r"'cuda' was asked for, but torch.cuda.is_available\(\) is False"):
            build()


@no_cuda
def test_auto_means_the_cpu_here_and_old_settings_load_as_auto():
    old = {k: v for k, v in TINY_TRAIN.to_dict().items() if k != "device"}  # saved before `device` existed
    config = TrainConfig.from_dict(old)
    assert config.device == "auto" and resolve_device("auto") == torch.device("cpu")
    trainer = Trainer(config, TINY_MODEL)
    trainer.step()
    trainer.evaluate()
    assert trainer.device == torch.device("cpu") and trainer.bundle().card["train"]["device"] == "auto"


class SteppingOn:
    """A running job whose weight copy, waiting for the step under way, finds two more steps taken (as a loaded
    worker's did: weights of step 323 beside progress of step 321)."""

    def __init__(self):
        self.step = 10

    def snapshot(self) -> JobSnapshot:
        return JobSnapshot(self.step, "running", [], [], None, 50.0, 1.0, None, 0.5, 1000, None)

    def bundle(self):
        self.step += 2
        return dataclasses.replace(Trainer(TINY_TRAIN, TINY_MODEL).bundle(), card={"steps": self.step})


def test_the_worker_sends_weights_with_progress_taken_after_them():
    """In one message, so a worker killed between two messages never leaves the parent with weights ahead of the
    progress it shows (a CI run's worker left weights of step 175 beside progress of step 167)."""
    sent = []
    relay = Relay(None, SteppingOn())
    relay.send = sent.append
    relay.weights_time -= WEIGHTS_EVERY + 1  # a copy is due
    relay.publish()
    [(kind, _, shown, _, (card, blob))] = sent
    assert kind == "progress" and blob
    assert card["steps"] == 12 and shown["step"] >= card["steps"], (card, shown["step"])
    relay.publish()  # nothing changed and no copy due: nothing sent
    assert len(sent) == 1


@needs_cuda
def test_training_on_cuda_keeps_bundles_and_probes_on_the_cpu(make_job):
    trainer = Trainer(dataclasses.replace(TINY_TRAIN, device="cuda"), TINY_MODEL)
    assert next(trainer.model.parameters()).is_cuda
    trainer.step()
    trainer.evaluate()
    trainer.evaluate(greedy=False)
    assert all(not p.is_cuda for p in trainer.bundle().model.parameters())
    job = make_job(dataclasses.replace(TINY_TRAIN, device="cuda"), max_steps=12, probe=TextProbe("ab"))
    job.start()
    assert job.join(timeout=BOOT) and job.snapshot().state == "finished"
    assert all(not p.is_cuda for p in job.bundle().model.parameters())
