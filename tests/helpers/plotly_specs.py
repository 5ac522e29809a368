"""Reading plotly charts back out of an AppTest run: every chart is an st.components.v2 element of
ui/step_player.py holding its figures as JSON, one (`plot`: a chart alone) or one per step (a step player's
chart); and the trace types the app's plotly.js build can draw."""

from __future__ import annotations

import base64
import html
import json
import re

import numpy as np

from ui.preload import PLOTLY_DIR, PLOTLY_FILE


def build_traces() -> frozenset[str]:
    """The trace types the app's plotly.js build registers (assets/plotly-build/index.js): a chart of any other type
    would stay blank."""
    code = (PLOTLY_DIR / PLOTLY_FILE).read_text(encoding="utf-8")
    return frozenset(re.findall(r'moduleType:"trace",name:"(\w+)"', code))


def array(value) -> np.ndarray:
    """A plotly JSON array: a plain list, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict):
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = [int(n) for n in str(value.get("shape", len(flat))).split(",")]
        return flat.reshape(shape)
    return np.asarray(value, dtype=np.float64)


def element_key(el) -> str:
    """The widget key an element was shown with (its id is `$$ID-<hash>-<key>`)."""
    return el.proto.id.split("-", 2)[2]


def data(el) -> dict:
    """The data of a component element (ui/step_player.py sends them as the bytes of one JSON text)."""
    return json.loads(el.proto.bytes)


def alone(at) -> dict[str, dict]:
    """Every chart alone on the page (ui/step_player.plot) by its widget key, in page order: its component data (the
    figure is data["figures"][0], the toolbar camera's file name data["filenames"][0])."""
    return {element_key(el): found for el in at.get("bidi_component") if (found := data(el)).get("alone")}


def specs(at) -> list[dict]:
    """The figures of every chart alone on the page, in page order."""
    return [chart["figures"][0] for chart in alone(at).values()]


def spec(at, key: str) -> dict:
    """The figure of the chart alone shown with widget key `key`."""
    found = alone(at)
    assert key in found, f"no chart with key {key!r}: {list(found)}"
    return found[key]["figures"][0]


def shown(at, key: str) -> bool:
    """Whether a chart (alone, or a step player's) with widget key `key` is on the page."""
    return any(element_key(el) == key for el in at.get("bidi_component"))


def z(at, key: str, trace: int = 0) -> np.ndarray:
    """The z matrix of one heatmap trace (float64; NaN where the chart leaves a cell empty)."""
    values = spec(at, key)["data"][trace]["z"]
    if isinstance(values, list):
        return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=np.float64)
    return array(values).astype(np.float64)


def title(at, key: str) -> str:
    return spec(at, key)["layout"]["title"]["text"]


def component(at, key: str) -> dict:
    """The data of the st.components.v2 element mounted with key `key` (a step player or one of its charts)."""
    found = [el for el in at.get("bidi_component") if element_key(el) == key]
    assert len(found) == 1, f"{len(found)} components with key {key!r}"
    return data(found[0])


def player_step(at, player: str = "decode_player") -> int:
    """The 0-based step the page's step player shows (the server's step: where it starts)."""
    return component(at, player)["start"]


def step_spec(at, key: str, player: str = "decode_player") -> dict:
    """The figure of a step player's chart for the step its player shows."""
    return component(at, key)["figures"][player_step(at, player)]


def player_choice(at, player: str = "decode_player") -> str:
    """The token the player's sentence names for the step it shows ("the model chooses x", "you forced x")."""
    line = component(at, player)["steps"][player_step(at, player)]["sentence"]
    return html.unescape(re.search(r"<b><code>(.+?)</code></b>", line)[1])
