"""The decode page's step player in a real browser (ui/step_player.py): a step click or key redraws the charts in
place at once and the server hears of it afterwards; a burst of moves ends where it ended; keys typed into a
box stay there."""

from __future__ import annotations

import pytest
from helpers.browser import open_app_page, screenshot, wait_for_app
from helpers.repo import needs_reverse

pytestmark = [pytest.mark.browser, needs_reverse]

PLAYER = "[data-ap-player]"
KINDS = ("topk", "cross", "decoder_self")
# Every chart of the player: the step it shows, the title of the graph shown
CHARTS_JS = """() => Object.fromEntries([...document.querySelectorAll('[data-ap-chart]')].map(el => [el.dataset.apChart,
    {step: el.dataset.apStep, title: el.querySelector('[data-shown] .gtitle')?.textContent ?? null}]))"""


def open_decode(pg, url: str) -> None:
    open_app_page(pg, f"{url}/decode")
    pg.wait_for_function("() => document.querySelectorAll(\"[data-ap-chart]:not([data-ap-step=''])\").length === 3")


def shown(pg) -> int:
    return int(pg.locator(PLAYER).get_attribute("data-step"))


def url_step(pg) -> str | None:
    return pg.evaluate("() => new URLSearchParams(location.search).get('step')")


def drawn_at(pg, step: int) -> None:
    """Wait until every chart of the player shows `step` (1-based)."""
    pg.wait_for_function(f"() => [...document.querySelectorAll('[data-ap-chart]')].every(c => c.dataset.apStep === "
                         f"'{step}')")


def heard(pg, step: int) -> None:
    """Wait until the server has the step (it writes the address bar) and its run is over."""
    pg.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{step}'")
    wait_for_app(pg)


def test_a_step_click_redraws_the_same_charts_at_once_and_the_server_follows(fresh_server, page):
    pg = page
    open_decode(pg, fresh_server.url)
    start = shown(pg)
    pg.evaluate("() => { window.__charts = [...document.querySelectorAll('[data-ap-chart]')]; }")
    before = pg.evaluate(CHARTS_JS)
    assert {c["step"] for c in before.values()} == {str(start)} and url_step(pg) is None

    pg.locator(f"{PLAYER} button[data-go=next]").click()
    drawn_at(pg, start + 1)
    after = pg.evaluate(CHARTS_JS)
    for kind in KINDS:
        assert after[kind]["title"].endswith(f"step {start + 1}"), after[kind]
    # in place: the very same chart elements, redrawn (Plotly.react), not new ones
    assert pg.evaluate("() => window.__charts.every(c => c.isConnected)")
    assert pg.locator(PLAYER).inner_text().count(f"Step {start + 1} of") == 1
    heard(pg, start + 1)
    panel = pg.get_by_text(f"Force a different token at step {start + 1}")
    assert panel.is_visible()  # the server's part followed
    assert pg.get_by_role("button", name=f"Numbers of step {start + 1} (CSV)").count() == 2
    assert pg.evaluate("() => window.__charts.every(c => c.isConnected)")  # the server's run left them alone
    screenshot(pg, "step-player-01-next")

    pg.locator(f"{PLAYER} button[data-go=first]").click()
    drawn_at(pg, 1)
    assert pg.locator(f"{PLAYER} button[data-go=prev]").is_disabled()
    heard(pg, 1)
    pg.locator(f"{PLAYER} button[data-go=last]").click()
    last = shown(pg)
    drawn_at(pg, last)
    assert pg.locator(f"{PLAYER} button[data-go=next]").is_disabled() and last > start
    heard(pg, last)


