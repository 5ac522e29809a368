"""The Train page in a real browser, opened first on a fresh server: start a tiny run, watch the curve grow,
click a widget while it trains and see training carry on, pause, use and download the model; its link,
opened on a second fresh server, restores the settings and retrains the same model; and two browser
contexts on one server with one training slot: each sees and controls only its own run, the second waits in
line with its place shown and starts when the first pauses."""

from __future__ import annotations

import re
import time

import pytest
from helpers.browser import SCRIPT_IDLE, Server, choose, open_app_page, read_settled, require_chromium, screenshot

pytestmark = pytest.mark.browser

TINY = {"Model shape": {"d_model": "16", "d_ff": "32", "n_heads": "2"},
        "Training settings": {"batch_size": "16", "steps": "5000"}}  # still training when paused
CURVES_POINTS = """() => {
  const chart = [...document.querySelectorAll('.js-plotly-plot')]
    .find(d => d.data && d.data.some(t => t.name === 'exact match'));
  return chart ? chart.data.map(t => t.x.length) : null;
}"""
# The probe's one-head heatmap: its cells' width and height in pixels (plot length over token count per axis)
PROBE_CELLS = """() => {
  const chart = [...document.querySelectorAll('.st-key-train_probe_chart .js-plotly-plot')][0];
  const axis = (a) => chart._fullLayout[a]._length / chart._fullLayout[a]._categories.length;
  return chart && chart._fullLayout ? [axis('xaxis'), axis('yaxis')] : null;
}"""
# How long the live progress bar's fill takes to move to a new value (Streamlit's own: "0.5s")
PROGRESS_SLIDE = """() => {
  const fill = document.querySelector('[data-testid=stProgressBarTrack] > div');
  return fill && getComputedStyle(fill).transitionDuration;
}"""
# From now on, the most lines of the run's latest metrics the page has held at once (window.__metricLines): a poll
# whose elements differ in number from the last one's left the last one's line below its own until it ended
METRIC_LINES = """() => {
  const count = () => [...document.querySelectorAll('[data-testid=stMarkdownContainer]')]
    .filter(e => e.innerText.startsWith('Training loss')).length;
  window.__metricLines = count();
  new MutationObserver(() => { window.__metricLines = Math.max(window.__metricLines, count()); })
    .observe(document.body, {childList: true, subtree: true, characterData: true});
}"""
PROBE_TITLE = """() => {
  const chart = [...document.querySelectorAll('.js-plotly-plot')]
    .find(d => (d.layout?.title?.text ?? '').includes('Cross-attention'));  // the curves have no title
  return chart ? chart.layout.title.text : null;
}"""



def settle(pg) -> None:
    """Lighter than conftest.settle: while training, the page reruns on its own, so one idle moment is enough."""
    pg.wait_for_timeout(300)
    pg.wait_for_selector(SCRIPT_IDLE, timeout=60_000)


def step_shown(pg) -> int:
    text = pg.locator("[data-testid=stProgress]").inner_text()
    return int(re.search(r"Step ([\d,]+) of", text)[1].replace(",", ""))


