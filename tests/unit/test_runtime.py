"""The server's runtime choices (ui/runtime.py): `ast.parse` in one thread at a time where Python needs it; plotly
waits for a pandas another thread is importing; its first page run goes without garbage collections, then freezes
what is alive; the garbage frozen with it is freed by a later collection; every later run leaves the collector
alone."""

from __future__ import annotations

import ast
import gc
import importlib
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest
from helpers.repo import fresh_python

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


def test_torch_imported_after_it_was_configured_runs_on_one_thread_in_every_thread():
    threads = fresh_python("import os, threading\nos.environ.pop('OMP_NUM_THREADS', None)\n"
                           "from ui import runtime\nruntime.configure_torch()\nimport torch\nseen = []\n"
                           "worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))\n"
                           "worker.start(); worker.join()\nprint(torch.get_num_threads(), *seen)")
    assert threads.split() == ["1", "1"]


def test_a_page_waits_for_the_import_of_torch_another_thread_has_begun():
    """torch half imported by another thread (the warm-up's) is not loaded; `load_torch` (outside a script run: no
    spinner) returns once that import has ended."""
    seen = fresh_python("import sys, threading, time\nfrom ui import runtime\nbefore = runtime.torch_loaded()\n"
                        "threading.Thread(target=lambda: __import__('torch')).start()\n"
                        "while 'torch' not in sys.modules: time.sleep(0.001)\n"
                        "during = runtime.torch_loaded()\nruntime.load_torch()\n"
                        "print(before, during, runtime.torch_loaded(), hasattr(sys.modules['torch'], 'nn'))")
    assert seen.split() == ["False", "False", "True", "True"]


@pytest.mark.parametrize(("version", "shared"), [((3, 11, 0), True), ((3, 11, 7), True), ((3, 11, 8), False),
                                                 ((3, 12, 1), True), ((3, 12, 2), False), ((3, 13, 0), False)])
def test_the_pythons_whose_ast_constructor_shares_its_depth_count(version, shared):
    assert runtime.shared_ast_depth(version) is shared


class Finalized:
    """An object whose finalizer is Python code: a collection inside a parse runs it, and another thread may go on."""

    def __del__(self):
        pass


def test_two_threads_parse_at_once_without_a_system_error(monkeypatch):
    """Two threads parse while a third makes cycles for the collector to find. Unguarded, Python 3.11.7 raised
    "AST constructor recursion depth mismatch" within 0.1-1.6 s here, and this test failed 3 of 3 times."""
    monkeypatch.setattr(ast, "parse", ast.parse)  # restored after the test
    runtime.serialize_ast_parse()
    runtime.serialize_ast_parse()  # once per process: a second call wraps nothing again
    if runtime.shared_ast_depth():
        assert ast.parse.__wrapped__.__name__ == "parse" and not hasattr(ast.parse.__wrapped__, "__wrapped__")
    source = Path(runtime.__file__).read_text(encoding="utf-8")
    errors, parses, stop = [], [], threading.Event()

    def parse():
        while not stop.is_set():
            try:
                ast.parse(source)
            except SystemError as exc:
                errors.append(exc)
                stop.set()
            parses.append(1)

    def make_cycles():
        while not stop.is_set():
            first, second = Finalized(), Finalized()
            first.other, second.other = second, first

    threads = [threading.Thread(target=work) for work in (parse, parse, make_cycles)]
    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50)
    try:
        for thread in threads:
            thread.start()
        time.sleep(3)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
    assert not errors
    assert len(parses) > 20  # both threads did parse


def test_the_first_run_skips_streamlits_question_whether_it_runs_in_a_prompt(fresh, monkeypatch):
    """Streamlit's first element in a process asks whether it runs in Python's interactive prompt, by walking the
    stack with every frame's source (45-120 ms of a fresh server's first run); inside the first run it asks nothing."""
    import streamlit as st
    import streamlit.delta_generator
    from streamlit import env_util

    asked = []
    monkeypatch.setattr(env_util, "is_repl", lambda: asked.append(True) or False)
    monkeypatch.setattr(streamlit.delta_generator, "_use_warning_has_been_displayed", False)
    st.markdown("an element outside the first run")
    assert asked == [True]  # the question this skips is still Streamlit's, asked at a process's first element
    monkeypatch.setattr(streamlit.delta_generator, "_use_warning_has_been_displayed", False)
    with runtime.first_run():
        st.markdown("the first run's element")
    assert asked == [True]


# In a fresh interpreter: a figure built while another thread imports pandas, as a page view's while another session's
# view, or the warm-up, imports it. Prints whether pandas was half imported when the figure began, and how it ended.
FIGURE_DURING_PANDAS_IMPORT = """
import sys, threading, time
import plotly.graph_objects as go
from ui import runtime
{waits}
importer = threading.Thread(target=__import__, args=("pandas",))
importer.start()
while "pandas" not in sys.modules:
    time.sleep(0.0002)
print(not hasattr(sys.modules["pandas"], "Series"), end=" ")
try:
    go.Figure(go.Scatter(y=[1, 2, 3])).to_json()
    print("drawn")
except AttributeError:
    print("AttributeError")
importer.join()
"""


def test_a_figure_built_while_another_thread_imports_pandas_waits_for_it():
    """Plotly alone takes the half-imported pandas and fails (plotly/plotly.py#2433: if plotly mends that, this
    module's wrapper can go); `plotly_waits_for_imports` makes it wait for the import and draw."""
    assert fresh_python(FIGURE_DURING_PANDAS_IMPORT.format(waits="")).split() == ["True", "AttributeError"]
    waits = "runtime.plotly_waits_for_imports()"
    assert fresh_python(FIGURE_DURING_PANDAS_IMPORT.format(waits=waits)).split() == ["True", "drawn"]


def test_every_plotly_module_that_looks_a_module_up_without_importing_it_is_wrapped():
    """Read from plotly's installed source, so an upgrade that adds such a look-up elsewhere fails here."""
    import _plotly_utils
    import plotly

    lookups = set()
    for package in (plotly, _plotly_utils):
        root = Path(package.__file__).parent
        for path in root.rglob("*.py"):
            if "should_load=False" in path.read_text(encoding="utf-8"):
                lookups.add(".".join(path.relative_to(root.parent).with_suffix("").parts))
    assert lookups == set(runtime.PLOTLY_LOOKUPS)
    runtime.plotly_waits_for_imports()
    runtime.plotly_waits_for_imports()  # once per process: a second call wraps nothing again
    for name in ("_plotly_utils.optional_imports", *lookups):
        get_module = importlib.import_module(name).get_module
        assert get_module.__wrapped__.__name__ == "get_module" and not hasattr(get_module.__wrapped__, "__wrapped__")
    import pandas

    whole = runtime.optional_imports.get_module
    assert whole("pandas", should_load=False) is pandas and whole("no_such_module", False) is None
