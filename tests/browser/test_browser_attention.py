"""The all-heads attention page in a real browser: opened first on a fresh server, heatmaps painted, the grid
exported as one image (or the HTML fallback), then kind, layer, head and a clicked cell changed through the
widgets, and the page's URL opened in a new browser context on a second fresh server shows the same view."""

from __future__ import annotations

import json

import pytest
from helpers.browser import choose, on_a_fresh_server, open_app_page, screenshot, settle, wait_for_app
from helpers.repo import needs_reverse

from transformer.charts.export import image_export_available

pytestmark = [pytest.mark.browser, needs_reverse]
GRID = ".st-key-attention_grid_cross"
BIG = "[class*=st-key-attention_big_reverse_cross]"
PICKED = "[class*=st-key-attention_big_reverse_encoder_self_L2H3]"  # encoder self-attention, layer 2, head 3

VIEW_JS = """() => ({
    model: document.querySelector('.st-key-active_model_widget input').value,
    input: document.querySelector('.st-key-shared_input_widget input').value,
    kind: [...document.querySelectorAll('.st-key-attention_kind_widget button')]
        .filter(b => b.getAttribute('aria-checked') === 'true').map(b => b.innerText),
    layer: document.querySelector('.st-key-attention_layer_encoder_self input').value,
    head: document.querySelector('.st-key-attention_head_encoder_self input').value,
    charts: [...document.querySelectorAll('.js-plotly-plot')].map(el => ({
        title: el.querySelector('.gtitle').textContent, shapes: el.layout.shapes || [],
        data: el.data.map(d => ({x: d.x, y: d.y, z: d.z}))})),
    text: document.querySelector('[data-testid=stMainBlockContainer]').innerText})"""


def view(pg) -> dict:
    """What the page shows: widget values, every chart's title, data and outlined cell, and the text (the mouse
    moved off the charts first: a hover label is no part of the view)."""
    pg.mouse.move(1, 1)
    for chart in (PICKED, ".st-key-attention_grid_encoder_self", ".st-key-attention_stats_encoder_self"):
        pg.locator(f"{chart} .js-plotly-plot").wait_for()
    return pg.evaluate(VIEW_JS)


def click_cell(pg, chart: str, query: int, key: int, size: int, clicks: int = 1) -> None:
    """Click cell (query, key) of a size x size heatmap (row 0 at the top), `clicks` times at once."""
    drag = pg.locator(f"{chart} .nsewdrag").first
    drag.scroll_into_view_if_needed()
    box = drag.bounding_box()
    pg.mouse.click(box["x"] + (key + 0.5) * box["width"] / size, box["y"] + (query + 0.5) * box["height"] / size,
                   click_count=clicks)


def test_attention_page_paints_exports_and_its_link_restores_the_view_on_a_fresh_server(fresh_server, page,
                                                                                         _browser):
    pg = page
    open_app_page(pg, f"{fresh_server.url}/attention")
    assert pg.get_by_role("heading", name="All attention heads").is_visible()
    for chart in (GRID, BIG):
        pg.locator(f"{chart} .heatmaplayer image").first.wait_for(state="attached")
    assert "Cross-attention · all" in pg.locator(GRID).inner_text()
    assert "?" not in pg.url  # the default view: nothing in the URL

    click_cell(pg, BIG, 0, 0, 15)  # the top-left cell: query 00 <s>, key 00
    pg.get_by_text("gives key").wait_for()
    assert "Query 00 <s> gives key 00" in pg.get_by_text("gives key").inner_text()
    pg.wait_for_function("() => location.search.includes('cell=0%2C0') || location.search.includes('cell=0,0')")
    wait_for_app(pg)  # the address bar changes during the cell's run: a click before its end may meet a button redrawn
    click_cell(pg, BIG, 0, 0, 15, clicks=2)  # a double click clears the pick
    pg.wait_for_function("() => !location.search.includes('cell=')")
    wait_for_app(pg)
    assert not pg.get_by_text("gives key").count()

    images, _ = image_export_available()
    label, signature = ("Download all heads as PNG", b"\x89PNG") if images else ("Download all heads as HTML",
                                                                                b"<html")
    with pg.expect_download(timeout=90_000) as info:
        pg.get_by_role("button", name=label).click()
    download = info.value
    assert download.suggested_filename == ("reverse_cross_all-heads.png" if images else
                                           "reverse_cross_all-heads.html")
    data = open(download.path(), "rb").read()
    assert len(data) > 1000 and signature in data[:200]
    if images:  # the HTML file is offered either way; its camera saves under the chart's name, in the sidebar's format
        with pg.expect_download(timeout=90_000) as info:
            pg.get_by_role("button", name="Download all heads as HTML").click()
        data = open(info.value.path(), "rb").read()
    assert b'"toImageButtonOptions": {"format": "png", "filename": "reverse_cross_all-heads"' in data
    screenshot(pg, "attention_page")

    pg.locator(".st-key-attention_kind_widget").get_by_role("radio", name="Encoder self-attention").click()
    settle(pg)
    for picker, option in (("layer", "Layer 2"), ("head", "Head 3")):
        choose(pg, pg.locator(f".st-key-attention_{picker}_encoder_self"), option)
        settle(pg)
    click_cell(pg, PICKED, 2, 3, 15)
    pg.wait_for_function("() => /cell=2(%2C|,)3/.test(location.search)")
    settle(pg)
    link = pg.url
    assert all(part in link for part in ("v=1", "kind=encoder_self", "layer=2", "head=3"))
    original = view(pg)
    assert original["kind"] == ["Encoder self-attention"] and (original["layer"], original["head"]) == ("Layer 2",
                                                                                                      "Head 3")
    assert original["charts"][0]["title"] == "Encoder self-attention · layer 2 · head 3"
    assert original["charts"][0]["shapes"]  # the clicked cell is outlined
    assert "Query 02 " in original["text"] and "gives key 03 " in original["text"]
    screenshot(pg, "attention_linked_view")

    with on_a_fresh_server(_browser, link, fresh_server.url) as fresh:  # nothing of the first session
        assert json.dumps(view(fresh)) == json.dumps(original)  # as text: the grid's gaps are NaN
        assert fresh.url.split("?")[1] == link.split("?")[1]
