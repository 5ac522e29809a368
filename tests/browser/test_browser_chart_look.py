"""The app's charts (ui/step_player.py's component, in ui/chart_look.py's look) read like Streamlit's own chart
element: the same figures drawn both ways (tests/helpers/look_app.py) get the same fonts, colours, legend, colour
bar and hover labels from plotly.js where the figures set none of their own; a chart on a page that sent no
preload (ui/preload.py) loads its code itself; and a colour bar's title stands clear of its top label."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.browser import serving, wait_for_app

from benchmarks.timing import plot_page
from transformer.charts import attention_heatmap
from ui.chart_look import STREAMLIT_LOOK
from ui.display import presenter_sized
from ui.preload import PLOTLY_FILE

pytestmark = pytest.mark.browser

# What plotly.js made of a chart's layout: every setting the look gives
LOOK_JS = """(key) => {
  const el = document.querySelector(`.st-key-${key} .js-plotly-plot`), L = el._fullLayout;
  const font = (f) => [f.family.split(',')[0].trim(), f.color, f.size];  // the typeface used (listed twice)
  const bar = el._fullData.find(d => d.colorbar)?.colorbar;
  return {
    font: font(L.font), title: [...font(L.title.font), L.title.x, L.title.xanchor,
                                el.querySelector('.gtitle').innerHTML.startsWith('<tspan')],  // bold
    ticks: [font(L.xaxis.tickfont), font(L.yaxis.tickfont)],
    axis_titles: [font(L.xaxis.title.font), font(L.yaxis.title.font)],
    grid: [L.xaxis.showgrid, L.yaxis.gridcolor, L.yaxis.zerolinecolor],
    legend: L.showlegend ? [font(L.legend.font), L.legend.borderwidth, L.legend.valign] : null,
    colorbar: bar ? [bar.thickness, bar.outlinecolor, font(bar.tickfont), font(bar.title.font)] : null,
    hover: [L.hoverlabel.bgcolor, L.hoverlabel.bordercolor, font(L.hoverlabel.font)],
    background: [L.paper_bgcolor, L.plot_bgcolor], pad: L.margin.pad};
}"""


@pytest.fixture(scope="module")
def look_server():
    with serving("tests/helpers/look_app.py") as server:
        yield server


@pytest.mark.parametrize("name", ["bars", "heatmap"])
def test_the_apps_charts_look_like_streamlits_chart_element(look_server, page, name):
    page.goto(look_server.url)
    wait_for_app(page)
    for key in (f"streamlit_{name}", f"ours_{name}"):
        page.locator(f".st-key-{key} .js-plotly-plot .main-svg").first.wait_for()
    ours, streamlit = (page.evaluate(LOOK_JS, f"{side}_{name}") for side in ("ours", "streamlit"))
    assert ours == streamlit
    assert (ours["legend"] is not None) == (name == "bars") and (ours["colorbar"] is not None) == (name == "heatmap")


def test_a_chart_on_a_page_without_the_preload_loads_the_chart_code_itself(look_server, page):
    page.goto(f"{look_server.url}/?alone=1")
    wait_for_app(page)
    page.locator(".st-key-ours_bars .js-plotly-plot .main-svg").first.wait_for()
    assert page.locator("#ap-preload-charts").count() == 0
    fetched = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name.split('/').pop())")
    assert PLOTLY_FILE in fetched


# A colour bar's title (its words, without the lift under them) and its topmost tick label, as boxes of text: their
# overlap in pixels, and the label's height
BAR_TITLE_JS = """(spec) => Plotly.newPlot('plot', spec.data, {...spec.layout, template: spec.template}).then(() => {
  const title = document.querySelector('.colorbar .cbtitle text');
  const words = document.createRange();
  words.selectNodeContents(document.createTreeWalker(title, NodeFilter.SHOW_TEXT).nextNode());
  const labels = [...document.querySelectorAll('.colorbar .cbaxis text')].map(t => t.getBoundingClientRect());
  const top = labels.reduce((a, b) => (a.top < b.top ? a : b));
  return {overlap: words.getBoundingClientRect().bottom - top.top, height: top.height};
})"""


@pytest.mark.parametrize("presenter", [False, True])
def test_a_colour_bars_title_stands_clear_of_its_top_label(page, presenter):
    """The boxes of the title's words and of the "1" above the bar may share a descender's depth, not the label's
    top: plain, they overlapped by a fifth of the label's height and the letters touched it."""
    labels = [f"{i:02d} {c}" for i, c in enumerate("abcdefgh")]
    fig = attention_heatmap(np.full((8, 8), 1 / 8), labels, labels, "Cross-attention")
    spec = json.loads((presenter_sized(fig) if presenter else fig).to_json()) | {"template": STREAMLIT_LOOK}
    page.set_content(plot_page())
    found = page.evaluate(BAR_TITLE_JS, spec)
    assert found["overlap"] < 0.1 * found["height"], found
