"""Every page on a 1024x768 and a 1280x720 projector with the sidebar open, in presenter mode on a 1280x720 one, and
in presenter mode on a 1024x768 one, where the sidebar folds itself away (issues 12 and 27), and in Chinese on a
1024x768 and a 1440x900 one (issue 26: its words take other widths): nothing is cut sideways or skipped. On each
page, no chart text (titles, tick labels, annotations such as the architecture picture's "×2 encoder layers")
reaches past its chart's drawn area or its column, no heatmap leaves a token unlabelled (plotly drops tick labels
it has no room for), no formula scrolls sideways, no metric's or widget's label is cut short, and no table hides
columns behind a horizontal scroll; and (the `page` fixture) no page asks any host but the app's server. A
screenshot of each page is kept in test-artifacts/ to look at."""

from __future__ import annotations

import contextlib

import pytest
from helpers.browser import open_app_page, screenshot, wait_for_app

pytestmark = pytest.mark.browser

SETTLE_MS = 10_000  # a busy machine's redraws may lag; whatever is still cut after this is reported

# name: (path and query, whether it draws charts with no run yet): every page, and the RoPE model's own section
VIEWS = {"home": ("", True), "code": ("code", True), "decode": ("decode", True), "attention": ("attention", True),
         "errors": ("errors", True), "compare": ("compare", True), "masks": ("masks", True),
         "positions": ("positions", True), "positions-rope": ("positions?model=positions:rope", True),
         "checkpoints": ("checkpoints", False), "train": ("train", True)}
# What a reader would find cut, one line each: chart text outside the part of its chart that is shown (the svg
# within the chart's element), a formula wider than its box, a label cut short, a table that scrolls sideways.
CUT_JS = """() => {
  const cut = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const svg = gd.querySelector('.main-svg').getBoundingClientRect();
    const box = gd.closest('[data-testid=stElementContainer]').getBoundingClientRect();
    const left = Math.max(svg.left, box.left), right = Math.min(svg.right, box.right);
    for (const t of gd.querySelectorAll('.main-svg text')) {
      const r = t.getBoundingClientRect();
      if (r.width && t.textContent.trim() && (r.left < left - 1 || r.right > right + 1))
        cut.push(`chart text "${t.textContent}" (${Math.round(r.left)}-${Math.round(r.right)} px, shown ` +
                 `${Math.round(left)}-${Math.round(right)})`);
    }
  }
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {  // a heatmap skips none of its tokens
    if (!gd.data || !gd.data.some(d => d.type === 'heatmap')) continue;
    for (const name of ['xaxis', 'yaxis']) {
      const a = gd._fullLayout[name];  // (an all-heads grid labels its tiles by head: tickmode 'array')
      if (!a || a.type !== 'category' || !a.showticklabels || a.tickmode === 'array') continue;
      const drawn = gd.querySelectorAll(`.${a._id}tick text`).length;
      if (drawn < a._categories.length)
        cut.push(`chart "${gd.querySelector('.gtitle').textContent}" labels ${drawn} of its ` +
                 `${a._categories.length} tokens (${name})`);
    }
  }
  for (const k of document.querySelectorAll('.katex-display'))  // a KaTeX matrix overhangs its box by 2 px
    if (k.scrollWidth > k.clientWidth + 4) cut.push(`formula "${k.textContent.slice(0, 40)}…" scrolls sideways`);
  for (const label of document.querySelectorAll('[data-testid=stMetricLabel], [data-testid=stWidgetLabel]'))
    for (const e of [label, ...label.querySelectorAll('*')])  // Streamlit ends a label too long for one line in "…"
      if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).textOverflow === 'ellipsis') {
        cut.push(`label "${label.textContent}" cut short`);
        break;
      }
  for (const s of document.querySelectorAll('[data-testid=stDataFrame] .dvn-scroller'))
    if (s.scrollWidth > s.clientWidth + 1)
      cut.push(`a table scrolls sideways (${s.scrollWidth} > ${s.clientWidth})`);
  return cut;
}"""


SIDEBAR = "[data-testid=stSidebar]"


def sidebar_open(page) -> bool:
    return page.locator(SIDEBAR).bounding_box()["x"] >= 0


def wait_folded(page) -> None:
    """Until the sidebar has folded itself away (presenter mode in a narrow window)."""
    page.wait_for_function(f"document.querySelector('{SIDEBAR}').getBoundingClientRect().right <= 0")


@pytest.mark.parametrize(("width", "height", "query", "sidebar"), [
    (1024, 768, "", True), (1280, 720, "", True), (1280, 720, "?presenter=1", True),
    (1024, 768, "?presenter=1", False), (1024, 768, "?lang=zh", True), (1440, 900, "?lang=zh", True)])
def test_nothing_is_cut_sideways(module_server, page, width, height, query, sidebar):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.set_viewport_size({"width": width, "height": height})
    found = {}
    for name, (path, charts) in VIEWS.items():
        open_app_page(page, f"{module_server.url}/{path}{query.replace('?', '&') if '?' in path else query}")
        if not sidebar:
            wait_folded(page)  # by itself: nobody clicked its button
        assert sidebar_open(page) == sidebar, name
        if charts:
            page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=60_000)
        wait_for_app(page)
        page.wait_for_timeout(1000)  # plotly's automargin settles after the first draw
        with contextlib.suppress(PlaywrightTimeout):  # and a chart drawn before the layout settled is redrawn
            page.wait_for_function(f"() => !({CUT_JS})().length", timeout=SETTLE_MS)
        if cut := page.evaluate(CUT_JS):
            found[name] = cut
        kind = "".join(f"-{part}" for part, on in (("presenter", "presenter" in query), ("zh", "lang" in query),
                                                   ("folded", not sidebar)) if on)
        where = f"{width}{kind}"
        screenshot(page, f"narrow-{where}-{name}")
    assert not found, "\n".join(f"{where}: {what}" for where, cut in found.items() for what in cut)
