"""A page for tests/browser/test_browser_chart_look.py: the same figures drawn by st.plotly_chart in Streamlit's
theme and by the app's own chart (ui/display.show_figure, in ui/chart_look.py's look), one pair under the other;
with `?alone=1`, the app's chart of the first alone, without ui/preload.py's element (the chart loads its code)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from ui import display
from ui.preload import preload_charts

AXES = {"xaxis": {"title": {"text": "token"}}, "yaxis": {"title": {"text": "probability"}}}
FIGURES = {
    "bars": go.Figure([go.Bar(x=["a", "b", "c"], y=[0.5, 0.3, 0.2], name="before"),
                       go.Bar(x=["a", "b", "c"], y=[0.7, 0.2, 0.1], name="after")],
                      layout={"title": {"text": "Bars"}, "height": 300, **AXES}),
    "heatmap": go.Figure(go.Heatmap(z=np.linspace(0, 1, 16).reshape(4, 4), colorbar={"title": {"text": "weight"}}),
                         layout={"title": {"text": "Heatmap"}, "height": 300}),
}

if st.query_params.get("alone") == "1":
    display.show_figure(FIGURES["bars"], "bars", key="ours_bars")
else:
    preload_charts()
    for name, fig in FIGURES.items():
        st.plotly_chart(fig, key=f"streamlit_{name}")
        display.show_figure(fig, name, key=f"ours_{name}")
