"""Fair capacity for training workers: at most `limit` runs train at once on a server, the rest wait in
one first-come-first-served queue of at most `max_queued` runs, and a run beyond that is refused.

A RunQueue only counts slots; it never starts a process itself. Its user (transformer.runs.process_job.ProcessJob)
asks for a slot with acquire() whenever it wants to step (start, resume, step(n)) and gives it back with
release() whenever it stops stepping: paused, stopped, finished, failed or killed. A paused run keeps its
worker process (and its weights) but not its slot: a class where someone paused and walked away must not
hold everyone else up, and a paused process uses memory but no CPU. Resuming asks for a slot again, at the
back of the queue when the server is full.

Limits come from the settings AP_MAX_RUNS (default: the CPU cores) and AP_MAX_QUEUED (default 32), read when
a RunQueue is built. server_queue() is the process-wide queue every ProcessJob uses unless it is
given its own. Nothing here imports streamlit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from transformer import settings
from transformer.i18n import t

from .job import JobLimitError



class QueueFullError(JobLimitError):
    """Every slot is taken and the queue is full; the message says how full and what to do.
    (A JobLimitError, so code that caught TrainingJob's per-process limit catches this too.)"""


def _limit(name: str, value: int | None) -> int:
    """`value`, held to the bounds of the setting `name`, or that setting's value (transformer.settings)."""
    return settings.get(name) if value is None else settings.SETTINGS[name].check(value)


class RunQueue:
    """Thread-safe slots and a FIFO queue. Items are any hashable objects (ProcessJobs).

    acquire(item, on_grant) -> 0 when the item holds a slot now, k >= 1 when it is k-th in line; when its
    turn comes, on_grant() is called (from the thread whose release() freed the slot, never under the
    queue's lock) and the item holds a slot. QueueFullError when it can neither run nor wait.
    release(item) frees its slot or takes it out of the line, and grants freed slots to the next in line.
    """

    def __init__(self, limit: int | None = None, max_queued: int | None = None):
        self.limit = _limit("AP_MAX_RUNS", limit)
        self.max_queued = _limit("AP_MAX_QUEUED", max_queued)
        self._lock = threading.Lock()
        self._running: set[Hashable] = set()
        self._waiting: OrderedDict[Hashable, Callable[[], None]] = OrderedDict()

    def acquire(self, item: Hashable, on_grant: Callable[[], None]) -> int:
        """A slot now (0), or a place in line (k-th, k >= 1: k - 1 runs wait ahead of it). An item that
        already holds a slot or waits keeps it (its first on_grant stays)."""
        with self._lock:
            if item in self._running:
                return 0
            if item in self._waiting:
                return list(self._waiting).index(item) + 1
            if len(self._running) < self.limit and not self._waiting:
                self._running.add(item)
                return 0
            if len(self._waiting) >= self.max_queued:
                raise QueueFullError(t("messages.server_full", running=len(self._running), limit=self.limit,
                                       waiting=len(self._waiting)))
            self._waiting[item] = on_grant
            return len(self._waiting)

    def release(self, item: Hashable) -> None:
        """`item` no longer runs or waits (no-op when it did neither); the next in line get the freed slots."""
        self.release_later(item)()

    def release_later(self, item: Hashable) -> Callable[[], None]:
        """release() in two halves, for a caller holding a lock of its own: the slot is freed now, and the
        returned function (call it once that lock is released) tells the runs that got slots."""
        with self._lock:
            self._running.discard(item)
            self._waiting.pop(item, None)
            granted = []
            while self._waiting and len(self._running) < self.limit:
                nxt, on_grant = self._waiting.popitem(last=False)
                self._running.add(nxt)
                granted.append(on_grant)

        def notify() -> None:
            for on_grant in granted:
                on_grant()

        return notify

    def position(self, item: Hashable) -> int | None:
        """0 while it holds a slot; k when it is k-th in line (k - 1 runs wait ahead of it); None otherwise
        (never queued, paused, ended)."""
        with self._lock:
            if item in self._running:
                return 0
            if item in self._waiting:
                return list(self._waiting).index(item) + 1
            return None

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)


_server_queue: RunQueue | None = None
_server_queue_lock = threading.Lock()


def server_queue() -> RunQueue:
    """The process-wide RunQueue (built on first use from AP_MAX_RUNS / AP_MAX_QUEUED)."""
    global _server_queue
    with _server_queue_lock:
        if _server_queue is None:
            _server_queue = RunQueue()
        return _server_queue
