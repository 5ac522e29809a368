"""Fair capacity for training workers: at most `limit` runs train at once on a server, the rest wait in
one first-come-first-served queue of at most `max_queued` runs, and a run beyond that is refused; no session
(owner) and no client has more than its share of live runs; and live worker processes, paused ones included,
stay within `max_workers`.

A RunQueue only counts; it never starts a process itself. Its user (transformer.runs.process_job.ProcessJob):
- asks `admit` when a run starts (RunLimitError when its owner, or its client, already has `per_session`, or
  `per_client`, runs live: queued, training or paused) and is forgotten once it has ended;
- asks for a slot with acquire() whenever it wants to step (start, resume, step(n)) and gives it back with
  release() whenever it stops stepping: paused, stopped, finished, failed or killed. A paused run does not hold
  everyone else up; resuming asks for a slot again, at the back of the queue when the server is full;
- tells `worker_started` / `worker_ended` about its worker process. A paused run keeps its worker (a Step
  costs no start-up) until `park_idle` asks it to `park()`: hand its whole state to the server and end its
  worker, to start a new one from that state, exactly, when it steps again. park_idle parks runs paused for
  `park_after` seconds, and, while more than `max_workers` workers live, the longest-paused ones at once (the
  workers' keeper calls it every few seconds; a run that starts a worker past the cap calls it too).

Limits come from the settings AP_MAX_RUNS (default: the CPU cores), AP_MAX_QUEUED (32), AP_RUNS_PER_SESSION (1),
AP_RUNS_PER_CLIENT (3), AP_MAX_WORKERS (twice the cores) and AP_PARK_AFTER_S (120), read when a RunQueue is built.
server_queue() is the process-wide queue every ProcessJob uses unless it is given its own. Nothing here imports
streamlit.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable

from transformer import settings
from transformer.i18n import t

from .job import JobLimitError



class QueueFullError(JobLimitError):
    """Every slot is taken and the queue is full; the message says how full and what to do.
    (A JobLimitError, so code that caught TrainingJob's per-process limit catches this too.)"""


class RunLimitError(JobLimitError):
    """A session, or a client, already has as many live runs as it may; the message says which and what to do."""


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

    def __init__(self, limit: int | None = None, max_queued: int | None = None, per_session: int | None = None,
                 per_client: int | None = None, max_workers: int | None = None, park_after: float | None = None):
        self.limit = _limit("AP_MAX_RUNS", limit)
        self.max_queued = _limit("AP_MAX_QUEUED", max_queued)
        self.per_session = _limit("AP_RUNS_PER_SESSION", per_session)
        self.per_client = _limit("AP_RUNS_PER_CLIENT", per_client)
        self.max_workers = _limit("AP_MAX_WORKERS", max_workers)
        self.park_after = _limit("AP_PARK_AFTER_S", park_after)
        self._lock = threading.Lock()
        self._running: set[Hashable] = set()
        self._waiting: OrderedDict[Hashable, Callable[[], None]] = OrderedDict()
        self._live: dict[Hashable, tuple[str | None, str | None]] = {}  # admitted runs -> (owner, client)
        self._workers: Counter = Counter()  # runs -> their live worker processes (two while one hands over)

    # -- shares of live runs ----------------------------------------------------------------------------
    def admit(self, item, owner: str | None, client: str | None) -> None:
        """Count `item` (a run starting) against its owner's and client's shares of live runs (None: not
        counted); RunLimitError when either is full. Runs whose `ended()` is true are forgotten first."""
        with self._lock:
            self._live = {run: who for run, who in self._live.items() if not run.ended()}
            if item in self._live:
                return
            for index, (name, limit) in enumerate(((owner, self.per_session), (client, self.per_client))):
                live = sum(who[index] == name for who in self._live.values()) if name is not None else 0
                if name is not None and limit and live >= limit:
                    raise RunLimitError(_share_message(index == 0, live, limit))
            self._live[item] = (owner, client)

    def leave(self, item) -> None:
        """`item` no longer counts as live (it never started after all)."""
        with self._lock:
            self._live.pop(item, None)

    # -- live workers -----------------------------------------------------------------------------------
    def worker_started(self, item) -> None:
        with self._lock:
            self._workers[item] += 1

    def worker_ended(self, item) -> None:
        with self._lock:
            self._workers[item] -= 1
            if self._workers[item] <= 0:
                del self._workers[item]

    @property
    def workers(self) -> int:
        """Live worker processes of runs (the spare worker, waiting for a run, is not one)."""
        with self._lock:
            return sum(self._workers.values())

    def park_idle(self, now: float | None = None) -> list:
        """Ask runs to hand their worker back (`park()`): those paused for `park_after` seconds, and while more
        workers live than `max_workers`, the longest-paused ones. Returns the runs that parked. Call it without
        holding any run's lock."""
        with self._lock:
            owners = list(self._workers)
            excess = sum(self._workers.values()) - self.max_workers
        paused = sorted((since, id(run), run) for run in owners if (since := run.paused_since()) is not None)
        now = time.monotonic() if now is None else now
        chosen = [run for rank, (since, _, run) in enumerate(paused) if rank < excess or now - since >= self.park_after]
        return [run for run in chosen if run.park()]

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


def _share_message(session: bool, live: int, limit: int) -> str:
    return t("messages.runs_share.session" if session else "messages.runs_share.client", n=live, limit=limit)


_server_queue: RunQueue | None = None
_server_queue_lock = threading.Lock()


def server_queue() -> RunQueue:
    """The process-wide RunQueue (built on first use from AP_MAX_RUNS / AP_MAX_QUEUED)."""
    global _server_queue
    with _server_queue_lock:
        if _server_queue is None:
            _server_queue = RunQueue()
        return _server_queue
