"""The server's warm-up (ui/warm.py): it imports what every page imports and fills the caches the pages read, once
per server and never under AppTest; torch first, then pandas, each step between page views. (A view that meets
pandas's import under way waits for it where plotly looks it up: tests/unit/test_runtime.py.)"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from helpers.repo import ROOT, fresh_python, needs_reverse

from ui import decodes, glance, warm

KEEP_FIRST_PAGE = warm.keep_first_page


@pytest.fixture
def fresh(monkeypatch):
    """A warm-up state of its own (nothing started, no page view under way), and empty decode caches."""
    for name, value in (("_turns", threading.Condition()), ("_views", 0), ("_last_view", float("-inf")),
                        ("_started", False), ("_drawn_at", float("-inf")), ("FIRST", ())):
        monkeypatch.setattr(warm, name, value)
    monkeypatch.setattr(warm, "keep_first_page", lambda: None)  # its own test, below
    decodes.clear()
    yield
    decodes.clear()


def test_the_page_modules_are_read_from_every_page_script():
    modules = warm.page_modules()
    assert {"streamlit", "ui.catalog", "ui.decodes", "ui.step_player", "ui.panels.train_live", "ui.runs_table",
            "transformer.analysis.heads"} <= set(modules)
    assert not [m for m in modules if m.startswith("pages")]
    warm.load(["transformer.analysis.heads.focus_head", "__future__.annotations"])  # names, not modules: passed by


# In a fresh interpreter: the modules the Code page imports, as the warm-up reads them (torch among them, since the page
# computes), and whether pandas came in with them.
CODE_PAGE_IMPORTS = """
import sys
from ui import warm
warm.load(warm.script_modules(warm.ROOT / "pages/learn/code.py"))
print(sorted({"torch", "pandas"} & set(sys.modules)))
"""


def test_the_code_page_imports_no_pandas_so_on_a_fresh_server_it_waits_for_torch_only():
    printed = fresh_python(CODE_PAGE_IMPORTS)
    assert printed.split()[-1] == "['torch']", printed


def test_torch_comes_first_and_page_views_are_not_held_by_it(fresh, monkeypatch):
    """Torch, then pandas, then the pages' modules; a view that begins during torch's import runs beside it (in a
    server it meets torch's module lock only if it imports torch itself)."""
    monkeypatch.setattr(warm, "DELAY", 0.0)
    monkeypatch.setattr(warm, "FIRST", ("torch", "pandas"))
    events = []
    _record_imports(monkeypatch, events, 0.3)
    monkeypatch.setattr(warm, "page_modules", lambda: ["ui.page"])
    warmer = threading.Thread(target=warm.warm_up)
    warmer.start()
    time.sleep(0.1)  # torch's import is under way
    _view(events, "view", 0).join()
    warmer.join()
    assert events == ["import torch", "view in", "view out", "torch done", "import pandas", "pandas done",
                      "import ui.page", "ui.page done"], events


@needs_reverse
def test_the_warm_up_imports_every_pages_modules_keeps_the_first_page_and_analyses_the_default_model(
        fresh, monkeypatch, tmp_path):
    analysed = []
    monkeypatch.setattr(decodes, "analyse_errors", lambda *a: analysed.append(a) or "analysis")
    monkeypatch.setattr(warm, "keep_first_page", KEEP_FIRST_PAGE)
    monkeypatch.setenv("AP_FIRST_PAGE_CACHE", str(tmp_path))
    glance.clear()
    warm.warm_up()
    assert {"pandas", "ui.step_player", "ui.runs_table"} <= set(sys.modules)
    assert len(analysed) == 1
    assert len(list(tmp_path.glob("*.json"))) == 1  # the next server's first page needs no torch


def _record_imports(monkeypatch, events: list, seconds: float) -> None:
    """The warm-up's imports append "import NAME" and "NAME done" to `events`, `seconds` apart; nothing else."""
    def step(name):
        events.append(f"import {name}")
        time.sleep(seconds)
        events.append(f"{name} done")

    monkeypatch.setattr(warm.importlib, "import_module", step)
    monkeypatch.setattr(warm, "page_modules", list)
    monkeypatch.setattr(warm, "warm_errors", lambda: None)


def _view(events: list, name: str, hold: float, inside: threading.Event | None = None) -> threading.Thread:
    """A page view in a thread of its own, started now: "NAME in", `hold` seconds, "NAME out"."""
    def run():
        with warm.page_view():
            events.append(f"{name} in")
            if inside:
                inside.set()
            time.sleep(hold)
            events.append(f"{name} out")

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_view_that_begins_before_an_import_is_not_held_and_the_import_waits_for_it(fresh, monkeypatch):
    """The warm-up begins a step only once the last view ended DELAY seconds ago: a view that begins in that second
    runs at once, and the import waits DELAY after it in turn."""
    monkeypatch.setattr(warm, "DELAY", 0.4)
    monkeypatch.setattr(warm, "FIRST", ("pandas",))
    events = []
    _record_imports(monkeypatch, events, 0.1)
    _view(events, "first", 0).join()
    warmer = threading.Thread(target=warm.warm_up)
    warmer.start()
    time.sleep(0.1)  # the warm-up waits for the browser to draw the first view
    began = time.monotonic()
    _view(events, "second", 0.05).join()
    ended = time.monotonic()
    warmer.join()
    assert ended - began < 0.3, ended - began  # had it waited for the import's wait and the import: ~0.45 s
    assert events == ["first in", "first out", "second in", "second out", "import pandas", "pandas done"], events


def test_the_warm_up_waits_between_its_steps_while_a_page_view_runs(fresh, monkeypatch):
    events = []
    monkeypatch.setattr(warm, "page_modules", lambda: ["first", "second"])
    monkeypatch.setattr(warm.importlib, "import_module",
                        lambda name: (events.append(f"import {name}"), time.sleep(0.2), events.append(f"{name} done")))
    monkeypatch.setattr(warm, "warm_errors", lambda: events.append("analysis"))
    warmer = threading.Thread(target=warm.warm_up)
    warmer.start()
    time.sleep(0.1)  # the first import is under way
    with warm.page_view():
        events.append("view in")
        time.sleep(0.4)  # the first import ends meanwhile; the second waits
        events.append("view out")
    warmer.join()
    assert events == ["import first", "view in", "first done", "view out", "import second", "second done",
                      "analysis"], events


def test_the_warm_up_lets_the_browser_draw_a_page_view_before_its_next_step(fresh, monkeypatch):
    """After a page view the browser still draws what it sent: the next step (an import, the analysis, the garbage
    collection at the end) waits DELAY seconds from the view's end."""
    monkeypatch.setattr(warm, "DELAY", 0.3)
    monkeypatch.setattr(warm, "page_modules", lambda: ["first", "second"])
    at, begun = {}, {name: threading.Event() for name in ("first", "analysis")}

    def step(name):
        at[name] = time.monotonic()
        if name in begun:
            begun[name].set()
        time.sleep(0.3)

    monkeypatch.setattr(warm.importlib, "import_module", step)
    monkeypatch.setattr(warm, "warm_errors", lambda: step("analysis"))
    monkeypatch.setattr(warm.runtime, "collect_frozen", lambda: step("collection"))

    def view(name, during):
        begun[during].wait(10)
        with warm.page_view():
            time.sleep(0.05)
        at[name] = time.monotonic()

    warmer = threading.Thread(target=warm._warm_quietly)
    warmer.start()
    view("first view", during="first")
    view("second view", during="analysis")
    warmer.join()
    assert list(at) == ["first", "first view", "second", "analysis", "second view", "collection"], at
    for before, after in (("first view", "second"), ("second view", "collection")):
        assert warm.DELAY <= at[after] - at[before] < warm.DELAY + 0.25, (after, at[after] - at[before])


def test_a_busy_server_still_gets_warmed(fresh, monkeypatch):
    """Page views that never all end at once hold each of the warm-up's imports GIVE_WAY seconds at most."""
    monkeypatch.setattr(warm, "GIVE_WAY", 0.1)
    imported = []
    monkeypatch.setattr(warm.importlib, "import_module", imported.append)
    with warm.page_view():  # a view that does not end while the warm-up imports
        began = time.perf_counter()
        warm.load(["a", "b"])
        took = time.perf_counter() - began
    assert imported == ["a", "b"] and 0.2 <= took < 1.0, took


def test_the_warm_up_starts_once_and_never_under_apptest(fresh, monkeypatch):
    from streamlit.testing.v1 import AppTest

    started = []
    monkeypatch.setattr(warm, "warm_up", lambda: started.append(threading.current_thread().name))
    at = AppTest.from_string("from ui import warm\nwarm.start()").run()  # as app.py calls it, in a script run
    assert not at.exception
    assert not started and not warm._started
    warm.start()
    warm.start()
    time.sleep(0.3)
    assert started == [warm.THREAD]  # once, in the thread the log filter knows


def _first_step_after(monkeypatch, word_at: float | None) -> float:
    """A page view ends, the warm-up starts (as app.py starts it), and a browser says it has drawn its page
    `word_at` seconds after the view's end (None: none says so): seconds from the view's end to the first step."""
    monkeypatch.setattr(warm, "DELAY", 0.6)
    monkeypatch.setattr(warm, "FIRST", ("first step",))
    began = threading.Event()
    monkeypatch.setattr(warm.importlib, "import_module", lambda name: began.set())
    monkeypatch.setattr(warm, "page_modules", list)
    monkeypatch.setattr(warm, "warm_errors", lambda: None)
    monkeypatch.setattr(warm.runtime, "collect_frozen", lambda: None)
    with warm.page_view():
        pass
    ended = time.monotonic()
    if word_at is not None and word_at < 0:  # a word from before the view ended: about another page
        warm._drawn_at = ended + word_at
    warm.start()
    if word_at is not None and word_at >= 0:
        time.sleep(word_at)
        warm.drawn()
    assert began.wait(5)
    return time.monotonic() - ended


def test_the_first_step_waits_while_the_browser_draws_and_no_longer(fresh, monkeypatch):
    """The browser's word that it has drawn the page (ui/preload.py's beacon: warm.drawn) ends the wait; without it
    the warm-up waits DELAY seconds, and a word from before the view ended says nothing of it."""
    assert 0.2 <= _first_step_after(monkeypatch, 0.2) < 0.45
    monkeypatch.setattr(warm, "_started", False)
    assert warm.DELAY <= _first_step_after(monkeypatch, None) < warm.DELAY + 0.25
    monkeypatch.setattr(warm, "_started", False)
    assert warm.DELAY <= _first_step_after(monkeypatch, -0.1) < warm.DELAY + 0.25


def test_a_request_for_the_beacons_file_tells_the_warm_up_and_script_runs_do_not(fresh, monkeypatch):
    """The browser's word is a request for a file of ui/preload.py's beacon component; Streamlit's route looks the
    component's folder up in its registry at every request, as here. Registering reads it too: the script runs
    register the beacon once per server."""
    from streamlit.components.lib.local_component_registry import LocalComponentRegistry

    from ui import preload

    registry = LocalComponentRegistry()
    monkeypatch.setattr(preload.Runtime, "exists", lambda: True)
    monkeypatch.setattr(preload.ComponentRegistry, "instance", lambda: registry)
    told = []
    monkeypatch.setattr(warm, "drawn", lambda: told.append(time.monotonic()))
    for _ in range(3):  # three script runs
        preload.plotly_path()
    assert len(told) == 1  # the registration's
    asked = time.monotonic()
    assert registry.get_component_path(preload.BEACON.name) == str(preload.PLOTLY_DIR)
    assert len(told) == 2 and told[1] >= asked
    assert (preload.PLOTLY_DIR / preload.BEACON_FILE).is_file()


def test_a_failing_warm_up_leaves_the_pages_to_report_it(fresh, monkeypatch):
    collected = []
    monkeypatch.setattr(warm, "warm_up", lambda: 1 / 0)
    monkeypatch.setattr(warm.runtime, "collect_frozen", lambda: collected.append(True))
    warm._warm_quietly()  # no exception
    assert collected == [True]  # the first run's frozen garbage is freed all the same
    with warm.page_view():
        pass


# A server stopped while the warm-up's analysis runs (within seconds of its first page): the interpreter's exit must
# wait for it. A thread inside torch's C++ code as the interpreter ended aborted the process ("terminate called
# without an active exception", exit status 134). The analysis stands in as ~1 s of torch work.
EXIT_DURING_ANALYSIS = """
import threading, time, torch
from ui import warm
inside = threading.Event()
def analysis():
    inside.set()
    a, until = torch.randn(256, 256), time.monotonic() + 1.0
    while time.monotonic() < until:
        a @ a
    print("analysis done", flush=True)
warm.DELAY, warm.FIRST = 0.0, ()
warm.page_modules, warm.warm_errors = list, analysis
warm.start()
inside.wait(30)
time.sleep(0.2)
print("exit", flush=True)
"""


def test_an_exit_during_the_warm_up_waits_for_its_step_and_ends_cleanly():
    # the exit began, then waited for the step under way
    assert fresh_python(EXIT_DURING_ANALYSIS).split() == ["exit", "analysis", "done"]


# A server stopped while the warm-up imports torch (within a second of its first page, where that page did without
# it): the import makes the process's first finalizers (torch's operator libraries) while the exit waits for it. Here
# the step makes one, whose function needs the modules the interpreter tears down last.
EXIT_DURING_IMPORT = """
import os, threading, time, weakref
from ui import warm
assert not weakref.finalize._registered_with_atexit  # as in a server before torch: nothing made one yet
inside = threading.Event()
class Library:
    pass
def import_torch(name):
    inside.set()
    time.sleep(0.3)
    global library
    library = Library()
    weakref.finalize(library, lambda: os.write(1, b"finalized "))
warm.DELAY, warm.FIRST = 0.0, ("torch",)
warm.importlib.import_module = import_torch
warm.start()
inside.wait(30)
os.write(1, b"exit ")
"""


def test_finalizers_made_by_a_step_under_way_at_exit_still_run_at_exit():
    """Not as the interpreter tears its modules down, where they failed ("Exception ignored ... TypeError")."""
    done = subprocess.run([sys.executable, "-c", EXIT_DURING_IMPORT], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["exit", "finalized"] and "Exception ignored" not in done.stderr, done
