"""The server's warm-up (ui/warm.py): it imports what every page imports, fills the caches the home page reads,
and script runs wait for it to end (two threads importing at once broke plotly's look at a half-imported pandas)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

import pytest
from helpers.repo import needs_reverse

from ui import decodes, warm
from ui import model_registry as registry

DECODE = decodes.greedy_decode

@pytest.fixture
def fresh(monkeypatch):
    """A warm-up state of its own (no warm-up started, nothing to do later), and empty decode caches."""
    monkeypatch.setattr(warm, "_started", threading.Event())
    monkeypatch.setattr(warm, "_done", threading.Event())
    monkeypatch.setattr(warm, "warm_later", lambda: None)
    decodes.clear()
    yield
    decodes.clear()


def test_the_page_modules_are_read_from_every_page_script():
    modules, home = warm.page_modules(), warm.page_modules(home_only=True)
    assert {"streamlit", "ui.catalog", "ui.step_player", "ui.panels.train_live", "ui.runs_table"} <= set(modules)
    assert {"streamlit", "ui.catalog", "ui.decodes"} <= set(home) and "ui.step_player" not in home
    assert not [m for m in modules if m.startswith("pages")]
    warm.load(["transformer.analysis.heads.focus_head", "__future__.annotations"])  # names, not modules: passed by


@needs_reverse
def test_the_warm_up_fills_what_the_home_page_reads(fresh, monkeypatch):
    built = []
    monkeypatch.setattr(decodes, "greedy_decode", lambda *a, **k: built.append(a) or DECODE(*a, **k))
    warm.warm_up()
    assert {"torch", "pandas", "ui.decodes", "ui.display", "transformer.charts", "transformer.analysis.heads"} <= set(
        sys.modules)
    path = registry.shipped_path(registry.DEFAULT_MODEL)
    bundle = registry.load_file(path)
    text = bundle.examples()[0]
    first = decodes.greedy(registry.DEFAULT_MODEL, registry.file_version(path), text)  # the home page's call
    assert len(built) == 1 and first.output_text == text[::-1]  # decoded once, by the warm-up


def test_a_script_run_waits_for_the_warm_up_and_not_without_one(fresh, monkeypatch):
    started = time.perf_counter()
    warm.wait()  # none started (AppTest, a bare script): no wait
    assert time.perf_counter() - started < 0.1
    ended = []
    monkeypatch.setattr(warm, "warm_up", lambda: (time.sleep(0.5), ended.append(time.perf_counter())))
    asyncio.run(_serve_briefly())
    warm.wait()
    assert ended and time.perf_counter() >= ended[0]


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
def test_the_later_warm_up_works_at_the_lowest_priority(monkeypatch):
    assert warm.LATER == ("torch._dynamo",)  # what the Train page's first Trainer would import
    monkeypatch.setattr(warm, "LATER", ("colorsys",))  # a module as quick to import at nice 19 on a busy machine
    sys.modules.pop("colorsys", None)
    seen = {}
    monkeypatch.setattr(warm, "warm_errors", lambda: seen.setdefault("errors_nice", os.getpriority(
        os.PRIO_PROCESS, threading.get_native_id())))

    def later():
        warm.warm_later()
        seen["nice"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    thread = threading.Thread(target=later)
    thread.start()
    thread.join()
    assert seen["nice"] == seen["errors_nice"] == 19 and "colorsys" in sys.modules
    assert os.getpriority(os.PRIO_PROCESS, 0) < 19  # the process (its main thread) kept its priority


def test_a_failing_warm_up_leaves_the_pages_to_report_it(fresh, monkeypatch):
    monkeypatch.setattr(warm, "warm_up", lambda: 1 / 0)
    asyncio.run(_serve_briefly())
    warm.wait()
    assert warm._done.is_set()


async def _serve_briefly():
    """A server's start (st.App's lifespan, which starts the warm-up) and stop."""
    async with warm.lifespan(None):
        pass