def wait_until(pg, predicate, what: str, timeout: float = 90.0):
    """Poll predicate() until it is truthy; on timeout save a screenshot named after `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    screenshot(pg, "train_timeout_" + re.sub(r"\W+", "_", what))
    raise AssertionError(f"timed out waiting for {what}")


def selectbox(pg, label: str):
    """The selectbox(es) labelled `label`."""
    return pg.get_by_role("combobox", name=re.compile(f"^{label}"))


def pick(pg, label: str, option: str) -> None:
    """Choose `option` in the selectbox `label`."""
    choose(pg, selectbox(pg, label), option)


def pick_head(pg, option: str) -> None:
    """Choose `option` in the probe's Head picker once one is on the page: while a run that redraws the live view
    is still drawing, the picker it replaces may be there too (seen in CI after a pause: a strict-mode error)."""
    wait_until(pg, lambda: selectbox(pg, "Head").count() == 1, "one head picker")
    pick(pg, "Head", option)


def set_tiny_config(pg) -> None:
    for section, fields in TINY.items():
        pg.get_by_text(section, exact=True).click()
        for name, value in fields.items():
            type_number(pg, name, value)
    pg.get_by_text("Stop once held-out exact match reaches").click()  # reverse's preset can reach it in seconds
    settle(pg)


def test_train_page_trains_live_and_keeps_going_through_clicks(fresh_server, page):
    open_app_page(page, f"{fresh_server.url}/train")
    assert page.get_by_role("heading", name="Train live").is_visible()
    title = wait_until(page, lambda: page.evaluate(PROBE_TITLE), "the preview chart")
    assert "training step 0" in title  # the untrained model's cross-attention, before Start
    set_tiny_config(page)
    assert page.get_by_text("d_model 16, d_ff 32").count()  # the settings summary follows the edits
    screenshot(page, "train_before_start")

    page.evaluate(METRIC_LINES)
    page.get_by_role("button", name="Start", exact=True).click()
    first = wait_until(page, lambda: (page.evaluate(CURVES_POINTS) or [0])[0] >= 1, "the first evaluation")
    assert first
    assert page.evaluate("window.__metricLines") == 1  # from "Starting" to the first evaluation: one line at a time
    points = page.evaluate(CURVES_POINTS)[0]
    step_before_click = step_shown(page)
    # the progress bar steps to each poll's value: a slide kept the browser drawing all run long
    assert wait_until(page, lambda: page.evaluate(PROGRESS_SLIDE), "the progress bar") == "0s"
    keep = page.locator(".st-key-train_keep button").last  # (a renewal may briefly hold the old one too)
    assert keep.inner_text().endswith("Keep weights as of now")  # while training: no step, which moves on

    # a click while training: pick one head; the chart follows and the step count keeps rising
    began = time.monotonic()
    pick_head(page, "Head 2")  # while the live view renews itself: tests/browser/test_browser_live_pick.py
    wait_until(page, lambda: "head 2" in (page.evaluate(PROBE_TITLE) or ""), "the head pick")
    click_seconds = time.monotonic() - began
    print(f"head pick while training: {click_seconds * 1000:.0f} ms from the click to the new chart")
    width, height = page.evaluate(PROBE_CELLS)  # one head at its own size: square cells, not stretched flat
    assert 0.8 < width / height < 1.25, (width, height)
    wait_until(page, lambda: step_shown(page) > step_before_click + 20, "training to continue")
    # a renewal draws the new figure into the graph shown (Plotly.react), not into a new graph
    page.evaluate("() => { window.__curves = document.querySelector('.st-key-train_curves .js-plotly-plot'); }")
    wait_until(page, lambda: (page.evaluate(CURVES_POINTS) or [0])[0] > points, "the curve to grow")
    assert page.evaluate("() => document.querySelector('.st-key-train_curves .js-plotly-plot') === window.__curves")

    page.get_by_role("button", name="Pause", exact=True).click()
    settle(page)
    wait_until(page, lambda: page.get_by_text("Paused.").count(), "the paused state")
    frozen = step_shown(page)
    page.wait_for_timeout(1500)
    assert step_shown(page) == frozen
    wait_until(page, lambda: keep.inner_text().endswith(f"Keep weights at step {frozen:,}"), "the paused step to keep")
    assert page.get_by_role("button", name="Resume", exact=True).is_enabled()
    screenshot(page, "train_paused")

    page.get_by_role("button", name="Stop", exact=True).click()
    settle(page)
    wait_until(page, lambda: page.get_by_text("you stopped the run").count(), "the stopped state")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download .safetensors").click()
    data = download.value.path().read_bytes()
    header_size = int.from_bytes(data[:8], "little")
    assert data[8:9] == b"{" and b'"format_version"' in data[8 : 8 + header_size]
    assert download.value.suggested_filename == f"reverse-{frozen}.safetensors"

    page.get_by_role("button", name="Use this model").click()
    settle(page)  # (under load the click's run may begin after settle's look for it: hence the wait below)
    wait_until(page, lambda: page.get_by_text("is now the active model").count(), "the model to be made active")
    sidebar = page.locator("[data-testid=stSidebar]")
    assert f"Trained: {frozen:,} steps" in sidebar.inner_text()  # the sidebar's card: the new model is active
    assert "1+1 layers × 2 heads, d_model 16" in sidebar.inner_text()
    sidebar.get_by_role("combobox").click()
    assert page.get_by_role("option", name=f"reverse-{frozen} (trained)").is_visible()
    page.keyboard.press("Escape")
    screenshot(page, "train_used")


NUMBERS = ("max_len", "n_enc_layers", "n_dec_layers", "n_heads", "d_model", "d_ff", "dropout", "lr", "warmup",
           "batch_size", "steps", "label_smoothing", "seed")
CHART_DATA = """key => {
  const chart = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  if (!chart) return null;
  const z = chart.data[0].z;  // sent as a typed array: its encoded bytes; else rows of numbers (NaN as null)
  const rows = () => Array.from(z, row => Array.from(row, v => Number.isNaN(v) ? null : v));
  return {title: chart.layout.title.text, z: z.bdata ? [z.dtype, z.shape, z.bdata] : rows()};
}"""


def shown(pg) -> dict:
    """The settings the page shows: each number input, the task, the probe input and the stop-early box."""
    values = {name: pg.locator(f".st-key-train_{name}_widget input").input_value() for name in NUMBERS}
    values["task"] = pg.locator(".st-key-train_task_widget").inner_text()
    values["probe"] = pg.locator(".st-key-train_probe_widget input").input_value()
    values["stop_early"] = pg.locator(".st-key-train_stop_early_widget input").is_checked()
    return values


def type_number(pg, name: str, value: str) -> None:
    """Type a setting and wait until the page has taken it (it is in the address), as a reader would before the
    next: on a busy machine a quick second entry can overtake the first's rerun."""
    box = pg.locator(f".st-key-train_{name}_widget input")
    box.fill(value)
    box.press("Enter")
    pg.wait_for_function("part => location.search.split(/[?&]/).includes(part)", arg=f"{name}={value}")
    settle(pg)


