"""A chart's toolbar, shown on hover over its top right corner: only the buttons that act on these charts (camera,
zoom, pan, reset), on white, so that over a narrow chart's title its icons do not stand among the title's letters.
Both kinds of the app's charts (ui/step_player.py): a chart alone (the positions page) and a step player's chart (the
decoding page's next-token bars, narrow in a 1024x768 window)."""

from __future__ import annotations

import pytest
from helpers.browser import open_app_page

from transformer.charts.export import TOOLS_LEFT_OUT

# plotly's own names of the left-out buttons, as its toolbar titles them (data-title)
LEFT_OUT_TITLES = {"select2d": "Box Select", "lasso2d": "Lasso Select", "zoomIn2d": "Zoom in",
                   "zoomOut2d": "Zoom out", "autoScale2d": "Autoscale"}
# In-page: the toolbar of the chart titled `title` (shown: the player's kept graphs are hidden): its buttons'
# titles, the background of its groups, and whether it covers the end of the title.
TOOLBAR_JS = """(title) => {
  const plot = [...document.querySelectorAll('.js-plotly-plot')].find(p => p.checkVisibility()
    && p.querySelector('.gtitle')?.textContent.startsWith(title));
  const bar = plot.querySelector('.modebar'), text = plot.querySelector('.gtitle').getBoundingClientRect();
  const box = bar.getBoundingClientRect();
  return {buttons: [...bar.querySelectorAll('.modebar-btn')].map(b => b.dataset.title),
          backgrounds: [...bar.querySelectorAll('.modebar-group')].map(g => getComputedStyle(g).backgroundColor),
          covers_title: box.left < text.right && box.bottom > text.top};
}"""


def test_every_left_out_button_is_named_here():
    assert set(LEFT_OUT_TITLES) == set(TOOLS_LEFT_OUT)


@pytest.mark.parametrize("path, title", [("positions", "Sinusoidal encoding · chosen"), ("decode", "Next-token")])
def test_a_narrow_charts_toolbar_holds_only_what_acts_on_it_on_white(module_server, page, path, title):
    page.set_viewport_size({"width": 1024, "height": 768})
    open_app_page(page, f"{module_server.url}/{path}")
    plot = page.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text=title)).locator("visible=true").first
    plot.hover()
    page.wait_for_function(f"(title) => ({TOOLBAR_JS})(title).buttons.length > 0", arg=title)
    toolbar = page.evaluate(TOOLBAR_JS, title)
    assert any("Download" in name for name in toolbar["buttons"]) and "Pan" in toolbar["buttons"]
    assert not set(LEFT_OUT_TITLES.values()) & set(toolbar["buttons"])
    assert toolbar["covers_title"]  # the case this is for: too narrow for both side by side
    assert set(toolbar["backgrounds"]) == {"rgb(255, 255, 255)"}


# In-page: the chart titled `title` (shown): its height drawn and whether it is the page's full-screen element
SIZE_JS = """(title) => {
  const plot = [...document.querySelectorAll('.js-plotly-plot')].find(p => p.checkVisibility()
    && p.querySelector('.gtitle')?.textContent.startsWith(title));
  return {height: plot._fullLayout.height, full: !!document.fullscreenElement?.contains(plot)};
}"""


def test_the_full_screen_button_shows_a_chart_as_tall_as_the_screen_and_back(module_server, page):
    title = "Sinusoidal encoding · chosen"
    open_app_page(page, f"{module_server.url}/positions")
    plot = page.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text=title)).first
    plot.wait_for()
    before = page.evaluate(SIZE_JS, title)
    plot.hover()
    plot.locator(".modebar-btn[data-title^='Full screen']").click()
    page.wait_for_function(f"(title) => ({SIZE_JS})(title).full && ({SIZE_JS})(title).height > 700", arg=title)
    page.evaluate("() => document.exitFullscreen()")
    page.wait_for_function(f"(title) => !({SIZE_JS})(title).full && ({SIZE_JS})(title).height === {before['height']}",
                           arg=title)
    assert not before["full"]
