"""Reading plotly charts back out of an AppTest run (they arrive as unknown elements holding JSON specs), and the
charts of a step player (ui/step_player.py: st.components.v2 elements holding every step's figure)."""

from __future__ import annotations

import base64
import html
import json
import re

import numpy as np


def array(value) -> np.ndarray:
    """A plotly JSON array: a plain list, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict):
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = [int(n) for n in str(value.get("shape", len(flat))).split(",")]
        return flat.reshape(shape)
    return np.asarray(value, dtype=np.float64)


def specs(at) -> list[dict]:
    """The specs of every chart on the page, in page order."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def spec(at, key: str) -> dict:
    """The spec of the chart shown with widget key `key` (Streamlit ends the element id with it): an st.plotly_chart,
    or a live chart (ui/step_player.live_chart)."""
    found = [json.loads(el.proto.spec) for el in at.get("plotly_chart") if el.proto.id.endswith(f"-{key}")]
    found += [data["figures"][0] for el in at.get("bidi_component") if el.proto.id.endswith(f"-{key}")
              and (data := json.loads(el.proto.json)).get("alone")]
    assert len(found) == 1, f"{len(found)} charts with key {key!r}"
    return found[0]


def shown(at, key: str) -> bool:
    """Whether a chart with widget key `key` is on the page (see `spec`)."""
    return any(el.proto.id.endswith(f"-{key}") for kind in ("plotly_chart", "bidi_component") for el in at.get(kind))


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
    found = [el for el in at.get("bidi_component") if el.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, f"{len(found)} components with key {key!r}"
    return json.loads(found[0].proto.json)


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