def step_and_pick_head(pg) -> dict:
    """Step (10 steps, then pause), pick Head 2: the probe chart's title and data."""
    pg.get_by_role("button", name="Step", exact=True).click()
    wait_until(pg, lambda: pg.get_by_text("Paused.").count() and step_shown(pg) == 10, "ten steps")
    pick_head(pg, "Head 2")
    wait_until(pg, lambda: "head 2" in ((pg.evaluate(CHART_DATA, "train_probe_chart") or {}).get("title") or ""),
               "the head pick")
    return pg.evaluate(CHART_DATA, "train_probe_chart")


def test_a_copied_link_restores_the_settings_and_retrains_the_same_model(fresh_server, page, _browser):
    pg = page
    open_app_page(pg, f"{fresh_server.url}/train")
    pick(pg, "Task", "Copy a string")
    settle(pg)
    type_number(pg, "max_len", "8")
    for section, fields in {"Model shape": {"d_model": "32", "n_heads": "2"},
                            "Training settings": {"seed": "5", "lr": "0.004"}}.items():
        pg.get_by_text(section, exact=True).click()
        for name, value in fields.items():
            type_number(pg, name, value)
    pg.locator(".st-key-train_stop_early_widget label").click()
    settle(pg)
    probe = pg.locator(".st-key-train_probe_widget input")
    probe.fill("hello")
    probe.press("Enter")
    settle(pg)
    pg.wait_for_function("() => location.search.includes('probe=hello')")
    original = shown(pg)
    preview = wait_until(pg, lambda: pg.evaluate(CHART_DATA, "train_preview_chart"), "the preview")
    trained = step_and_pick_head(pg)
    pg.wait_for_function("() => location.search.includes('head=2')", timeout=10_000)
    link = pg.url
    assert {"task=copy", "max_len=8", "d_model=32", "n_heads=2", "seed=5", "lr=0.004", "stop_early=0",
            "probe=hello", "head=2"} <= set(link.split("?")[1].split("&"))
    retrain = pg.locator(".st-key-train_retrain code").inner_text()
    assert retrain.split("?")[1] + "&head=2" == link.split("?")[1]  # the run's settings; the page's own link
    screenshot(pg, "train_linked_run")

    other = Server()  # a second, freshly started server: nothing of the first session is there
    try:
        context = _browser.new_context(viewport={"width": 1400, "height": 900})
        fresh = context.new_page()
        fresh.set_default_timeout(30_000)
        open_app_page(fresh, link.replace(fresh_server.url, other.url))
        assert not fresh.get_by_text("could not be followed").count()
        assert read_settled(fresh, shown, original) == original
        assert fresh.evaluate(CHART_DATA, "train_preview_chart") == preview  # the same untrained weights
        assert fresh.url.split("?")[1] == link.split("?")[1]
        assert step_and_pick_head(fresh) == trained  # the same ten steps of training: the same attention
        context.close()
    finally:
        other.stop()


