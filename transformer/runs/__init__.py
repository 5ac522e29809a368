"""Training runs: the `Job` interface (job.py) and its backends (a thread, a worker process, a Ray actor; the
last two share the worker's side, relay.py), the server's queue of runs, the probe, and the worker processes a
server keeps (workers.py).

`make_job` is the app's entry point: it builds the backend this server is configured for.
"""

from __future__ import annotations

import logging

from transformer.training.config import TrainConfig

from .process_job import ProcessJob
from .ray_job import RAY_ADDRESS_ENV, RayJob, configured_address, ray_available

log = logging.getLogger(__name__)
_warned_missing = False


def make_job(train: TrainConfig, model: dict | None = None, **kwargs) -> ProcessJob:
    """A RayJob when AP_RAY_ADDRESS is set and ray is importable, else a ProcessJob; the same arguments as
    ProcessJob's (a `launcher` is ProcessJob's alone: a RayJob drops it)."""
    global _warned_missing
    address = configured_address()
    if address is not None:
        if ray_available():
            return RayJob(train, model, address=address, **kwargs)
        if not _warned_missing:
            _warned_missing = True
            log.warning("%s is set to %r but ray is not installed (pip install -r requirements-cluster.txt): "
                        "training runs in worker processes on this machine", RAY_ADDRESS_ENV, address)
    return ProcessJob(train, model, **kwargs)
