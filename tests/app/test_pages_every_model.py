"""Every page opens cleanly on every shipped model: its default state raises nothing and shows no error,
and its charts are drawn, each of a kind the app's plotly.js build draws (the page tests go deep on `reverse`; this
catches what differs per task, such as sentencepiece pieces in `numbers` or the digits and dashes of `dates`)."""

from __future__ import annotations

import pytest
from helpers import plotly_specs
from helpers.repo import ROOT

TRACES = plotly_specs.build_traces()
# page -> what its default state must show: charts, or the checkpoints page's table of models
PAGES = {"pages/learn/home.py": "bidi_component", "pages/learn/code.py": "bidi_component",
         "pages/explore/decode.py": "bidi_component",
         "pages/explore/attention.py": "bidi_component", "pages/concepts/masks.py": "bidi_component",
         "pages/concepts/positions.py": "bidi_component", "pages/models/train.py": "bidi_component",
         "pages/models/checkpoints.py": "dataframe"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.rsplit("/", 1)[-1][:-3])
def test_page_opens_on_every_shipped_model(app, page):
    at = app(page)
    picker = at.selectbox(key="active_model_widget")
    assert len(picker.options) == len(list((ROOT / "assets" / "checkpoints").glob("*.safetensors")))
    for name in picker.options:
        at.selectbox(key="active_model_widget").select(name).run()
        assert not at.exception, (name, [e.value for e in at.exception])
        assert not at.error, (name, [e.value for e in at.error])
        assert at.get(PAGES[page]), f"{page} shows no {PAGES[page]} on {name}"
        drawn = {trace.get("type", "scatter") for el in at.get("bidi_component")
                 for figure in plotly_specs.data(el).get("figures", []) for trace in figure["data"]}
        assert drawn <= TRACES, (page, name, drawn - TRACES)
