"""Process-wide runtime choices: torch's thread count and the garbage collector around a server's first page run. No
torch at import: app.py imports this before its first page's run imports torch. (Nagle's algorithm on the server's
sockets is uvloop's to turn off: requirements.txt.)"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_first_run_seen = False


def configure_torch() -> None:
    """One intra-op thread: inside Streamlit's threads the default pool was up to 30x slower (docs/ARCHITECTURE.md),
    and a single thread leaves the other core to the server and a second session."""
    import torch  # function-local: see the module's docstring

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@contextmanager
def first_run():
    """Around app.py's script run: the server's first one (which imports torch, the UI and its page: ~1 s) runs
    with the garbage collector paused, whose collections among so many new objects took 0.15-0.4 s of it on a fresh
    server (docs/MEASUREMENTS.md). Everything alive then is frozen out of its reach (a full collection fell from
    ~200 ms to under 1 ms), including the garbage that run left: `collect_frozen` frees it later, off the first
    page's path (the warm-up calls it). Every later run: nothing."""
    global _first_run_seen
    with _lock:
        first, _first_run_seen = not _first_run_seen, True
    if not first:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def collect_frozen() -> None:
    """Collect the garbage frozen with the first run (one full collection, ~0.2 s), then freeze what is alive."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
