"""The server's runtime choices (ui/runtime.py): its first page run goes without garbage collections, then freezes what
is alive; the garbage frozen with it is freed by a later collection; every later run leaves the collector alone. The
first run also turns Nagle's algorithm off on the server's listening sockets and the connections they accepted."""

from __future__ import annotations

import gc
import os
import socket
import sys
import weakref

import pytest

from ui import runtime


class Node:
    """An object a reference cycle can hold, and a weak reference can watch."""


@pytest.fixture
def fresh(monkeypatch):
    """A server that has not run its first page yet; whatever a test freezes is thawed after it."""
    monkeypatch.setattr(runtime, "_first_run_seen", False)
    yield
    gc.unfreeze()
    gc.enable()


def test_only_the_first_run_pauses_the_collector_and_it_resumes_after(fresh):
    frozen = gc.get_freeze_count()
    with runtime.first_run():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen
    with runtime.first_run():
        assert gc.isenabled()


def test_a_first_run_that_ends_in_an_exception_still_resumes_the_collector(fresh):
    with pytest.raises(RuntimeError), runtime.first_run():  # st.rerun() and st.stop() end a run with one
        raise RuntimeError("the run stopped")
    assert gc.isenabled()


def test_the_garbage_the_first_run_froze_is_collected_later(fresh):
    with runtime.first_run():
        a, b = Node(), Node()
        a.other, b.other = b, a
        watched = weakref.ref(a)
        del a, b
    gc.collect()
    assert watched() is not None  # frozen with the run: out of a collection's reach
    runtime.collect_frozen()
    assert watched() is None


def test_torch_runs_on_one_thread_once_configured():
    import torch

    runtime.configure_torch()
    assert torch.get_num_threads() == 1


def nagle_off(sock: socket.socket) -> bool:
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


@pytest.mark.skipif(sys.platform == "win32", reason="no /dev/fd to find the server's sockets by")
def test_the_first_run_turns_nagle_off_on_the_servers_sockets_and_no_others(fresh):
    listener = socket.socket(socket.AF_INET)  # as Streamlit binds it: no protocol named, so asyncio leaves Nagle on
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    served, _ = listener.accept()
    assert not any(map(nagle_off, (listener, served, client)))
    with runtime.first_run():
        pass
    assert nagle_off(listener) and nagle_off(served)
    assert not nagle_off(client)  # a connection this process made to a server: not one the server accepted
    later_client = socket.create_connection(listener.getsockname())
    later, _ = listener.accept()  # accepted after the first run: Nagle off through the listener
    assert nagle_off(later) and not nagle_off(later_client)
    for sock in (listener, client, served, later_client, later):
        sock.close()


@pytest.mark.skipif(sys.platform == "win32", reason="no /dev/fd to find the server's sockets by")
def test_a_descriptor_closed_since_the_listing_does_not_stop_the_others(monkeypatch):
    listener = socket.socket(socket.AF_INET)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listed = os.listdir("/dev/fd")
    closed = str(max(map(int, listed)) + 1000)  # no such descriptor: as the listing's own, closed once it is read
    monkeypatch.setattr(runtime.os, "listdir", lambda path: [closed, *listed])
    assert runtime.tcp_nodelay() >= 1
    assert nagle_off(listener)
    listener.close()


def test_only_the_first_run_sets_sockets(fresh, monkeypatch):
    calls = []
    monkeypatch.setattr(runtime, "tcp_nodelay", lambda: calls.append(1))
    for _ in range(2):
        with runtime.first_run():
            pass
    assert calls == [1]
