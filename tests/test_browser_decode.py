"""The decoding page in a real browser, opened by its own URL on a fresh server: step twice, find the
heatmaps, export a chart from its toolbar."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, screenshot, wait_for_app
from transformer.checkpoints import load_bundle
from transformer.export import chart_filename

REVERSE = ROOT / "assets" / "checkpoints" / "reverse.safetensors"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not REVERSE.is_file(), reason="the pretrained reverse checkpoint is missing")]

CHARTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(el => ({
    title: el.querySelector('.gtitle').textContent, types: el.data.map(d => d.type),
    rows: el.data[0].y ? el.data[0].y.length : 0}))"""


def whole_page(pg, name: str) -> Path:
    """Streamlit scrolls inside its main area: grow the viewport to the content, shoot, and shrink it back."""
    height = pg.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
    pg.set_viewport_size({"width": 1400, "height": max(900, height + 40)})
    pg.wait_for_timeout(500)
    path = screenshot(pg, name)
    pg.set_viewport_size({"width": 1400, "height": 900})
    return path


def open_decode(pg, url: str) -> None:
    pg.goto(f"{url}/decode")
    wait_for_app(pg)
    pg.locator(".js-plotly-plot").nth(2).wait_for()


SLIDER = ".st-key-decode_step_slider input[type=range]"


def step(pg) -> int:
    """The step the slider shows (1-based)."""
    return int(pg.locator(SLIDER).input_value())


def click_and_wait(pg, key: str) -> None:
    before = step(pg)
    pg.locator(f".st-key-{key} button").click()
    pg.wait_for_function(f"() => document.querySelector('{SLIDER}').value != '{before}'")
    wait_for_app(pg)


def test_decode_url_first_step_twice_heatmaps_and_toolbar_export(fresh_server, page, tmp_path):
    pg = page
    open_decode(pg, fresh_server.url)
    if pg.get_by_role("dialog").count():  # Streamlit's "Page not found" notice: see the xfail test below
        pg.keyboard.press("Escape")
    assert pg.get_by_role("heading", name="Step-by-step decoding").is_visible()
    assert pg.locator("[data-testid=stSidebar]").get_by_text("Active model").is_visible()  # app.py ran too
    start = step(pg)
    assert start > 1  # the default decode sits at a middle step
    whole_page(pg, "decode-01-opened")

    click_and_wait(pg, "decode_next")
    click_and_wait(pg, "decode_next")
    assert step(pg) == start + 2
    charts = pg.evaluate(CHARTS_JS)
    heatmaps = [c for c in charts if "heatmap" in c["types"]]
    assert [c["title"].split(" · ")[0] for c in heatmaps] == ["Cross-attention", "Decoder self-attention (masked)"]
    assert all(c["title"].endswith(f"step {start + 2}") for c in heatmaps)
    cfg = load_bundle(REVERSE).config
    assert heatmaps[0]["rows"] == heatmaps[1]["rows"] == cfg.n_dec_layers * cfg.n_heads  # a row per head
    assert pg.locator(".js-plotly-plot .hm, .js-plotly-plot image").count() >= 2  # painted heatmap layers
    whole_page(pg, "decode-02-stepped-twice")

    cross = pg.locator(".st-key-decode_chart_cross .js-plotly-plot")
    cross.hover()
    button = cross.locator(".modebar-btn[data-title*='Download']")
    with pg.expect_download() as info:
        button.click()
    download = info.value
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    assert download.suggested_filename == chart_filename("reverse", "cross", step=start + 1, ext="png")
    assert saved.stat().st_size > 1000 and saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.xfail(strict=True, reason="a top-level pages/ folder makes Streamlit 1.67 show 'Page not found' when "
                   "a page URL is the first request (app.py runs the page all the same); renaming the folder "
                   "(e.g. views/) removes it. Drop this mark once app.py's pages move.")
def test_opening_the_decode_url_first_shows_no_page_not_found_notice(fresh_server, page):
    open_decode(page, fresh_server.url)
    assert not page.get_by_role("dialog").count(), page.get_by_role("dialog").inner_text()
