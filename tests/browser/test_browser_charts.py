"""Token labels drawn as categories in the app's own plotly.js. A date's labels ("06 7", "09 2") look like
numbers to plotly.js's guess; left to guess, it makes a linear axis and paints no heatmap cells. On the shipped
`dates` model, every heatmap on the decode, attention, masks and positions pages must keep its labels."""

from __future__ import annotations

import pytest
from helpers.browser import choose, open_app_page, screenshot, wait_for_app
from helpers.repo import ROOT

DATES = ROOT / "assets" / "checkpoints" / "dates.safetensors"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not DATES.is_file(), reason="the pretrained dates checkpoint is missing")]

# Per heatmap chart: its title and, for each axis a heatmap trace gives text labels, plotly.js's axis type,
# whether it shows tick labels, and how many it drew.
HEATMAP_AXES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(el => el.data.some(d => d.type === 'heatmap'))
    .map(el => ({title: el.querySelector('.gtitle').textContent, axes: [...new Set(el.data
        .filter(d => d.type === 'heatmap')
        .flatMap(d => ['x', 'y'].filter(c => Array.isArray(d[c]) && typeof d[c][0] === 'string')
            .map(c => c + 'axis' + (d[c + 'axis'] || c).slice(1))))]
        .map(name => ({name, type: el._fullLayout[name].type, labelled: el._fullLayout[name].showticklabels,
                       ticks: [...el.querySelectorAll(`.${name.replace('axis', '')}tick text`)].length}))}))"""
PAGES = {"Step-by-step decoding": 2, "All attention heads": 4, "Masks": 9, "Positional encoding": 4}  # heatmaps


def test_date_labels_stay_categories_on_every_page(fresh_server, page):
    pg = page
    open_app_page(pg, f"{fresh_server.url}/decode")
    choose(pg, pg.locator("[data-testid=stSidebar]").get_by_role("combobox"), "dates (pretrained)")
    wait_for_app(pg)
    for link, least in PAGES.items():
        pg.locator("[data-testid=stSidebarNav]").get_by_role("link", name=link).click()
        wait_for_app(pg)
        pg.wait_for_function(f"() => ({HEATMAP_AXES_JS})().length >= {least}", timeout=30_000)  # all painted
        charts = pg.evaluate(HEATMAP_AXES_JS)
        label_axes = [(c["title"], axis) for c in charts for axis in c["axes"]]
        assert label_axes, f"{link}: no heatmap axis with token labels"
        for title, axis in label_axes:
            assert axis["type"] == "category", (link, title, axis)
            assert axis["ticks"] or not axis["labelled"], (link, title, axis)  # shared axes hide theirs
        screenshot(pg, f"dates-{link.lower().replace(' ', '-')}")
