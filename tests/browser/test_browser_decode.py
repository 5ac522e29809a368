"""The decoding page in a real browser, opened by its own URL on a fresh server: step twice, find the
heatmaps, export a chart from its toolbar, a copied link, two sessions. The step player's own behaviour (in-place
redraws, keys, bursts, its look) is in test_browser_step_player.py."""

from __future__ import annotations

import pytest
from helpers.browser import choose, on_a_fresh_server, open_app_page, read_settled, screenshot, settle, wait_for_app
from helpers.repo import REVERSE, needs_reverse

from transformer.charts.export import chart_filename
from transformer.store.checkpoints import load_bundle

pytestmark = [pytest.mark.browser, needs_reverse]

# The charts on screen (a step player's chart keeps the graphs of other steps too, hidden)
CHARTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(el => el.checkVisibility()).map(el => ({
    title: el.querySelector('.gtitle').textContent, types: el.data.map(d => d.type),
    rows: el.data[0].y ? el.data[0].y.length : 0}))"""


def open_decode(pg, url: str) -> None:
    open_app_page(pg, f"{url}/decode")
    pg.locator(DRAWN).nth(2).wait_for()


PLAYER = "[data-ap-player]"
DRAWN = "[data-ap-chart]:not([data-ap-step=''])"  # a step player's chart, drawn


def step(pg) -> int:
    """The step the player shows (1-based)."""
    return int(pg.locator(PLAYER).get_attribute("data-step"))


def click_and_wait(pg, name: str) -> None:
    """Click the player's `name` button (first, prev, next, last); wait until its charts show the step and the
    server has heard of it (the address bar holds it)."""
    pg.locator(f"{PLAYER} button[data-go={name}]").click()
    shown = step(pg)
    pg.wait_for_function(f"() => [...document.querySelectorAll('[data-ap-chart]')].every(c => c.dataset.apStep === "
                         f"'{shown}') && new URLSearchParams(location.search).get('step') === '{shown}'")
    wait_for_app(pg)


def test_decode_url_first_step_twice_heatmaps_and_toolbar_export(fresh_server, page, tmp_path):
    pg = page
    open_decode(pg, fresh_server.url)
    assert pg.get_by_role("heading", name="Step-by-step decoding").is_visible()
    start = step(pg)
    assert start == 1  # a decode opens at its first step
    screenshot(pg, "decode-01-opened")

    click_and_wait(pg, "next")
    click_and_wait(pg, "next")
    assert step(pg) == start + 2
    pg.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot .hm, .js-plotly-plot image').length >= 2"
                         f" && [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
                         f".filter(t => t.textContent.endsWith('step {start + 2}')).length >= 2")  # painted
    charts = pg.evaluate(CHARTS_JS)
    heatmaps = [c for c in charts if "heatmap" in c["types"]]
    assert [c["title"].split(" · ")[0] for c in heatmaps] == ["Cross-attention", "Decoder self-attention (masked)"]
    assert all(c["title"].endswith(f"step {start + 2}") for c in heatmaps)
    cfg = load_bundle(REVERSE).config
    assert heatmaps[0]["rows"] == heatmaps[1]["rows"] == cfg.n_dec_layers * cfg.n_heads  # a row per head
    assert pg.locator(".js-plotly-plot .hm, .js-plotly-plot image").count() >= 2  # painted heatmap layers
    screenshot(pg, "decode-02-stepped-twice")

    cross = pg.locator("[data-ap-chart=cross]")
    cross.hover()
    button = cross.locator("[data-shown] .modebar-btn[data-title*='Download']")
    with pg.expect_download() as info:
        button.click()
    download = info.value
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    assert download.suggested_filename == chart_filename("reverse", "cross", step=start + 1, ext="png")
    assert saved.stat().st_size > 1000 and saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


VIEW_JS = """() => ({
    model: document.querySelector('.st-key-active_model_widget input').value,
    input: document.querySelector('.st-key-shared_input_widget input').value,
    step: document.querySelector('[data-ap-player]').dataset.step,
    charts: [...document.querySelectorAll('.js-plotly-plot')].map(el => ({
        title: el.querySelector('.gtitle').textContent,
        data: el.data.map(d => ({x: d.x, y: d.y, z: d.z}))})),
    text: document.querySelector('[data-testid=stMainBlockContainer]').innerText})"""


def view(pg) -> dict:
    pg.locator(DRAWN).nth(2).wait_for()
    shown = pg.evaluate(VIEW_JS)
    shown["text"] = shown["text"].split("Greedy or beam search?")[0]  # the decode part, not the beam demo
    return shown


def test_a_copied_link_restores_the_view_on_a_fresh_server(fresh_server, page, _browser):
    pg = page
    open_decode(pg, fresh_server.url)
    choose(pg, pg.locator(".st-key-active_model_widget"), "copy (pretrained)")
    settle(pg)
    box = pg.locator(".st-key-shared_input_widget input")
    box.fill("hello")
    box.press("Enter")
    settle(pg)
    # a busy server may start the new decode's run after settle's pause: its player first, then the click
    pg.wait_for_function("() => new URLSearchParams(location.search).get('input') === 'hello'")
    wait_for_app(pg)
    click_and_wait(pg, "next")
    pg.locator(".st-key-decode_force_it button").click()  # force the runner-up token at this step
    settle(pg)
    pg.wait_for_function("() => location.search.includes('force=')")
    pg.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=fresh_server.url)
    pg.frame_locator("[data-testid=stSidebar] iframe").locator("#copy").click()  # the sidebar's Copy link
    pg.wait_for_timeout(300)
    link = pg.evaluate("navigator.clipboard.readText()")
    assert link == pg.url
    assert "model=copy" in link and "input=hello" in link and "step=" in link and "v=1" in link
    original = view(pg)
    assert "you forced" in original["text"] and original["model"] == "copy (pretrained)"
    screenshot(pg, "decode-03-linked-view")

    with on_a_fresh_server(_browser, link, fresh_server.url) as fresh:  # nothing of the first session
        restored = read_settled(fresh, view, original)
        assert restored == original
        assert fresh.url.split("?")[1] == link.split("?")[1]


def test_two_sessions_keep_their_own_view(fresh_server, page, _browser):
    open_decode(page, fresh_server.url)
    context = _browser.new_context(viewport={"width": 1400, "height": 900})
    second = context.new_page()
    second.set_default_timeout(30_000)
    open_decode(second, fresh_server.url)
    start = step(page)
    click_and_wait(page, "last")
    last = step(page)
    assert last > start and f"step={last}" in page.url
    second.reload()
    wait_for_app(second)
    second.locator(DRAWN).nth(2).wait_for()
    assert step(second) == start and "step=" not in second.url  # untouched by the first session
    click_and_wait(second, "next")
    page.reload()
    wait_for_app(page)
    assert step(page) == last and step(second) == start + 1
    context.close()