def test_arrow_keys_step_and_a_burst_ends_where_it_ended(fresh_server, page):
    pg = page
    open_decode(pg, fresh_server.url)
    assert shown(pg) == 1  # a decode opens at its first step
    pg.locator("h1").click()  # the page, not a widget, has the focus
    for _ in range(5):  # a burst: faster than a script run
        pg.keyboard.press("ArrowRight")
    drawn_at(pg, 6)
    heard(pg, 6)
    pg.wait_for_timeout(500)
    assert shown(pg) == 6 and url_step(pg) == "6"  # no late run moved it back
    pg.keyboard.press("ArrowLeft")
    heard(pg, 5)
    pg.locator(f"{PLAYER} input[type=range]").focus()  # Home and End within the player (elsewhere they scroll)
    pg.keyboard.press("End")
    last = shown(pg)
    assert last > 6
    heard(pg, last)
    pg.keyboard.press("Home")
    heard(pg, 1)
    pg.keyboard.press("ArrowRight")  # on its own slider: one step, not two
    heard(pg, 2)

    box = pg.locator(".st-key-shared_input_widget input")  # keys typed into a box stay there
    box.click()
    box.press("End")
    box.press("ArrowLeft")
    pg.wait_for_timeout(400)
    assert shown(pg) == 2 and url_step(pg) == "2"


KEEP = 16  # graphs a chart keeps (ui/step_player.js)
# Per chart: the graphs it keeps, each with its step, whether it is on screen, its title
GRAPHS_JS = """() => Object.fromEntries([...document.querySelectorAll('[data-ap-chart]')].map(el => [el.dataset.apChart,
    [...el.querySelectorAll(':scope > .ap-graph')].map(g => ({step: Number(g.dataset.step),
        visible: g.checkVisibility(), title: g.querySelector('.gtitle')?.textContent ?? null}))]))"""
DRAWN_AHEAD_JS = """(step) => [...document.querySelectorAll('[data-ap-chart]')].every(
    c => c.querySelector(`:scope > [data-step='${step}'][data-parked]`))"""


def test_a_chart_draws_the_next_step_ahead_and_keeps_what_it_drew(fresh_server, page):
    """While the page is idle each chart draws the next step, hidden, so a click only swaps graphs: the very graphs
    drawn ahead are the ones shown, with their step's title, one on screen per chart. A step drawn once is kept
    (at most KEEP a chart, the farthest from the step shown go first); a step none drew ahead is drawn into the
    graph shown; a new decode drops them all."""
    pg = page
    open_decode(pg, fresh_server.url)
    pg.wait_for_function(DRAWN_AHEAD_JS, arg=2)
    pg.evaluate("() => { window.__kept = [1, 2].map(s => [...document.querySelectorAll(`[data-ap-chart] > "
                "[data-step='${s}']`)]); }")
    assert all(sorted(g["step"] for g in kept) == [1, 2] for kept in pg.evaluate(GRAPHS_JS).values())
    pg.locator(f"{PLAYER} button[data-go=next]").click()
    drawn_at(pg, 2)
    assert pg.evaluate("() => window.__kept[1].every(g => g.checkVisibility()) && "
                       "window.__kept[0].every(g => g.isConnected && !g.checkVisibility())")
    for kind, kept in pg.evaluate(GRAPHS_JS).items():
        on_screen = [g for g in kept if g["visible"]]
        assert len(on_screen) == 1 and on_screen[0]["step"] == 2, (kind, kept)
        assert on_screen[0]["title"].endswith("step 2"), (kind, kept)
    pg.wait_for_function(DRAWN_AHEAD_JS, arg=3)
    pg.locator(f"{PLAYER} button[data-go=prev]").click()
    drawn_at(pg, 1)
    assert pg.evaluate("() => window.__kept[0].every(g => g.checkVisibility())")  # step 1's own graphs again
    heard(pg, 1)

    # A decode of 17 steps. A jump to its last step, which no chart drew ahead: drawn on the click into the graph
    # shown (the same element). Then a walk back to its first step, each step drawn ahead before its click: one
    # graph too many, and the last step's, the farthest, goes.
    pg.locator(".st-key-shared_input_widget input").fill("abcdefghijklmnop")
    pg.keyboard.press("Enter")
    pg.wait_for_function(f"() => Number(document.querySelector('{PLAYER} input').max) === {KEEP + 1}")
    pg.wait_for_function("() => window.__kept.flat().every(g => !g.isConnected)")  # the old decode's are gone
    drawn_at(pg, 1)
    pg.evaluate("() => { window.__first = [...document.querySelectorAll('[data-ap-chart] > [data-shown]')]; }")
    pg.locator(f"{PLAYER} button[data-go=last]").click()
    drawn_at(pg, KEEP + 1)
    assert pg.evaluate(f"() => window.__first.every(g => g.dataset.step === '{KEEP + 1}' && g.checkVisibility())")
    for step in range(KEEP + 1, 1, -1):
        pg.wait_for_function(DRAWN_AHEAD_JS, arg=step - 1)
        pg.locator(f"{PLAYER} button[data-go=prev]").click()
        drawn_at(pg, step - 1)
    heard(pg, 1)
    for kind, kept in pg.evaluate(GRAPHS_JS).items():
        assert sorted(g["step"] for g in kept) == list(range(1, KEEP + 1)), kind
        assert [g["step"] for g in kept if g["visible"]] == [1], kind
        assert all(g["title"].endswith(f"step {g['step']}") for g in kept), kind  # each graph draws its own step


