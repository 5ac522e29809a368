"""ui/step_player.py without a browser: a figure's spec reaches the browser as the figure itself would, a step or
a click from the browser reaches the page only when it is one it can be (the browser's part:
test_browser_step_player.py, test_browser_attention.py)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
from helpers.plotly_specs import array

from transformer.charts import step_attention_spec, token_labels, topk_spec
from ui import step_player


@pytest.mark.parametrize("spec", [
    step_attention_spec(np.random.default_rng(0).random((2, 4, 6)), token_labels(list("hello") + ["</s>"]),
                        "Cross-attention · step 3"),
    topk_spec(["a", "</s>", " "], [0.9, 0.06, 0.04], chosen="</s>", title="Next-token probabilities · step 2"),
])
def test_a_spec_reaches_the_browser_as_its_figure_would(spec):
    sent, figure = step_player.figure_json(spec), step_player.figure_json(go.Figure(spec))
    assert sent["layout"] == figure["layout"]  # plotly.py's default template left out of both
    for ours, theirs in zip(sent["data"], figure["data"], strict=True):
        assert ours.keys() == theirs.keys()
        for name in ours:
            if name == "z" or (name == "x" and ours["type"] == "bar"):  # float32 numbers: a list of their
                # shortest decimals here, a typed array there; the same float32 either way
                np.testing.assert_array_equal(array(ours[name]).astype(np.float32), array(theirs[name]))
            else:
                assert ours[name] == theirs[name], name


@pytest.mark.parametrize("sent, passed", [(3, [2]), (1, [0]), (5, [4]), (0, []), (6, []), (-1, []), ("3", []),
                                          (2.0, []), (True, []), (None, [])])
def test_a_step_from_the_browser_reaches_the_page_only_when_it_is_the_decodes(monkeypatch, sent, passed):
    monkeypatch.setattr(step_player.st, "session_state", {"player": {"step": sent}})
    moved: list[int] = []
    step_player._moved("player", 5, moved.append)
    assert moved == passed


@pytest.mark.parametrize("sent, passed", [(0, 0), (37, 37), (-1, None), ("3", None), (2.0, None), (True, None),
                                          (None, None)])
def test_a_click_from_the_browser_reaches_the_page_as_a_point_or_none(monkeypatch, sent, passed):
    """A point index of the click layer, or None (a double click, or anything else the browser may send)."""
    monkeypatch.setattr(step_player.st, "session_state", {"chart": {"click": sent}})
    heard: list[int | None] = []
    step_player._clicked("chart", heard.append)
    assert heard == [passed]


def test_a_figure_is_named_by_what_it_draws():
    """The same figure, the same name (drawn nothing anew); any change, a new name (drawn into the graph shown)."""
    one = go.Figure(go.Heatmap(z=[[0.1, 0.9]]))
    named = step_player._figure_json(one)[1]
    assert step_player._figure_json(go.Figure(one))[1] == named
    assert step_player._figure_json(go.Figure(go.Heatmap(z=[[0.1, 0.8]])))[1] != named
