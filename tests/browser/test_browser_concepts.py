"""The home, masks and positional-encoding pages in a real browser, each opened by its URL on a fresh server:
the page and the shared sidebar render, the charts paint, the switches work; full-page screenshots saved."""

from __future__ import annotations

import re

import pytest
from helpers.browser import open_app_page, screenshot, settle
from helpers.repo import needs_reverse

pytestmark = [pytest.mark.browser, needs_reverse]

TITLES_JS = "() => [...document.querySelectorAll('.js-plotly-plot .gtitle')].map(t => t.textContent)"


def painted_titles(pg, *parts: str) -> list[str]:
    """Chart titles once a chart whose title holds each part has painted (plotly draws after the run ends)."""
    pg.wait_for_function(
        "(parts) => { const t = [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
        ".map(e => e.textContent); return parts.every(p => t.some(x => x.includes(p))); }",
        arg=list(parts), timeout=30_000)
    return pg.evaluate(TITLES_JS)


def open_page(pg, url: str, heading: str) -> None:
    open_app_page(pg, url)
    assert pg.get_by_role("heading", name=heading, exact=True).is_visible()
    assert not pg.locator("[data-testid=stException]").count()


def toggle(pg, label: str) -> None:
    pg.get_by_text(label, exact=True).click()
    settle(pg, 300, 120_000)


def test_home_by_url_shows_attention_on_the_first_screen(fresh_server, page):
    open_page(page, f"{fresh_server.url}/", "Attention Playground")
    cross = page.locator(".js-plotly-plot").first
    box = cross.bounding_box()
    assert box is not None and box["y"] < 900  # attention is visible without scrolling
    page.locator(".js-plotly-plot .hm, .js-plotly-plot image").first.wait_for()  # a painted heatmap
    screenshot(page, "concepts-home-first-screen")
    assert page.get_by_role("link", name="Masks").count() >= 2  # sidebar entry and its card
    screenshot(page, "concepts-home")


def test_masks_by_url_then_without_the_causal_mask(fresh_server, page):
    open_page(page, f"{fresh_server.url}/masks", "Masks")
    titles = painted_titles(page, "Source padding mask")
    assert any(t.startswith("Source padding mask") for t in titles)
    assert any("scores" in t for t in titles) and any("weights" in t for t in titles)
    screenshot(page, "concepts-masks")
    toggle(page, "Remove the causal mask")
    assert any("no causal mask" in t for t in painted_titles(page, "no causal mask"))
    changed = page.get_by_text(re.compile(r"\(\d+ of \d+ positions changed")).inner_text()
    assert not changed.split("(")[1].startswith("0 of")  # the table itself is a canvas
    screenshot(page, "concepts-masks-no-causal")


def test_positions_by_url_then_without_positions(fresh_server, page):
    open_page(page, f"{fresh_server.url}/positions", "Positional encoding")
    titles = painted_titles(page, "Sinusoidal encoding", "M_5")
    assert any(t.startswith("Sinusoidal encoding") for t in titles)
    assert any(t.startswith("M_5") for t in titles)
    page.get_by_text("max |M_k·PE(pos) − PE(pos + k)|").wait_for()  # drawn after the two charts above (CI, loaded)
    screenshot(page, "concepts-positions")
    toggle(page, "Decode without positions")
    lines = page.locator("[data-testid=stMarkdownContainer] p").filter(has_text="positions:").all_inner_texts()
    verdicts = {line.split(":")[0]: line for line in lines if line.startswith(("With", "Without"))}
    assert "right" in verdicts["With positions"] and "wrong" in verdicts["Without positions"], verdicts
    screenshot(page, "concepts-positions-no-positions")


# The position-similarity map's axes: the range each shows and its length in pixels
SIMILARITY_AXES_JS = """() => {
  const chart = [...document.querySelectorAll('.js-plotly-plot')]
    .find(d => (d.layout?.title?.text ?? '').includes('Dot product between positions'));
  const axis = (a) => ({range: chart._fullLayout[a].range, length: chart._fullLayout[a]._length});
  return chart && chart.calcdata ? {x: axis('xaxis'), y: axis('yaxis'), rows: chart.calcdata[0][0].z.length} : null;
}"""


def test_the_position_similarity_map_stays_square_in_a_narrow_window(module_server, page):
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{module_server.url}/positions", "Positional encoding")
    page.wait_for_function(f"() => ({SIMILARITY_AXES_JS})() !== null", timeout=30_000)
    axes = page.evaluate(SIMILARITY_AXES_JS)
    last = axes["rows"] - 0.5  # the positions' cells from -0.5 to rows - 0.5, no empty band around them
    assert sorted(axes["y"]["range"]) == pytest.approx([-0.5, last]) == sorted(axes["x"]["range"]), axes
    assert axes["x"]["length"] == pytest.approx(axes["y"]["length"], rel=0.02), axes  # square


# The masks page's attention picker: the choice shown, and whether it is wider than its box (cut)
KIND_SHOWN_JS = """() => {
  const box = document.querySelector('.st-key-masks_kind_widget input');
  return {shown: box.value, cut: box.scrollWidth > box.clientWidth};
}"""


def test_the_masks_attention_picker_shows_its_longest_choice_whole_at_1024(module_server, page):
    page.set_viewport_size({"width": 1024, "height": 768})
    open_page(page, f"{module_server.url}/masks?kind=decoder_self", "Masks")
    page.locator(".st-key-masks_kind_widget input").wait_for()  # once drawn (a CI run read the page before it was)
    assert page.evaluate(KIND_SHOWN_JS) == {"shown": "Decoder self-attention (masked)", "cut": False}