# Each of the player's heatmaps: its category axes' token count and the tick labels plotly.js drew for them
LABELS_JS = """() => [...document.querySelectorAll('[data-ap-chart] > [data-shown]')]
  .filter(el => el.data[0].type === 'heatmap')
  .map(el => ({chart: el.parentElement.dataset.apChart, axes: ['x', 'y'].map(ax => el._fullLayout[ax + 'axis'])
    .filter(a => a.type === 'category').map(a => [a._categories.length,
      el.querySelectorAll('.' + a._id + 'tick text').length])}))"""


# Each token strip of the player: where its label ends, where each of its tokens begins
STRIPS_JS = """() => [...document.querySelectorAll('.ap-strip')].map(row => ({
  label: row.querySelector('.ap-strip-label').getBoundingClientRect().right,
  tokens: [...row.querySelectorAll('.ap-chip')].map(chip => chip.getBoundingClientRect().left)}))"""


@pytest.mark.parametrize(("width", "height", "query"), [(1440, 900, ""), (1024, 768, ""), (1280, 720, "?presenter=1")])
def test_every_token_of_a_step_heatmap_is_labelled(fresh_server, page, width, height, query):
    """Side by side where both heatmaps fit with every label, else one above the other (issue 12: never skip)."""
    pg = page
    pg.set_viewport_size({"width": width, "height": height})
    open_app_page(pg, f"{fresh_server.url}/decode{query}")
    pg.wait_for_function("() => document.querySelectorAll(\"[data-ap-chart]:not([data-ap-step=''])\").length === 3")
    pg.locator(f"{PLAYER} button[data-go=last]").click()  # the widest decoder self-attention
    drawn_at(pg, shown(pg))
    pg.wait_for_timeout(500)
    charts = pg.evaluate(LABELS_JS)
    assert sorted(c["chart"] for c in charts) == ["cross", "decoder_self"]
    for chart in charts:
        assert all(tokens == labels for tokens, labels in chart["axes"]), chart
    boxes = [pg.locator(f"[data-ap-chart={kind}]").bounding_box() for kind in ("cross", "decoder_self")]
    side_by_side = abs(boxes[0]["y"] - boxes[1]["y"]) < 5
    assert side_by_side == (width == 1440), boxes  # at 1280 only in presenter mode, whose labels are larger
    strips = pg.evaluate(STRIPS_JS)  # a strip that wraps goes on under its tokens, never under its label
    assert len(strips) == 2 and all(min(s["tokens"]) >= s["label"] - 1 for s in strips), strips
    screenshot(pg, f"step-player-labels-{width}{'-presenter' if query else ''}")
