"""The look st.plotly_chart's Streamlit theme gives a chart (Streamlit 1.67, the light base this app sets in
.streamlit/config.toml), as a plotly template for the charts the app draws itself (ui/step_player.py), so they
read like every other chart. Only what the app's charts use: fonts, title, axes, legends, colour bars, hover labels.
A figure's own settings win over it, as over Streamlit's. tests/browser/test_browser_step_player.py draws one figure
both ways and compares what plotly.js made of it."""

from __future__ import annotations

SANS = '"Source Sans", sans-serif'  # Streamlit's own typeface, which its page loads
GREY = "#808495"  # tick labels, axis titles, hover text
INK = "#2F2D2B"  # titles
TEXT = "#262730"  # legend entries
RULE = "#e6eaf1"  # grid, zero lines, ticks
SMALL_PX = 12  # tick labels, legend entries, hover text
TITLE_PX = 14  # axis and colour-bar titles


def _axis(standoff: int) -> dict:
    return {"gridcolor": RULE, "zerolinecolor": RULE, "tickcolor": RULE, "minor": {"gridcolor": RULE},
            "tickfont": {"color": GREY, "size": SMALL_PX}, "automargin": True,
            "title": {"font": {"color": GREY, "size": TITLE_PX}, "standoff": standoff}}


STREAMLIT_LOOK = {"layout": {
    "font": {"color": GREY, "family": SANS, "size": SMALL_PX},
    "title": {"font": {"family": SANS, "size": 16, "color": INK}, "pad": {"l": 4}, "x": 0, "xanchor": "left"},
    "paper_bgcolor": "#FFFFFF",
    "plot_bgcolor": "#FFFFFF",
    "xaxis": {**_axis(20), "showgrid": False, "zeroline": False},
    "yaxis": {**_axis(24), "ticklabelposition": "outside"},
    "margin": {"pad": 8, "r": 0, "l": 0},
    "legend": {"font": {"size": SMALL_PX, "color": TEXT},
               "title": {"font": {"size": SMALL_PX, "color": GREY}, "side": "top"},
               "valign": "top", "bordercolor": "transparent", "borderwidth": 0},
    "hoverlabel": {"bgcolor": "#FFFFFF", "bordercolor": "rgba(47, 45, 43, 0.2)",
                   "font": {"color": GREY, "family": SANS, "size": SMALL_PX}},
    "coloraxis": {"colorbar": {"thickness": 16, "xpad": 24, "outlinecolor": "transparent", "len": 0.75,
                               "title": {"font": {"color": GREY, "size": TITLE_PX}},
                               "tickfont": {"color": GREY, "size": SMALL_PX}}},
}}
