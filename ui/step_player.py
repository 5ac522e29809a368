"""Stepping through a decode in the browser: every step's charts reach the page once per decode, and a step
click or key shows the new step's charts at once (drawn beforehand in idle time, or then; no script run first);
the server hears of the new step afterwards, and its run updates only what it draws itself (the force panel, the
numbers as CSV, the URL).

A player (step buttons, slider, arrow keys, the token strips and the step's sentence) and the charts that follow
it meet on a channel; `version` names the decode they show. Both are one st.components.v2 component whose
JavaScript is step_player.js. The charts are drawn with the app's build of plotly.js, which ui/preload.py has the
browser load, in Streamlit's chart look (ui/chart_look.py).

`plot` is that chart with no player: one figure, drawn again in place when it changes. Every chart of the app is
one of the two (ui/display.show_figure draws the others)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.json import to_json_plotly
import streamlit as st

from transformer.charts.export import TOOLS_LEFT_OUT
from transformer.i18n import t

from .chart_look import STREAMLIT_LOOK
from .failure import callback
from .preload import plotly_path

CHIP = ("display:inline-block;margin:2px 3px 4px 0;padding:1px 9px;border-radius:7px;"
        "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:1.05rem;line-height:1.7;")
CHIP_STYLES = {
    "plain": "background:#eef1f6;border:1px solid #c9d1e0;color:#222;",
    "chosen": "background:#E69F00;border:2px solid #8a5a00;color:#000;font-weight:700;",
    "future": "background:#fff;border:1px dashed #c4c4c4;color:#9a9a9a;",
    "differs": "background:#fde8dc;border:1px solid #D55E00;color:#222;",
}
FORCED_RING = "box-shadow:0 0 0 2px #D55E00;"  # added to any chip whose token was forced

HERE = Path(__file__).parent
# The chips' looks are the ones the page's own chip rows use (pages/explore/decode.py), as classes.
CSS = "\n".join([(HERE / "step_player.css").read_text(), f".ap-chip {{ {CHIP} }}",
                 *(f".ap-chip-{name} {{ {style} }}" for name, style in CHIP_STYLES.items()),
                 f".ap-chip-forced {{ {FORCED_RING} }}"])

_component = st.components.v2.component("ap_step_player", js=(HERE / "step_player.js").read_text(), css=CSS,
                                        isolate_styles=False)


def _mount(key: str, data: dict, **kwargs) -> None:
    """Show the component with `data` as the bytes of one JSON text: Streamlit passes bytes on as they are, where it
    looks for dataframes in any other data, which imports pandas (0.3 s of a fresh server's first page run; ui/warm.py
    imports it later, between page views)."""
    _component(key=key, data=json.dumps(data).encode(), **kwargs)


def version(*parts) -> str:
    """A short name for what a player and its charts show (the decode, the settings its charts depend on)."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def chip(text: str, tip: str, forced: bool = False) -> dict:
    """One token chip of a strip: its text (shown as text, never as HTML), hover tip, forced or not."""
    return {"text": text, "tip": tip, "forced": forced}


def player(key: str, channel: str, decode: str, start: int, labels: tuple[str, str], source: list[dict],
           first: dict, steps: list[dict], on_step: Callable[[int], None]) -> None:
    """The step controls over `steps` (each {"chip", "caption", "sentence"}: the decoder chip it writes, and
    its caption and sentence as HTML the server has escaped), showing step `start` (0-based) of the decode
    named `decode`. `labels` name the source and decoder strips; `source` holds the source chips, `first` the
    decoder's start token. A step the learner moves to reaches `on_step(step)` (0-based) afterwards."""
    texts = {"first": t("app.player.first"), "prev": t("app.player.prev"), "next": t("app.player.next"),
             "last": t("app.player.last"), "step": t("app.player.step", step="{step}", steps="{steps}")}  # JS fills
    data = {"role": "player", "channel": channel, "version": decode, "start": start, "labels": list(labels),
            "source": source, "start_chip": first, "steps": steps, "texts": texts}
    _mount(key, data, on_step_change=callback(lambda: _moved(key, len(steps), on_step)))


