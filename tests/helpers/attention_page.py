"""The All attention heads page under AppTest: its widget keys and readings of its charts."""

from __future__ import annotations

import re

import numpy as np

from helpers.plotly_specs import array, specs
from ui.tables.attention import ATTENTION
from ui.tables.shared import SHARED

PAGE = "pages/explore/attention.py"
VIEW = ATTENTION.view()  # only for its key names
INPUT_BOX, KIND, MODEL_PICKER = VIEW.widget_key("input"), VIEW.widget_key("kind"), SHARED.view().widget_key("model")


def figures(at) -> dict[str, dict]:
    """Plotly specs on the page, keyed by title."""
    return {spec["layout"]["title"]["text"]: spec for spec in specs(at)}


def figure(at, pattern: str) -> tuple[str, dict]:
    """The one figure whose title matches `pattern` (a regular expression, from the start)."""
    found = [(title, spec) for title, spec in figures(at).items() if re.match(pattern, title)]
    assert len(found) == 1, (pattern, list(figures(at)))
    return found[0]


def shown_input(at) -> str:
    return at.text_input(key=INPUT_BOX).value


def big_heatmap(at) -> tuple[str, np.ndarray]:
    title, spec = figure(at, r".* · layer \d · head")
    return title, array(spec["data"][0]["z"])
