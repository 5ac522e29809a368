"""What a server warms once its first page has been drawn, before anyone opens a second: every page's modules
(torch among them: a fresh server's first page does without it, ui/glance.py), the home page's decode of the default
model kept for the next server, and the default model's error analysis (the first visit of "Where it fails").
Without it each page's first visit did its own (the Train page's 1.3 s; the decoding page's 2.2 s on an AVX2
laptop). Not `torch._dynamo` (2 s of CPU, 70 MB): torch's first optimiser imports it, and a server builds none before
a run's first step (`Trainer`). How each rule below was measured: docs/MEASUREMENTS.md, "A fresh server, and first
visits" and the sections after it; benchmarks/click_latency.py measures first visits.

- After the first page is drawn, not before it nor beside it: on two cores a browser's start-up keeps both busy, and
  a warm-up beside it (torch's import too) put the first chart later by about what it saved. It begins when the
  browser says it has drawn (`drawn`: ui/preload.py's beacon, once per page load) or DELAY seconds after that run.
- At the server's own priority: in a thread at nice 19 it spared the first chart, but a page that needs torch then
  waits for an import that busy programs starve without bound (a thread cannot take its priority back).
- Page views first: between its steps (each module, the analysis, the garbage collection at its end) it waits while
  a view runs and its browser draws, GIVE_WAY seconds at most (a busy class server's views may never all be over).
  So a page opened within about a second of a fresh server's first chart waits for torch's import; one opened after
  two seconds of reading finds everything warm.
- Torch first, then pandas (FIRST): every page but the home page needs torch, and the Code page's first chart
  nothing else slow (its tables come later, and build no pandas frame themselves), so a Code page opened at once
  waits for torch's import only. A view whose figure meets pandas's import under way waits for it where plotly
  looks pandas up (ui/runtime.plotly_waits_for_imports), and one that imports a module itself waits at its `import`.
- At the interpreter's exit (a server stopped within seconds of its first page) it stops after the step under way
  and is waited for: a thread left inside torch's C++ code as the interpreter ends aborts it (exit status 134).
"""

from __future__ import annotations

import ast
import atexit
import importlib
import logging
import threading
import time
import weakref
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from streamlit import config

from ui import runtime
from ui.catalog import PAGES

ROOT = Path(__file__).resolve().parents[1]
THREAD = "warm-up"
DELAY = 1.0  # seconds the browser draws what a page view sent (0.5-1.6 s measured): the warm-up waits them out
FIRST = ("torch", "pandas")  # imported first: what nearly every page waits for, then what most pages import
EXIT_WAIT = 10.0  # seconds the interpreter's exit waits for the warm-up's step under way at most
GIVE_WAY = 2.0  # seconds the warm-up's next step waits at most for the page views under way

_turns = threading.Condition()  # guards the four below
_views = 0  # page views under way
_last_view = float("-inf")  # when the last one ended (time.monotonic())
_started = False  # once per server
_drawn_at = float("-inf")  # when a browser last said it had drawn its page (ui/preload.py's beacon)
_stopping = threading.Event()  # set at the interpreter's exit


def page_modules() -> list[str]:
    """Every module app.py and the page scripts import (`script_modules`), each once."""
    found: dict[str, None] = {}
    for script in [ROOT / "app.py", *(ROOT / info.path for info in PAGES)]:
        found.update(dict.fromkeys(script_modules(script)))
    return list(found)


def script_modules(script: Path) -> list[str]:
    """Every module `script` imports, read from its import statements (a page cannot be imported: it is a script
    that draws): `import a.b` gives a.b, `from a import b, c` gives a, a.b and a.c, of which `load` imports those
    that are modules."""
    found: dict[str, None] = {}
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(dict.fromkeys(alias.name for alias in node.names))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.update(dict.fromkeys([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]))
    return list(found)


def load(names: Iterable[str]) -> None:
    """Import each of `names` that is a module (a name a `from` statement imports may be a class or function)."""
    for name in names:
        if not _views_over():
            return
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a module that is there, missing one it needs: the page will say so
                raise


