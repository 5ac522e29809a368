"""The worker processes a server keeps, and the keeper that watches its runs.

- Nice levels: workers run AP_WORKER_NICE levels below the server (default 10), so a page's script run wins a
  contended core from training.
- The spare worker: a worker's start-up (a fresh interpreter importing torch: 2-4 s of CPU) would come after
  Start. `prepare_spare()` starts one ahead of time (one per server), `launcher()` hands it to the next run that
  starts (any session's) or starts a new one; the keeper ends a spare nobody took for SPARE_IDLE seconds, and it
  ends with the server (its pipe closes).
- The keeper: a daemon thread that, every KEEPER_PERIOD seconds, heartbeats the runs whose owner is still there
  (`alive()` says, e.g. a browser session still connected: switching pages never stops training) and stops those
  whose owner has been gone IDLE_TIMEOUT seconds (paused runs included: their own timeout only watches running
  ones), so their workers end and are reaped; and asks the server's queue to park paused runs idle for
  AP_PARK_AFTER_S seconds, or past AP_MAX_WORKERS live workers (`RunQueue.park_idle`).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from transformer import settings

from .job import Job
from .process_job import launch_worker
from .queue import server_queue
from .ray_job import configured_address, ray_available

SPARE_IDLE = 600.0  # seconds a spare worker nobody took is kept (it holds an interpreter with torch: ~250 MB)
IDLE_TIMEOUT = 60.0  # seconds without a sign of its owner before a run is stopped
KEEPER_PERIOD = 5.0  # seconds between the keeper's sweeps

_spare: tuple[subprocess.Popen, Any, float] | None = None  # (process, our end of its pipe, when started)
_spare_lock = threading.Lock()
_watched: dict[Job, list] = {}  # job -> [alive() or None, last time its owner was seen]
_watched_lock = threading.Lock()
_keeper: threading.Thread | None = None


def worker_nice() -> int:
    """How many nice levels below the server a worker runs (the setting AP_WORKER_NICE)."""
    return settings.get("AP_WORKER_NICE")


def start_worker() -> tuple[subprocess.Popen, Any]:
    """launch_worker(), at the workers' CPU priority (set before the new interpreter has started a thread)."""
    proc, conn = launch_worker()
    if (nice := worker_nice()) > 0:
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, os.getpriority(os.PRIO_PROCESS, 0) + nice)
        except OSError:
            pass  # it ended already: the run reports how
    return proc, conn


# ------------------------------------------------------------------------------------------ the spare

def prepare_spare() -> None:
    """Start a spare worker unless one is kept, or every training slot is busy (its start-up would slow the
    runs training; a run that waits in line starts its own worker when its turn comes), or the server has its
    most live workers (AP_MAX_WORKERS), or runs train on a Ray cluster (whose workers Ray starts)."""
    global _spare
    if configured_address() is not None and ray_available():
        return
    queue = server_queue()
    with _spare_lock:
        if _spare is not None and _spare[0].poll() is None:
            return
        _drop_spare()
        if queue.running >= queue.limit or queue.workers >= queue.max_workers:
            return
        try:
            proc, conn = start_worker()
        except OSError:
            return  # out of processes or memory: each run will say so when it starts its own
        _spare = (proc, conn, time.monotonic())
    _ensure_keeper()


def spare_pid() -> int | None:
    """The spare worker's process id, while one is kept."""
    with _spare_lock:
        return None if _spare is None else _spare[0].pid


def launcher() -> tuple[subprocess.Popen, Any]:
    """A run's worker (ProcessJob's `launcher`): the spare when one is kept and alive, else a new one."""
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None:
        proc, conn, _ = spare
        if proc.poll() is None:
            return proc, conn
        _end_worker(proc, conn)
    return start_worker()


def end_spare() -> None:
    """End the spare worker, if any, and reap it."""
    with _spare_lock:
        _drop_spare()


def expire_spare(now: float) -> None:
    """End the spare if nobody took it for SPARE_IDLE seconds (the keeper calls this)."""
    with _spare_lock:
        if _spare is not None and now - _spare[2] > SPARE_IDLE:
            _drop_spare()


def _drop_spare() -> None:
    global _spare
    if _spare is not None:
        proc, conn, _ = _spare
        _spare = None
        _end_worker(proc, conn)


def _end_worker(proc: subprocess.Popen, conn) -> None:
    """End a worker that was never given a run (it holds nothing: no need to wait for it to notice its pipe
    closing, which it does only once its imports are done) and reap it."""
    conn.close()
    proc.kill()
    proc.wait()


# ----------------------------------------------------------------------------------------- the keeper

def watch(job: Job, alive: Callable[[], bool] | None) -> None:
    """Keep `job` while `alive()` says its owner is there; None: an owner the keeper cannot see (the job's own
    idle timeout and its page's heartbeats look after it)."""
    with _watched_lock:
        _watched[job] = [alive, time.monotonic()]
    _ensure_keeper()


def watching(job: Job) -> bool:
    with _watched_lock:
        return job in _watched


def sweep(now: float | None = None) -> None:
    """One keeper pass: forget ended jobs; heartbeat jobs whose owner is there; stop any job whose owner has been
    gone IDLE_TIMEOUT seconds."""
    now = time.monotonic() if now is None else now
    with _watched_lock:
        entries = list(_watched.items())
    for job, entry in entries:
        alive, seen = entry
        if job.join(0):
            with _watched_lock:
                _watched.pop(job, None)
        elif alive is None:
            continue  # an owner the keeper cannot see: the job's own idle timeout watches it
        elif alive():
            entry[1] = now
            job.heartbeat()
        elif now - seen > IDLE_TIMEOUT:
            job.stop()


def _ensure_keeper() -> None:
    global _keeper
    with _watched_lock:
        if _keeper is None or not _keeper.is_alive():
            _keeper = threading.Thread(target=_keep, name="training-keeper", daemon=True)
            _keeper.start()


def _keep() -> None:
    while True:
        time.sleep(KEEPER_PERIOD)
        expire_spare(time.monotonic())
        sweep()
        server_queue().park_idle()
