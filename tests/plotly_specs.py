"""Reading plotly charts back out of an AppTest run (they arrive as unknown elements holding JSON specs)."""

from __future__ import annotations

import base64
import json

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
    """The spec of the chart shown with widget key `key` (Streamlit ends the element id with it)."""
    found = [el for el in at.get("plotly_chart") if el.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, f"{len(found)} charts with key {key!r}"
    return json.loads(found[0].proto.spec)


def z(at, key: str, trace: int = 0) -> np.ndarray:
    """The z matrix of one heatmap trace (float64; NaN where the chart leaves a cell empty)."""
    values = spec(at, key)["data"][trace]["z"]
    if isinstance(values, list):
        return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=np.float64)
    return array(values).astype(np.float64)


def title(at, key: str) -> str:
    return spec(at, key)["layout"]["title"]["text"]
