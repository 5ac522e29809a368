"""Process-wide runtime choices: torch's thread count, the garbage collector around a server's first page run, and
Nagle's algorithm off on the server's sockets. No torch at import: app.py imports this before its first page's run
imports torch."""

from __future__ import annotations

import gc
import os
import socket
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


def tcp_nodelay() -> int:
    """Turn Nagle's algorithm off (TCP_NODELAY) on this process's listening TCP sockets and the connections they
    accepted; returns how many sockets it set. Streamlit binds its listening socket without naming the protocol (its
    `proto` is 0), and asyncio turns Nagle off only on an accepted socket whose `proto` is TCP's, so every response
    after the first on a kept-alive connection waited for the browser's delayed acknowledgement: ~40 ms a file, for
    the ~60 files of a new browser's frontend, six connections at a time (docs/MEASUREMENTS.md). Connections
    accepted later inherit the option from the listener. Where the process's files cannot be listed (no /dev/fd:
    Windows), nothing."""
    try:
        names = os.listdir("/dev/fd")
    except OSError:  # no /dev/fd
        names = []
    sockets = []
    for name in names:
        try:
            fd = os.dup(int(name))  # a socket object of its own on the same socket, closed below
        except OSError:  # closed since the listing (the listing's own descriptor among them)
            continue
        try:
            sockets.append(socket.socket(fileno=fd))
        except OSError:  # not a socket
            os.close(fd)
    try:
        tcp = [s for s in sockets if s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM]
        ports = {s.getsockname()[1] for s in tcp if s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)}
        served = [s for s in tcp if s.getsockname()[1] in ports]
        for s in served:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return len(served)
    finally:
        for s in sockets:
            s.close()


@contextmanager
def first_run():
    """Around app.py's script run: the server's first one (which imports torch, the UI and its page: ~1 s) runs
    with the garbage collector paused, whose collections among so many new objects took 0.15-0.4 s of it on a fresh
    server (docs/MEASUREMENTS.md). Everything alive then is frozen out of its reach (a full collection fell from
    ~200 ms to under 1 ms), including the garbage that run left: `collect_frozen` frees it later, off the first
    page's path (the warm-up calls it). It also turns Nagle's algorithm off on the server's sockets (`tcp_nodelay`):
    the first browser's connections, and through the listener every later one. Every later run: nothing."""
    global _first_run_seen
    with _lock:
        first, _first_run_seen = not _first_run_seen, True
    if not first:
        yield
        return
    tcp_nodelay()
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
