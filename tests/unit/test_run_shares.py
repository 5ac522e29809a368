"""Fair shares of the runs: a session and a client have at most their share of live runs; a paused run hands its
worker back (idle, or past the server's cap on live workers) and resumes from its state exactly: its losses,
history, probes and weights are those of a run that never paused, bit for bit on the CPU."""

from __future__ import annotations

import time

import pytest
import torch
from helpers.jobs import waiter

from transformer.runs.job import JobLimitError
from transformer.runs.probe import Probe
from transformer.runs.process_job import ProcessJob
from transformer.runs.queue import RunLimitError, RunQueue
from transformer.training.config import TrainConfig

MODEL = {"n_enc_layers": 1, "n_dec_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32, "dropout": 0.1}
TRAIN = TrainConfig(task="copy", task_params={"min_len": 1, "max_len": 4}, steps=100_000, batch_size=8, lr=3e-3,
                    warmup=5, eval_every=10, eval_samples=8, confirm_samples=16, device="cpu", optimizer="muon")
BOOT = 90.0  # seconds a worker may take to start on a loaded machine
wait_for = waiter(BOOT, "the worker")


def stepped(job: ProcessJob, steps: int) -> None:
    """Run exactly `steps` more steps and wait until the job is paused at them."""
    target = job.snapshot().step + steps
    job.step(steps)
    wait_for(lambda: job.snapshot().step == target and job.snapshot().state == "paused", what=f"step {target}")


class Item:
    """A run as the queue sees it, without a process."""

    def __init__(self):
        self.over = False

    def ended(self) -> bool:
        return self.over


def test_a_session_and_a_client_have_at_most_their_share_of_live_runs():
    queue = RunQueue(limit=1, max_queued=10, per_session=1, per_client=2)
    mine, again = Item(), Item()
    queue.admit(mine, "me", None)
    with pytest.raises(RunLimitError, match="this session already has 1 training run") as refused:
        queue.admit(again, "me", None)
    assert isinstance(refused.value, JobLimitError)  # the Train page's "Cannot start" catches it
    queue.admit(Item(), "tab1", "laptop")
    queue.admit(Item(), "tab2", "laptop")
    with pytest.raises(RunLimitError, match="2 training runs started from your computer"):
        queue.admit(Item(), "tab3", "laptop")
    queue.admit(Item(), "tab3", "other")
    queue.admit(Item(), "tab4", None)  # an address the server cannot tell (localhost): no client share
    mine.over = True  # once it has ended, the session may start another
    queue.admit(again, "me", None)
    queue.leave(again)
    queue.admit(Item(), "me", None)


@pytest.fixture
def jobs(request):
    """`jobs(queue, **kwargs)`: a ProcessJob of the tiny run on `queue`, stopped and joined when the test ends."""

    def make(queue: RunQueue, **kwargs) -> ProcessJob:
        job = ProcessJob(TRAIN, MODEL, queue=queue, probe=Probe("abc"), probe_every=7, **kwargs)
        request.addfinalizer(lambda: ended(job))
        return job

    return make


def ended(job: ProcessJob) -> None:
    job.stop(timeout=0)
    assert job.join(BOOT)


def test_start_refuses_past_the_session_share_and_changes_nothing(jobs):
    queue = RunQueue(limit=1, max_queued=4, per_session=1, per_client=0)
    first = jobs(queue, owner="me")
    first.start(paused=True)
    second = jobs(queue, owner="me")
    with pytest.raises(RunLimitError, match="stop it on the Train page first"):
        second.start()
    assert second.snapshot().state == "idle" and second.pid is None and queue.running == 0
    first.stop()
    second.start()  # the first has ended: room again
    assert second.snapshot().state in ("running", "queued")


def test_a_parked_run_resumes_exactly_where_it_paused(jobs):
    queue = RunQueue(limit=2, max_queued=4, max_workers=4, park_after=3600)
    straight, parked = jobs(queue), jobs(queue)
    straight.start(paused=True)
    parked.start(paused=True)
    stepped(straight, 53)
    stepped(parked, 23)
    pid = parked.pid
    assert parked.park() and parked.pid is None and parked.snapshot().parked
    assert parked.snapshot().state == "paused" and parked.snapshot().step == 23
    wait_for(lambda: queue.workers == 1, what="the parked worker to end")
    assert parked.bundle().card["steps"] == 23  # its weights stay readable while parked
    stepped(parked, 30)  # a new worker, from the state the old one sent
    assert parked.pid not in (None, pid) and not parked.snapshot().parked
    a, b = straight.snapshot(), parked.snapshot()
    assert a.loss == b.loss and a.step == b.step == 53
    assert [{k: v for k, v in row.items() if k != "seconds"} for row in a.history] == \
        [{k: v for k, v in row.items() if k != "seconds"} for row in b.history]
    assert [step for step, _ in a.probes] == [step for step, _ in b.probes] == list(range(0, 53, 7))
    for (_, x), (_, y) in zip(a.probes, b.probes):  # the probe's decodes: the same output, the same attention
        assert x.output_text == y.output_text and torch.equal(torch.as_tensor(x.cross), torch.as_tensor(y.cross))
    for (name, x), y in zip(straight.bundle().model.state_dict().items(), parked.bundle().model.state_dict().values()):
        assert torch.equal(x, y), name


def test_idle_paused_runs_and_runs_past_the_worker_cap_hand_their_workers_back(jobs):
    queue = RunQueue(limit=3, max_queued=4, max_workers=2, park_after=3600)
    first, second, third = jobs(queue), jobs(queue), jobs(queue)
    for job in (first, second):
        job.start(paused=True)
        stepped(job, 2)
    assert queue.park_idle() == []  # two workers, the cap: nothing to do yet
    time.sleep(0.05)
    third.start(paused=True)  # a third worker: the longest-paused run hands its worker back
    wait_for(lambda: first.snapshot().parked, what="the longest-paused run to park")
    assert not second.snapshot().parked
    wait_for(lambda: queue.workers == 2, what="its worker to end")
    stepped(third, 2)
    later = RunQueue(limit=3, max_queued=4, max_workers=8, park_after=0)
    assert later.park_idle() == []  # another server's queue knows none of these workers
    queue.park_after = 0.0
    assert set(queue.park_idle()) == {second, third}  # idle past park_after: parked, whatever the cap
    wait_for(lambda: queue.workers == 0, what="the workers to end")
    stepped(first, 1)
    assert first.snapshot().step == 3 and not first.snapshot().parked


def test_a_run_that_starts_paused_then_steps_after_parking_counts_once(jobs):
    queue = RunQueue(limit=1, max_queued=4, per_session=1, max_workers=1, park_after=0)
    job = jobs(queue, owner="me")
    job.start(paused=True)
    stepped(job, 1)
    assert queue.park_idle() == [job] and job.snapshot().parked
    with pytest.raises(RunLimitError):  # still the session's live run while parked
        jobs(queue, owner="me").start()
    job.resume()
    wait_for(lambda: job.snapshot().step >= 3 and not job.snapshot().parked, what="the resumed run")
    job.pause()
    assert job.snapshot().state == "paused"


def test_step_on_a_fresh_run_counts_against_the_share_and_a_waiting_worker_parks(jobs):
    queue = RunQueue(limit=1, max_queued=4, per_session=1, max_workers=4, park_after=0)
    first = jobs(queue, owner="me")
    first.step(2)  # Step N on a run never started: it starts, and counts as the session's live run
    with pytest.raises(RunLimitError):
        jobs(queue, owner="me").step(1)
    wait_for(lambda: first.snapshot().step == 2 and first.snapshot().state == "paused", what="two steps")
    other = jobs(queue, owner="other")
    other.start()  # takes the one slot
    first.resume()  # waits in line, its worker paused: it too hands its worker back
    assert first.snapshot().state == "queued"
    wait_for(lambda: queue.park_idle() == [first] or first.snapshot().parked, what="the waiting run to park")
    other.stop()  # its turn: a new worker from its state
    wait_for(lambda: first.snapshot().step > 2 and not first.snapshot().parked, what="the run to go on")