def _moved(key: str, n_steps: int, on_step: Callable[[int], None]) -> None:
    """The player's trigger: a 1-based step from the browser, passed on only when it is one of this decode's."""
    step = st.session_state[key]["step"]
    if isinstance(step, int) and not isinstance(step, bool) and 1 <= step <= n_steps:
        on_step(step - 1)


def figure_json(fig: go.Figure | dict) -> dict:
    """A figure, or a spec of plain dicts (charts.*_spec), as plotly.js takes it. A spec goes straight to JSON
    (no plotly.py objects: ~10x cheaper, and a decode sends every step's charts); a figure loses plotly.py's
    default template."""
    return _figure_json(fig)[0]


def _figure_json(fig: go.Figure | dict) -> tuple[dict, str]:
    """figure_json's spec and a name for it (the same figure, the same name)."""
    text = to_json_plotly(fig) if isinstance(fig, dict) else pio.to_json(fig, validate=False)
    spec = json.loads(text)
    spec["layout"].pop("template", None)
    return spec, version(text)


def chart(key: str, channel: str, decode: str, kind: str, figures: list[dict], filenames: list[str], fmt: str,
          look: tuple = (), scale: float = 2) -> None:
    """A chart that shows `figures[step]` (figure_json specs) for the step its channel's player shows, in the
    decode named `decode`; `look` names whatever else the figures depend on (a scale, presenter mode), so new
    figures (or a new toolbar) are drawn anew. Its toolbar camera saves `filenames[step].fmt` at `scale`."""
    _mount(key, _chart_data(channel, decode, kind, figures, filenames, fmt, look, scale))


def plot(key: str, fig: go.Figure | dict, filename: str, fmt: str, *, width: str | int = "stretch",
         on_point: Callable[[int | None], None] | None = None, scale: float = 2) -> None:
    """A chart of one figure, with no player. A changed figure is drawn into the same graph (Plotly.react), the same
    figure sent again draws nothing: the Train page's live charts renew theirs every 1.5 s, and st.plotly_chart's
    way to that redraw (its theme applied anew, its element state updated) cost Chromium ~0.07 of a core more on a
    2-core AVX2 laptop, which its training lost (docs/MEASUREMENTS.md). `width`: "stretch" (the column's),
    "content" (the figure's own, where it sets one) or pixels. `on_point(i)` hears of a click on point i of the
    figure's click layer (its one trace with numbered points: charts.attention_heatmap's invisible scatter), and
    of a double click as None (the pick cleared). The toolbar camera saves `filename.fmt` at `scale`."""
    spec, name = _figure_json(fig)
    if width == "content":
        width = spec["layout"].get("width") or "stretch"
    data = {**_chart_data(key, "", key, [spec], [filename], fmt, (), scale),
            "alone": True, "figure_id": name, "clickable": on_point is not None}
    callbacks = {} if on_point is None else {"on_click_change": callback(lambda: _clicked(key, on_point))}
    _mount(key, data, width=width, **callbacks)


def _clicked(key: str, on_point: Callable[[int | None], None]) -> None:
    """A chart's trigger: a point index from the browser (None: a double click), passed on only when it is one."""
    index = st.session_state[key]["click"]
    on_point(index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else None)


def _chart_data(channel: str, decode: str, kind: str, figures: list[dict], filenames: list[str], fmt: str,
                look: tuple, scale: float) -> dict:
    return {"role": "chart", "channel": channel, "version": decode,
            "figures_id": version(decode, kind, look, fmt, scale),
            "kind": kind, "figures": figures, "filenames": filenames,
            "config": {"format": fmt, "scale": scale, "left_out": TOOLS_LEFT_OUT},
            "template": STREAMLIT_LOOK, "plotly": plotly_path(), "waiting": t("app.player.waiting"),
            "texts": {"download": t("app.player.download", format=fmt.upper()),
                      "fullscreen": t("app.player.fullscreen")}}
