"""RunQueue: slots, a first-come-first-served line with positions, a full line refused, limits from the
environment. Plain objects stand in for jobs (ProcessJob's use of it is in tests/unit/test_worker.py)."""

from __future__ import annotations

import threading
import time

import pytest

from transformer import settings
from transformer.runs import queue as capacity
from transformer.runs.job import JobLimitError
from transformer.runs.queue import QueueFullError, RunQueue


class Run:
    """A stand-in job: records when the queue lets it in."""

    def __init__(self, name: str, started: list):
        self.name, self.started = name, started

    def granted(self) -> None:
        self.started.append(self.name)


def runs(*names: str):
    started: list[str] = []
    return [Run(name, started) for name in names], started


def test_slots_then_a_line_in_order_with_positions():
    queue = RunQueue(limit=1, max_queued=2)
    (a, b, c, d), started = runs("a", "b", "c", "d")
    assert [queue.acquire(run, run.granted) for run in (a, b, c)] == [0, 1, 2]
    assert [queue.position(run) for run in (a, b, c, d)] == [0, 1, 2, None]
    assert queue.acquire(b, b.granted) == 1  # asking again keeps its place
    with pytest.raises(QueueFullError, match=r"1 training runs are running \(the limit is 1\) and 2 are waiting"):
        queue.acquire(d, d.granted)
    assert queue.position(d) is None

    queue.release(a)  # the slot goes to the first in line
    assert started == ["b"] and [queue.position(run) for run in (a, b, c)] == [None, 0, 1]
    queue.release(c)  # leaving the line lets nobody in
    assert started == ["b"] and (queue.running, queue.waiting) == (1, 0)
    assert queue.acquire(d, d.granted) == 1 and queue.acquire(a, a.granted) == 2
    queue.release(b)
    queue.release(d)
    assert started == ["b", "d", "a"] and (queue.running, queue.waiting) == (1, 0)
    queue.release(a)
    queue.release(a)  # releasing twice (or something never queued) is harmless
    assert (queue.running, queue.waiting) == (0, 0)


def test_a_full_queue_is_a_job_limit_error_and_zero_means_no_line():
    queue = RunQueue(limit=2, max_queued=0)
    (a, b, c), _ = runs("a", "b", "c")
    queue.acquire(a, a.granted)
    queue.acquire(b, b.granted)
    with pytest.raises(JobLimitError, match="try again when one has finished"):
        queue.acquire(c, c.granted)


def test_grants_run_outside_the_lock_so_they_may_use_the_queue():
    queue = RunQueue(limit=1)
    (a, b, c), started = runs("a", "b", "c")

    def b_declines():  # e.g. a job stopped while it waited: it hands the slot straight on
        started.append("b")
        queue.release(b)

    queue.acquire(a, a.granted)
    queue.acquire(b, b_declines)
    queue.acquire(c, c.granted)
    queue.release_later(a)()
    assert started == ["b", "c"] and queue.position(c) == 0


def test_never_more_than_the_limit_run_under_contention():
    queue = RunQueue(limit=3, max_queued=100)
    lock, running, most = threading.Lock(), set(), [0]
    done = threading.Barrier(9)

    def enter(item):
        with lock:
            running.add(item)
            most[0] = max(most[0], len(running))

    def work(worker: int):
        for i in range(200):
            item = (worker, i)
            if queue.acquire(item, lambda item=item: enter(item)) == 0:
                enter(item)
            while queue.position(item) != 0:
                time.sleep(0)
            with lock:
                running.discard(item)
            queue.release(item)
        done.wait()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    done.wait()
    for thread in threads:
        thread.join()
    assert most[0] <= 3 and (queue.running, queue.waiting) == (0, 0)


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("AP_MAX_RUNS", " 3 ")
    monkeypatch.setenv("AP_MAX_QUEUED", "0")
    queue = RunQueue()
    assert (queue.limit, queue.max_queued) == (3, 0)
    assert RunQueue(limit=5, max_queued=7).limit == 5  # arguments win
    monkeypatch.delenv("AP_MAX_RUNS")
    monkeypatch.delenv("AP_MAX_QUEUED")
    monkeypatch.setattr(settings.os, "cpu_count", lambda: 6)
    assert (RunQueue().limit, RunQueue().max_queued) == (6, 32)


@pytest.mark.parametrize(("env", "value", "message"), [
    ("AP_MAX_RUNS", "two", "the environment variable AP_MAX_RUNS must be a whole number from 1 to 10000, got 'two'"),
    ("AP_MAX_RUNS", "0", "AP_MAX_RUNS must be a whole number from 1 to 10000, got '0'"),
    ("AP_MAX_RUNS", "1e9", "must be a whole number"),
    ("AP_MAX_QUEUED", "-1", "AP_MAX_QUEUED must be a whole number from 0 to 10000, got '-1'"),
    ("AP_MAX_QUEUED", "99999", "got '99999'"),
])
def test_absurd_limits_are_refused_by_name(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=message):
        RunQueue()


@pytest.mark.parametrize("limit", [0, -1, True, 2.0, 10**6])
def test_absurd_limit_arguments_are_refused(limit):
    with pytest.raises(ValueError, match="^AP_MAX_RUNS must be a whole number from 1 to 10000"):
        RunQueue(limit=limit)


def test_the_server_queue_is_one_per_process(monkeypatch):
    monkeypatch.setattr(capacity, "_server_queue", None)
    monkeypatch.setenv("AP_MAX_RUNS", "2")
    first = capacity.server_queue()
    assert first is capacity.server_queue() and first.limit == 2
