"""Chart export: toolbar download settings with meaningful file names, server-side PNG/SVG through kaleido
(which drives a Chromium), a standalone offline HTML fallback, and CSV: the numbers behind a heatmap, and any table.

Every CSV the app writes goes through `table_to_csv`, which neutralises text cells a spreadsheet would run as a
formula (OWASP's CSV injection guidance): a model's name, a file's name, a task's data and an input are user text,
and a shared link hands them to a classmate's spreadsheet.

One kaleido browser is started lazily (~3-6 s) and kept for the process (~0.15-0.3 s per image after, most
of it kaleido reloading its tab), in its own event-loop thread, so Streamlit sessions share it and never run
asyncio themselves. Its RENDER_TABS tabs render side by side: a batch (figures_to_images) keeps them all busy.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import html
import os
import re
import shutil
import threading
from collections.abc import Iterator, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from transformer.i18n import t

FORMATS = ("png", "svg")
# Toolbar buttons no chart shows: selection and lasso have nothing to act on, zoom in / zoom out / autoscale repeat a
# drag and "reset axes". The shorter toolbar keeps clear of a narrow chart's title when it appears on hover.
TOOLS_LEFT_OUT = ("select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d")
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
START_TIMEOUT_S, RENDER_TIMEOUT_S = 60.0, 30.0
RENDER_TABS = 2  # kaleido tabs: one renders while another reloads (a 2-core laptop's worth)
DEFAULT_SIZE = (1000, 700)


class ExportError(RuntimeError):
    """A server-side image could not be made; the message says why in plain words."""


def chart_filename(task: str, kind: str, layer: int | None = None, head: int | None = None,
                   step: int | None = None, ext: str | None = None) -> str:
    """"reverse_cross_L1H3_step05.svg" from 0-based layer/head/step indices (named 1-based, as charts
    show them); without `ext`, the bare stem that toolbar downloads want."""
    parts = [re.sub(r"[^A-Za-z0-9_-]+", "-", str(p)).strip("-") or "chart" for p in (task, kind)]
    unit = "".join(f"{letter}{value + 1}" for letter, value in (("L", layer), ("H", head)) if value is not None)
    parts += [unit] if unit else []
    parts += [f"step{step + 1:02d}"] if step is not None else []
    stem = "_".join(parts)
    return f"{stem}.{ext.lstrip('.')}" if ext else stem


def chart_config(filename_stem: str, fmt: str = "png", scale: float = 2) -> dict:
    """The plotly config of a chart drawn outside the app (`figure_to_html`'s page), with the toolbar of the app's
    own charts (ui/step_player.js): its camera downloads `filename_stem.fmt` at `scale`; no plotly logo, and no
    button of TOOLS_LEFT_OUT."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if not 0.5 <= scale <= 5:
        raise ValueError(f"scale must lie in 0.5..5, got {scale}")
    return {"displaylogo": False, "modeBarButtonsToRemove": list(TOOLS_LEFT_OUT),
            "toImageButtonOptions": {"format": fmt, "filename": filename_stem, "scale": scale}}


def browser_path() -> str | None:
    """The Chromium kaleido should drive: $BROWSER_PATH if set, else the first browser found on PATH."""
    if os.environ.get("BROWSER_PATH"):
        path = os.environ["BROWSER_PATH"]
        return path if os.access(path, os.X_OK) else None
    return next((found for name in BROWSER_NAMES if (found := shutil.which(name))), None)


class _Renderer:
    """A kaleido browser living in its own event-loop thread; render() is safe from any thread."""

    def __init__(self, path: str):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kaleido-loop", daemon=True)
        self._thread.start()
        self._kaleido = None
        try:
            self._kaleido = self._run(self._open(path), START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    @staticmethod
    async def _open(path: str):
        import kaleido  # function-local: 0.1 s to import, needed only when a figure is exported on the server

        # Rendering needs no network (the page and plotly.js are local); a proxy that refuses everything keeps
        # Chromium's own background lookups (accounts, updates, search engines) from leaving the machine.
        browser = kaleido.Kaleido(n=RENDER_TABS, timeout=RENDER_TIMEOUT_S, mathjax=False, path=path,
                                  proxy_server="127.0.0.1:9")
        await browser.open()
        return browser

    def _run(self, coroutine, timeout: float):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def submit(self, fig: go.Figure, opts: dict) -> concurrent.futures.Future:
        """Queue `fig` for the next free tab; the future holds the image bytes (cancelling it drops the render)."""
        return asyncio.run_coroutine_threadsafe(self._kaleido.calc_fig(fig, opts=opts), self._loop)

    def close(self) -> None:
        if self._kaleido is not None:
            try:
                self._run(self._kaleido.close(), 10)
            except Exception:  # noqa: BLE001 - closing a broken browser is best effort
                pass
            self._kaleido = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


_lock = threading.Lock()
_state: dict = {"renderer": None, "failure": None}


def image_export_available() -> tuple[bool, str]:
    """(True, where the browser is) when server-side PNG/SVG export can work here, else (False, why)."""
    if _state["failure"]:
        return False, _state["failure"]
    try:
        import kaleido  # noqa: F401  (function-local: see _open)
    except ImportError:
        return False, t("messages.no_kaleido")
    path = browser_path()
    if path is None:
        where = t("messages.browser_path", path=repr(os.environ["BROWSER_PATH"])) if os.environ.get(
            "BROWSER_PATH") else t("messages.no_chromium")
        return False, t("messages.install_chromium", where=where)
    return True, t("messages.chromium_at", path=path)


def _renderer() -> _Renderer:
    with _lock:
        if _state["renderer"] is None:
            ok, reason = image_export_available()
            if not ok:
                raise ExportError(reason)
            try:
                _state["renderer"] = _Renderer(browser_path())
            except Exception as exc:  # a browser that cannot start will not start on the next rerun either
                _state["failure"] = f"the Chromium at {browser_path()} did not start for kaleido ({exc!r})"
                raise ExportError(_state["failure"]) from exc
        return _state["renderer"]


def shutdown() -> None:
    """Close the shared browser (it restarts on the next export). Called at interpreter exit."""
    with _lock:
        renderer, _state["renderer"] = _state["renderer"], None
    if renderer is not None:
        renderer.close()


atexit.register(shutdown)


def figures_to_images(figs: Sequence[go.Figure], fmt: str = "png", scale: float = 2) -> Iterator[bytes]:
    """PNG or SVG bytes of each figure at its own layout size, in order. All are handed to kaleido at once, so
    its tabs render them side by side while the caller uses the first ones; ExportError says why it cannot."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    renderer = _renderer()
    futures = [renderer.submit(fig, {"format": fmt, "scale": scale,
                                     "width": fig.layout.width or DEFAULT_SIZE[0],
                                     "height": fig.layout.height or DEFAULT_SIZE[1]}) for fig in figs]
    try:
        for future in futures:  # each waits at most one render once the one before it is done
            try:
                yield future.result(RENDER_TIMEOUT_S + 5)
            except Exception as exc:  # a crashed or stuck browser: drop it so the next export starts a fresh one
                with _lock:
                    if _state["renderer"] is renderer:
                        _state["renderer"] = None
                renderer.close()
                raise ExportError(f"image export failed: {exc!r}") from exc
    finally:  # an error, or a caller that stopped early: the renders still queued are dropped
        for future in futures:
            future.cancel()


def figure_to_image(fig: go.Figure, fmt: str = "png", scale: float = 2) -> bytes:
    """PNG or SVG bytes of `fig` at its own layout size, rendered on the server by kaleido; ExportError says
    why when it cannot."""
    return next(figures_to_images([fig], fmt, scale))


def figure_to_html(fig: go.Figure, filename_stem: str, fmt: str = "png") -> bytes:
    """A standalone HTML file with plotly.js inlined: works offline, needs no server-side browser; its toolbar's
    camera saves `filename_stem.fmt` (chart_config)."""
    config = chart_config(filename_stem, fmt)
    return pio.to_html(fig, include_plotlyjs=True, full_html=True, config=config).encode("utf-8")


def without_masked(values, mask) -> np.ndarray:
    """`values` with the cells `mask` hides (False) set to NaN, which a CSV writes as empty cells: the numbers
    of a chart that draws masked cells as masked, not as the raw score under them."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.broadcast_to(np.asarray(mask, dtype=bool), values.shape), values, np.nan)


def matrix_to_csv(matrix, row_labels: list[str], col_labels: list[str], corner: str = "query \\ key") -> str:
    """The numbers behind a heatmap: one header row of column labels, one labelled row per matrix row.
    Chart labels are HTML-escaped for plotly ("00 &lt;s&gt;"); the CSV holds them as plain text ("00 <s>")."""
    values = np.asarray(matrix)
    if values.ndim != 2 or values.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix of shape {values.shape} for {len(row_labels)} x {len(col_labels)} labels")
    rows, cols = ([html.unescape(str(label)) for label in labels] for labels in (row_labels, col_labels))
    import pandas as pd  # function-local: its 0.3 s import would delay every page's first chart

    return table_to_csv(pd.DataFrame(values, index=pd.Index(rows, name=corner), columns=cols), index=True)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as the start of a formula
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%?")  # "-0.5", "+3", "-1e-05": a number, not a formula


def safe_cell(value):
    """`value` as a CSV cell a spreadsheet shows as written: text that starts like a formula gets a leading `'`
    (OWASP's advice), unless it is a plain number such as "-0.5"; numbers and other values are left alone."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def table_to_csv(frame, index: bool = False) -> str:
    """`frame` (a pandas DataFrame) as CSV text with every text cell, column name and index label made safe
    (`safe_cell`); lines end in CRLF (RFC 4180), so a cell holding a CR or LF is quoted and stays one cell."""
    safe = frame.map(safe_cell).rename(columns=safe_cell, index=safe_cell)
    safe.columns.name = safe_cell(frame.columns.name)
    safe.index.name = safe_cell(frame.index.name)
    return safe.to_csv(index=index, lineterminator="\r\n")
