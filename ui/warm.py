"""What a fresh server does before its first browser connects: `streamlit run app.py` starts app.py's `st.App`,
whose start-up (`lifespan`) runs `warm_up`, then `warm_later`, in a background thread, so that the first visit to
a page waits for neither torch's import nor its first kernels.

Without it, a fresh server's first script run imported torch (~1 s) and every page's first visit imported its own
modules and ran its first plotly and torch calls (the decode page's first visit: 2.2 s to its first chart on a
2-core AVX2 machine, issue 25); benchmarks/click_latency.py measures both against a server without the warm-up.

Script runs wait for `warm_up` to end (`wait`): importing a module in two threads at once is safe for `import`
statements, which take the module's lock, but not for code that reads sys.modules directly, as plotly does for
pandas (a script run's first figure met a half-imported pandas: AttributeError), so `warm_up` imports pandas.
"""

from __future__ import annotations

import ast
import gc
import importlib
import logging
import os
import sys
import threading
from contextlib import asynccontextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREAD = "warm-up"
LATER = ("torch._dynamo",)  # what warm_later imports
WAIT_LIMIT = 60.0  # seconds a script run waits for the warm-up at most (it takes 1-3 s)

_started = threading.Event()  # set when the server started a warm-up
_done = threading.Event()  # set when it ended, however


def page_modules(home_only: bool = False) -> list[str]:
    """Every module app.py and the page scripts (or the home page's only) import, read from their import
    statements (the pages themselves cannot be imported: they are scripts that draw): `import a.b` gives a.b,
    `from a import b, c` gives a, a.b and a.c, of which `load` imports those that are modules."""
    from ui.catalog import PAGES

    found: dict[str, None] = {}
    for script in [ROOT / "app.py", *(ROOT / info.path for info in PAGES[:1 if home_only else None])]:
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(dict.fromkeys(alias.name for alias in node.names))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.update(dict.fromkeys([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]))
    return list(found)


def load(names: list[str]) -> None:
    """Import each of `names` that is a module (a name a `from` statement imports may be a class or function)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a module that is there, missing one it needs: the page will say so
                raise


def warm_up() -> None:
    """What the home page needs: torch and the home page's modules (and pandas, which plotly reads from sys.modules
    without importing it), then the default model and a decode of its first example (torch's first kernels,
    plotly's first figure), into the caches the page reads. Errors are left to the pages, which report them where
    they happen."""
    from ui.runtime import configure_torch

    configure_torch()
    load([*page_modules(home_only=True), "pandas"])
    from ui import decodes, display
    from ui import model_registry as registry

    path = registry.shipped_path(registry.DEFAULT_MODEL)
    bundle = registry.load_file(path)
    result = decodes.greedy(registry.DEFAULT_MODEL, registry.file_version(path), bundle.examples()[0])
    display.cross_figure(result, 0, None).to_json()


def wait() -> None:
    """Hold a script run until the warm-up has ended (at once where none was started: AppTest, a bare script)."""
    if _started.is_set():
        _done.wait(WAIT_LIMIT)


def warm_later() -> None:
    """What the other pages need, once script runs may go on (a page that imports a module meanwhile waits on
    that import's lock): their modules; the Train page's preview builds a Trainer, whose first optimizer imports
    torch._dynamo (1.2-2.4 s of CPU); the "Where it fails" page analyses 1,000 held-out inputs of the default model
    (~1 s). On Linux this thread first drops to the lowest CPU priority, so page views and the browser come first."""
    if sys.platform == "linux":  # a nice value there belongs to a thread (elsewhere it would be the process's)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    load([*page_modules(), *LATER])
    warm_errors()
    gc.freeze()  # as ui/runtime.py does after the first imports: these too stay out of full collections


def warm_errors() -> None:
    """The "Where it fails" page's analysis of the default model, in its default view, into the decode cache."""
    from ui import decodes
    from ui import model_registry as registry
    from ui.tables.errors import ERRORS

    path = registry.shipped_path(registry.DEFAULT_MODEL)
    decodes.errors(registry.DEFAULT_MODEL, registry.file_version(path), ERRORS.by_name["samples"].default,
                   ERRORS.by_name["seed"].default)


@asynccontextmanager
async def lifespan(app):
    """st.App's start-up hook: the warm-up runs beside the server, which answers at once."""
    _started.set()
    # the model cache's spinner looks for a script run, and says so when there is none: expected here
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: record.threadName != THREAD)
    threading.Thread(target=_warm_quietly, name=THREAD, daemon=True).start()
    yield


def _warm_quietly() -> None:
    try:
        warm_up()
    except Exception:  # noqa: BLE001 - a failure here shows again, with its message, on the page that meets it
        pass
    finally:
        _done.set()
    try:
        warm_later()
    except Exception:  # noqa: BLE001 - as above
        pass