def state_line(pg) -> str:
    return pg.locator("[data-testid=stMain]").inner_text()


def test_two_sessions_see_and_control_only_their_own_runs(monkeypatch, _browser):
    require_chromium()
    monkeypatch.setenv("AP_MAX_RUNS", "1")  # the server's one training slot: a second run waits in line
    server = Server()
    contexts = []
    try:
        pages = []
        for _ in range(2):
            contexts.append(_browser.new_context(viewport={"width": 1400, "height": 900}))
            pg = contexts[-1].new_page()
            pg.set_default_timeout(30_000)
            open_app_page(pg, f"{server.url}/train")
            set_tiny_config(pg)
            pages.append(pg)
        first, second = pages

        first.get_by_role("button", name="Start", exact=True).click()
        wait_until(first, lambda: first.get_by_text("Training…").count() and step_shown(first) > 0, "the first run")
        second.reload()  # the second session drawn afresh (its settings come back from the URL): nothing of the
        settle(second)  # first session's run shows
        assert "Training…" not in state_line(second) and not second.get_by_text("Step 0 of").count()
        assert second.get_by_role("button", name="Start", exact=True).is_enabled()
        for name in ("Pause", "Resume", "Stop"):
            assert second.get_by_role("button", name=name, exact=True).is_disabled()

        second.evaluate(METRIC_LINES)
        second.get_by_role("button", name="Start", exact=True).click()
        wait_until(second, lambda: second.get_by_text("Waiting for a training slot").count(), "the second run's place")
        assert "yours is next" in state_line(second)
        screenshot(second, "train_second_session_waiting")
        moving = step_shown(first)
        wait_until(first, lambda: step_shown(first) > moving, "the first run to carry on")
        assert "Waiting for a training slot" not in state_line(first)

        first.get_by_role("button", name="Pause", exact=True).click()  # gives its slot back: the second starts
        wait_until(first, lambda: first.get_by_text("Paused.").count(), "the first run to pause")
        frozen = step_shown(first)
        wait_until(second, lambda: second.get_by_text("Training…").count() and step_shown(second) > 0,
                   "the second run to start", timeout=120)
        assert second.evaluate("window.__metricLines") == 1  # from its place in line to training: one line at a time
        second.get_by_role("button", name="Stop", exact=True).click()
        wait_until(second, lambda: second.get_by_text("you stopped the run").count(), "the second run to stop")
        assert first.get_by_text("Paused.").count() and step_shown(first) == frozen  # untouched by the other
        first.evaluate(METRIC_LINES)
        first.get_by_role("button", name="Resume", exact=True).click()
        wait_until(first, lambda: step_shown(first) > frozen, "the first run to resume", timeout=120)
        assert first.evaluate("window.__metricLines") == 1  # "Resuming" (its worker was handed over), then training
        first.get_by_role("button", name="Stop", exact=True).click()
        wait_until(first, lambda: first.get_by_text("you stopped the run").count(), "the first run to stop")
    finally:
        for context in contexts:
            context.close()
        server.stop()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_start_is_on_the_first_screen_at_1280x720(module_server, page, lang):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app_page(page, f"{module_server.url}/train?lang={lang}")
    start = page.get_by_role("button", name={"en": "Start", "zh": "开始"}[lang], exact=True).bounding_box()
    assert start is not None and start["y"] + start["height"] <= 720, start
    screenshot(page, f"train-first-screen-1280-{lang}")
