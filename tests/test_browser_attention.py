"""The all-heads attention page in a real browser: opened first on a fresh server, heatmaps painted, a cell
click read back in words, and the grid exported as one image (or the HTML fallback)."""

from __future__ import annotations

import pytest

from conftest import needs_reverse, open_app_page, screenshot
from transformer.export import image_export_available

pytestmark = [pytest.mark.browser, needs_reverse]
GRID = ".st-key-attention_grid_cross"
BIG = "[class*=st-key-attention_big_reverse_cross]"


def test_attention_page_opened_first_paints_heatmaps_and_exports_the_grid(fresh_server, page):
    open_app_page(page, f"{fresh_server.url}/attention")
    assert page.get_by_role("heading", name="All attention heads").is_visible()
    for chart in (GRID, BIG):
        page.locator(f"{chart} .heatmaplayer image").first.wait_for(state="attached")
    assert "Cross-attention · all" in page.locator(GRID).inner_text()

    drag = page.locator(f"{BIG} .nsewdrag").first
    drag.scroll_into_view_if_needed()
    box = drag.bounding_box()
    page.mouse.click(box["x"] + 6, box["y"] + 6)  # the top-left cell: query 00 <s>, key 00
    page.get_by_text("gives key").wait_for()
    assert "Query 00 <s> gives key 00" in page.get_by_text("gives key").inner_text()

    images, _ = image_export_available()
    label, signature = ("Download all heads as PNG", b"\x89PNG") if images else ("Download all heads as HTML",
                                                                                b"<html")
    with page.expect_download(timeout=90_000) as info:
        page.get_by_role("button", name=label).click()
    download = info.value
    assert download.suggested_filename == ("reverse_cross_all-heads.png" if images else
                                           "reverse_cross_all-heads.html")
    data = open(download.path(), "rb").read()
    assert len(data) > 1000 and signature in data[:200]
    screenshot(page, "attention_page")