def _views_over() -> bool:
    """Wait until no page view is under way and the browser has drawn the last: the view ended DELAY seconds ago, or
    a browser said so (`drawn`) since it ended; GIVE_WAY seconds at most. False once the interpreter is exiting."""
    give_up = time.monotonic() + GIVE_WAY
    with _turns:
        while not _stopping.is_set() and (now := time.monotonic()) < give_up:
            if _views == 0 and (now >= _last_view + DELAY or _drawn_at >= _last_view):
                break
            _turns.wait(min(give_up, _last_view + DELAY) - now if _views == 0 else give_up - now)
    return not _stopping.is_set()


def drawn() -> None:
    """A browser has drawn its page (ui/preload.py's beacon): the warm-up's next step need not wait for it."""
    global _drawn_at
    with _turns:
        _drawn_at = time.monotonic()
        _turns.notify_all()


@contextmanager
def page_view():
    """Around a page view (app.py's script run): the warm-up's next step waits for it. Not around a fragment's run:
    right after a fresh server's first page none is polling."""
    global _views, _last_view
    with _turns:
        _views += 1
    try:
        yield
    finally:
        with _turns:
            _views -= 1
            _last_view = time.monotonic()
            _turns.notify_all()


def start() -> None:
    """Start the warm-up in a thread of its own (app.py calls this as a run ends), once per server; its first step
    waits while the browser draws that run's page. Not under AppTest (its tests keep their caches; AppTest sets the
    option on `config`, not on `st.get_option`)."""
    global _started
    with _turns:
        if _started or config.get_option("global.appTest"):
            return
        _started = True
    # the model cache's spinner looks for a script run, and says so when there is none: expected here
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: record.threadName != THREAD)
    warmer = threading.Thread(target=_warm_quietly, name=THREAD, daemon=True)
    # Exit hooks run last registered first. The finalizers that the step under way at exit creates (torch's import
    # makes some) run at exit only if weakref's own hook is registered before ours; registered after (by the first
    # finalizer in the process, made while ours waits), it was not run, and they ran as modules were torn down,
    # printing "Exception ignored ... TypeError" three times.
    weakref.finalize(_stopping, lambda: None)
    atexit.register(_stop, warmer)
    warmer.start()


def _stop(warmer: threading.Thread) -> None:
    """At the interpreter's exit: no further step, and the one under way waited for."""
    _stopping.set()
    with _turns:
        _turns.notify_all()  # a step waiting for page views: none is taken now
    warmer.join(EXIT_WAIT)


def warm_up() -> None:
    """Between page views: FIRST, every page's modules, the home page's kept decode, and the default model's error
    analysis in the "Where it fails" page's default view, into the caches the pages read."""
    load([*FIRST, *page_modules()])
    if _views_over():
        keep_first_page()
    if _views_over():
        warm_errors()


def keep_first_page() -> None:
    """The home page's decode of the default model, kept for the next server's first page (ui/glance.py), if no
    page view has kept it yet."""
    from ui import glance  # function-local: app.py imports this module before it sends the preload
    from ui import model_registry as registry  # function-local: as above

    glance.default(registry.DEFAULT_MODEL)


def warm_errors() -> None:
    """The "Where it fails" page's analysis of the default model, in its default view, into the decode cache."""
    from ui import decodes  # function-local: app.py imports this module before it sends the preload
    from ui import model_registry as registry  # function-local: as above
    from ui.tables.errors import ERRORS  # function-local: as above

    decodes.errors(registry.DEFAULT_MODEL, registry.version(registry.DEFAULT_MODEL), ERRORS.by_name["samples"].default,
                   ERRORS.by_name["seed"].default)


def _warm_quietly() -> None:
    try:
        warm_up()
    except Exception:  # noqa: BLE001 - a failure here shows again, with its message, on the page that meets it
        pass
    finally:  # the first run's garbage, whether the warm-up got through or not; what is alive now stays frozen
        _views_over()  # a full collection holds the interpreter for ~0.2 s
        runtime.collect_frozen()
