"""The server's runtime choices (ui/runtime.py): its first page run goes without garbage collections, then freezes what
is alive; the garbage frozen with it is freed by a later collection; every later run leaves the collector alone."""

from __future__ import annotations

import gc
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
