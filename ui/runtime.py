"""Process-wide runtime choices: one `ast.parse` at a time where Python needs it, plotly's look at pandas waiting
for an import under way, torch's thread count, its import waited for under a spinner, and the garbage collector
around a server's first page run. No torch at import: app.py imports this before anything imports torch (a fresh
server's first page may need none: ui/glance.py). (Nagle's algorithm on the server's sockets is uvloop's to turn off:
requirements.txt.)"""

from __future__ import annotations

import ast
import functools
import gc
import importlib
import os
import sys
import threading
from contextlib import contextmanager

import streamlit as st
import streamlit.delta_generator
from _plotly_utils import optional_imports

from transformer.i18n import t

_lock = threading.Lock()
_first_run_seen = False
_parse_turn = threading.RLock()  # re-entrant: a collection inside a parse may run a finalizer that parses


def shared_ast_depth(version: tuple[int, ...] = sys.version_info[:3]) -> bool:
    """Whether this Python's AST constructor keeps one depth count for all threads (CPython gh-106905, fixed in 3.11.8
    and 3.12.2): two threads' `ast.parse` at once then fail with "SystemError: AST constructor recursion depth
    mismatch" when a collection during one lets the other run."""
    return version < (3, 11, 8) or (3, 12) <= version < (3, 12, 2)


def serialize_ast_parse() -> None:
    """On a Python with `shared_ast_depth`, make `ast.parse` take one lock (once per process). A server parses in
    many threads: Streamlit each page's script on its first visit, `inspect` for the code page's classes and for
    builtins' signatures, torch at import, the warm-up (ui/warm.py) beside page views; a CI run met the error on the
    code page."""
    if not shared_ast_depth() or getattr(ast.parse, "__wrapped__", None):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def one_at_a_time(*args, **kwargs):
        with _parse_turn:
            return parse(*args, **kwargs)

    ast.parse = one_at_a_time


# plotly's modules that look a module up without importing it (`get_module(name, should_load=False)`); a test reads
# plotly's source for every such look-up.
PLOTLY_LOOKUPS = ("_plotly_utils.basevalidators", "_plotly_utils.utils", "plotly.io._json", "plotly.basedatatypes")


def plotly_waits_for_imports() -> None:
    """Make plotly's look-ups of a module already in `sys.modules` (pandas, for whether a value is a Series) wait for
    its import when another thread has it under way, instead of taking the half-built module (plotly/plotly.py#2433):
    a page view's figure raised "partially initialized module 'pandas' has no attribute 'Series'" while another
    session's view, or the warm-up, imported pandas. A module whose import has ended costs one more dictionary
    look-up (~0.3 µs). Once per process; plotly is imported by then (app.py's own imports)."""
    get_module = optional_imports.get_module
    if getattr(get_module, "__wrapped__", None):
        return

    @functools.wraps(get_module)
    def whole(name: str, should_load: bool = True):
        # importing a module that is in sys.modules returns it once the import under way, in any thread, has ended
        return get_module(name, should_load or name in sys.modules)

    for module in PLOTLY_LOOKUPS:
        importlib.import_module(module).get_module = whole
    optional_imports.get_module = whole


def configure_torch() -> None:
    """One intra-op thread: inside Streamlit's threads the default pool was up to 30x slower (docs/ARCHITECTURE.md),
    and a single thread leaves the other core to the server and a second session. Before torch's import (a fresh
    server's first page may draw without it: ui/glance.py) through OMP_NUM_THREADS, from which torch sizes its pool
    at its import, whichever page or thread imports it first; the training workers set their own."""
    if "torch" not in sys.modules:
        os.environ["OMP_NUM_THREADS"] = "1"
        return
    import torch  # function-local: see the module's docstring

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def torch_loaded() -> bool:
    """Whether torch's import has ended: not begun, or under way in another thread (the warm-up's), is False."""
    module = sys.modules.get("torch")
    return module is not None and not getattr(module.__spec__, "_initializing", False)


@contextmanager
def torch_spinner():
    """Around work that may import torch: unless torch is loaded, a spinner saying that PyTorch is loading (shown once
    the work takes half a second: Streamlit's delay, so work that needs no torch after all shows nothing). A page
    that computes, opened on a fresh server before the warm-up has imported torch, waited for it on a blank page
    (1-3 s on two cores)."""
    if torch_loaded():
        yield
        return
    with st.spinner(t("app.loading_torch")):
        yield


def load_torch() -> None:
    """Import torch, or wait for the import another thread has begun, under `torch_spinner`."""
    with torch_spinner():
        importlib.import_module("torch")


@contextmanager
def first_run():
    """Around app.py's script run: the server's first one (the UI and its page, and torch where the page needs it:
    0.3-1.3 s) runs with the garbage collector paused, whose collections among so many new objects took 0.15-0.4 s
    of it on a fresh server (docs/MEASUREMENTS.md). Everything alive then is frozen out of its reach (a full
    collection fell from ~200 ms to under 1 ms), including the garbage that run left: `collect_frozen` frees it
    later, off the first page's path (the warm-up calls it). Streamlit's question of its first element is skipped
    (`skip_repl_probe`). Every later run: nothing."""
    global _first_run_seen
    with _lock:
        first, _first_run_seen = not _first_run_seen, True
    if not first:
        yield
        return
    skip_repl_probe()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def skip_repl_probe() -> None:
    """The first element a Streamlit process sends asks whether it runs in Python's interactive prompt, to print a
    hint: `inspect.stack()` with every frame's source, which looks each file up among all loaded modules (45-120 ms of
    a fresh server's first run here). Under `streamlit run` it never does: the hint counts as given."""
    streamlit.delta_generator._use_warning_has_been_displayed = True


def collect_frozen() -> None:
    """Collect the garbage frozen with the first run (one full collection, ~0.2 s), then freeze what is alive."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
