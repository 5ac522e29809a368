"""A first chart waits for no JavaScript (issue 12, item 10). app.py has the browser fetch and run the chart code
(ui/preload.py) before the server imports torch, so it is ready by the time the page's first chart arrives. Before,
the browser asked for it only once that chart arrived, and took ~1.3 s more to draw it."""

from __future__ import annotations

import pytest
from helpers.browser import open_app_page, serving

from transformer.i18n import t, using
from ui.preload import BEACON, BEACON_FILE, CHARTS, LATER, PLOTLY_FILE, chunk

# In-page: when the home page's "At a glance" subheader (its first h3, written once the first run has its decode,
# for which it imports torch) first appeared, on the page's own clock (performance.now()).
WATCH_JS = """() => {
  window.glanceSeen = null;
  new MutationObserver(() => {
    if (!window.glanceSeen && document.querySelector('[data-testid=stMain] h3')) window.glanceSeen = performance.now();
  }).observe(document, {childList: true, subtree: true});
}"""
CHUNK_START_JS = """(chunk) => {
  const entry = performance.getEntriesByType('resource').find(e => e.name.endsWith('/' + chunk));
  return entry ? entry.startTime : null;
}"""
# In-page: when the page's first chart was drawn (ui/step_player.js stamps data-ap-step once it is), on its clock
CHART_DRAWN_JS = """() => {
  window.chartDrawn = null;
  new MutationObserver(() => {
    if (!window.chartDrawn && document.querySelector('.ap-chart[data-ap-step]:not([data-ap-step=""])'))
      window.chartDrawn = performance.now();
  }).observe(document, {childList: true, subtree: true, attributes: true});
}"""
# In-page: every text a spinner showed (Streamlit's spinner: a transient element, gone once its wait is over)
SPINNER_JS = """() => {
  window.spinnerTexts = [];
  new MutationObserver(() => {
    const text = document.querySelector('[data-testid=stSpinner]')?.innerText;
    if (text && !window.spinnerTexts.includes(text)) window.spinnerTexts.push(text);
  }).observe(document, {childList: true, subtree: true, characterData: true});
}"""
BEACON_JS = """(path) => performance.getEntriesByType('resource').filter(e => e.name.endsWith(path))
  .map(e => ({start: e.startTime, status: e.responseStatus}))"""


def test_this_streamlit_has_one_chunk_of_each_name_to_preload():
    """A Streamlit that renamed or merged one of them would leave it unloaded: the names are checked here."""
    for name in (CHARTS, *LATER):
        found = chunk(name)
        assert found and found.startswith(f"{name}.") and found.endswith(".js"), (name, found)


@pytest.fixture
def first_start(tmp_path, monkeypatch):
    """A server's first start after installing (nothing kept for its first page: ui/glance.py)."""
    monkeypatch.setenv("AP_FIRST_PAGE_CACHE", str(tmp_path))
    with serving() as server:
        yield server


def test_the_chart_code_is_asked_for_before_the_first_run_has_its_decode(first_start, page):
    """On a server's first start the first run spends about a second importing torch for the home page's decode,
    between its title and its "At a glance" subheader; the chart code is asked for before that subheader shows
    (without the preload: only after it, when the chart arrives). The title is no landmark: it follows the preload
    by a few milliseconds of the run, and which of the two elements' chunks the browser has first is a race."""
    page.add_init_script(f"({WATCH_JS})()")
    open_app_page(page, first_start.url)
    page.wait_for_selector(".js-plotly-plot .main-svg")
    glance_seen = page.evaluate("window.glanceSeen")
    assert glance_seen is not None
    for code in (PLOTLY_FILE, chunk(CHARTS)):
        asked = page.evaluate(CHUNK_START_JS, code)
        assert asked is not None, f"the page never asked for {code}"
        assert asked < glance_seen, f"{code} asked for at {asked:.0f} ms, the decode shown at {glance_seen:.0f} ms"
    assert page.evaluate(CHUNK_START_JS, chunk("PlotlyChart")) is None  # Streamlit's full plotly.js: never fetched


def test_a_page_without_charts_loads_the_chart_code_and_shows_no_trace_of_it(fresh_server, page):
    open_app_page(page, fresh_server.url + "/checkpoints")
    page.wait_for_function(f"() => ({CHUNK_START_JS})({PLOTLY_FILE!r}) !== null", timeout=15_000)
    assert page.locator(".js-plotly-plot").count() == 0  # the page draws no chart: only the preload asked
    page.wait_for_function("() => window.Plotly !== undefined", timeout=15_000)  # it ran, not only fetched
    holder = page.locator("[data-testid=stElementContainer]:has(#ap-preload-charts)")
    assert holder.count() == 1
    assert holder.bounding_box() is None  # hidden: no gap above the page's title


def test_the_other_chunks_are_loaded_after_the_chart_code_on_a_page_without_them(fresh_server, page):
    """The home page shows no table, progress bar, slider or code block; their chunks are fetched all the same,
    one after another once the chart code has come, so the first page that shows one (Checkpoints, the Train page's
    live view at Start, ...) need not wait for it."""
    open_app_page(page, fresh_server.url)
    page.wait_for_selector(".js-plotly-plot .main-svg")
    last = chunk(LATER[-1])
    page.wait_for_function(f"() => ({CHUNK_START_JS})({last!r}) !== null", timeout=20_000)
    assert page.locator("[data-testid=stDataFrame]").count() == 0
    charts = page.evaluate(CHUNK_START_JS, PLOTLY_FILE)
    asked = {name: page.evaluate(CHUNK_START_JS, chunk(name)) for name in LATER}  # (the home page shows links)
    assert None not in asked.values() and min(asked.values()) > charts, (charts, asked)


def test_the_page_tells_the_server_once_it_has_drawn_its_chart(fresh_server, page):
    """The server's warm-up waits while the browser draws the first page (ui/warm.py): the page says when it is done,
    once, after its chart is drawn, by asking for a file of ui/preload.py's beacon component; here in a browser slowed
    4x (a slow laptop's), which draws the page for seconds."""
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": 4})
    page.add_init_script(f"({CHART_DRAWN_JS})()")
    open_app_page(page, fresh_server.url)
    path = f"/component/{BEACON.name}/{BEACON_FILE}"
    page.wait_for_function(f"() => ({BEACON_JS})({path!r}).length > 0", timeout=30_000)
    page.wait_for_timeout(1000)
    told, drawn = page.evaluate(BEACON_JS, path), page.evaluate("window.chartDrawn")
    assert len(told) == 1 and told[0]["status"] == 200, told
    assert drawn is not None and told[0]["start"] > drawn, (told, drawn)


@pytest.mark.parametrize("path, heading, first_section", [
    ("/code?lang=zh", "app.page.code", "code.kind"),
    ("/?input=hello&lang=zh", "home.title", "home.glance"),  # an input from a link: a decode no server kept
])
def test_a_page_that_computes_opened_first_says_it_waits_for_torch(fresh_server, page, path, heading, first_section):
    """A fresh server's first page, if it computes (every page but home, and home for a decode no earlier server
    kept), waits for torch's import before it draws its computed part: 1-3 s on two cores, which the reader used to
    spend before a blank page. A spinner now says why, in the reader's language, then the page draws."""
    page.add_init_script(f"({SPINNER_JS})()")
    open_app_page(page, fresh_server.url + path)
    with using("zh"):
        assert t("app.loading_torch") in page.evaluate("window.spinnerTexts")
        assert page.locator("h1").first.inner_text() == t(heading)
        page.get_by_text(t(first_section), exact=True).first.wait_for()
    assert page.locator("[data-testid=stSpinner]").count() == 0
