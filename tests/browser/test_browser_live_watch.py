"""The live view shows a run's end when it comes, not at its next poll, and a click during its watch is not held
up (issue 25, item 3: the Train page's Start -> "Finished" waited up to a poll, 0.75 s, for the end to show).
A stand-in run on a page of its own (tests/helpers/watch_app.py) polled as the Train page's live view polls its run,
by a real server and Chromium: the moments compared are the server's and the browser's clocks on this machine."""

from __future__ import annotations

import pytest
from helpers.browser import SCRIPT_IDLE, serving

from ui.runs import POLL_IDLE, POLL_SECONDS

# In-page: the time (Date.now()) the page first shows text matching `pattern`, checked on every change of the page.
WATCH_JS = """(pattern) => {
  window.apSeen = null;
  const look = () => {
    const found = document.querySelector('[data-testid=stMain]').textContent.match(new RegExp(pattern));
    if (found) { watch.disconnect(); window.apSeen = {at: Date.now(), text: found[0]}; }
  };
  const watch = new MutationObserver(look);
  watch.observe(document.body, {subtree: true, childList: true, characterData: true});
  look();
}"""
# In-page: from now on, each change of the script's state (running, notRunning) and when (performance.now()).
STATES_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  window.apStates = [];
  new MutationObserver(() => {
    const state = app.getAttribute('data-test-script-state'), last = window.apStates.at(-1);
    if (!last || last[0] !== state) window.apStates.push([state, performance.now()]);
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def seen(page, pattern: str) -> dict:
    """When (Date.now()) and what the page first showed matching `pattern`, from now on."""
    page.evaluate(WATCH_JS, pattern)
    return page.wait_for_function("window.apSeen", timeout=15_000).json_value()


@pytest.fixture(scope="module")
def watch_server():
    with serving("tests/helpers/watch_app.py") as server:
        yield server


def test_a_run_that_ends_early_in_a_poll_shows_its_end_within_a_fraction_of_it(watch_server, page):
    page.goto(watch_server.url + "/?end=poll")
    shown = seen(page, r"ended \d+")
    late = (shown["at"] - int(shown["text"].split()[1])) / 1000
    assert late < POLL_SECONDS / 2, f"the end showed {late:.2f} s after it came (a poll is {POLL_SECONDS} s)"


def test_a_click_during_the_watch_is_answered_at_once(watch_server, page):
    page.goto(watch_server.url + "/?end=never")
    page.wait_for_selector("text=/^poll [2-9]/")  # the live view's own polls run (and watch)
    lags = []
    for clicks in range(1, 4):
        polls = page.locator("text=/^poll \\d+/").inner_text()
        page.wait_for_function(f"() => !document.body.textContent.includes({polls!r})")  # a poll has just begun
        page.wait_for_timeout(50)  # ... and drawn: it is watching now
        began = page.evaluate("Date.now()")
        page.evaluate(WATCH_JS, f"clicks {clicks}")
        page.locator(".st-key-count button").click()
        lags.append((page.wait_for_function("window.apSeen", timeout=15_000).json_value()["at"] - began) / 1000)
    assert max(lags) < 0.4, f"clicks answered after {lags} s (a watch lasts up to {POLL_SECONDS - POLL_IDLE:.2f} s)"


def test_a_run_of_the_whole_page_does_not_watch(watch_server, page):
    """The watch runs in the live view's own polls only: a run of the whole page (Start's on the Train page) ends
    once drawn, so the browser drops at once what the page no longer shows."""
    page.goto(watch_server.url + "/?end=never")
    page.wait_for_selector("text=/^poll [2-9]/")
    runs = []
    for _ in range(8):  # a click that comes during one of the live view's runs is not counted
        page.wait_for_selector(SCRIPT_IDLE)
        page.evaluate(STATES_JS)
        page.locator(".st-key-whole button").click()
        page.wait_for_function("window.apStates.length >= 2", timeout=15_000)
        (state, began), (_, ended) = page.evaluate("window.apStates")[:2]
        if state == "running":
            runs.append((ended - began) / 1000)
    assert len(runs) >= 3 and min(runs) < 0.4, \
        f"the whole page's runs lasted {runs} s (a watch lasts up to {POLL_SECONDS - POLL_IDLE:.2f} s)"
