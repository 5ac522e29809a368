"""Every page opens cleanly on every shipped model: its default state raises nothing and shows no error,
and its charts are drawn (the page tests go deep on `reverse`; this catches what differs per task, such as
sentencepiece pieces in `numbers` or the digits and dashes of `dates`)."""

from __future__ import annotations

import pytest
from helpers.repo import ROOT

# page -> what its default state must show: charts, or the checkpoints page's table of models
PAGES = {"pages/learn/home.py": "plotly_chart", "pages/learn/code.py": "plotly_chart",
         "pages/explore/decode.py": "plotly_chart",
         "pages/explore/attention.py": "plotly_chart", "pages/concepts/masks.py": "plotly_chart",
         "pages/concepts/positions.py": "plotly_chart", "pages/models/train.py": "plotly_chart",
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
