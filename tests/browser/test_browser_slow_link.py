"""Two settings changed one after the other, by a browser that hears the server late (a busy class server, a slow
link): the second change's run is asked for with the address the browser has, the one from before the first
change, since the first run's new address has not reached it. That older address must not read as a link: it
undid the first change and the second (both lost, and the address and the number boxes then disagreed). The
browser's back button, which does ask for an older address, must still restore the view it names."""

from __future__ import annotations

import pytest

from helpers.browser import open_app_page, query, read_settled, screenshot, settle, wait_for_app
from ui.tables.train import TRAIN

pytestmark = pytest.mark.browser

# Before the page's own scripts: while window.apHold is set, the server's messages are held back in order, and
# window.apRelease() delivers them, as a slow link or a busy browser would much later.
HOLD_JS = """(() => {
  const Native = window.WebSocket, held = [];
  window.apHold = false;
  window.apRelease = () => { window.apHold = false; held.splice(0).forEach((deliver) => deliver()); };
  const late = (ws, handle) => (event) => window.apHold ? held.push(() => handle.call(ws, event))
                                                       : handle.call(ws, event);
  window.WebSocket = class extends Native {
    set onmessage(handle) { super.onmessage = handle && late(this, handle); }
    get onmessage() { return super.onmessage; }
    addEventListener(type, handle, options) {
      return super.addEventListener(type, type === 'message' ? late(this, handle) : handle, options);
    }
  };
})();"""
SERVER_RUN_MS = 3000  # held back this long, the first change's run has ended on the server (~0.3 s when idle)


def box(pg, name: str):
    return pg.locator(f".st-key-train_{name}_widget input")


def enter(pg, name: str, value: str) -> None:
    box(pg, name).fill(value)
    box(pg, name).press("Enter")


def test_a_change_made_before_the_last_run_is_heard_of_is_kept(fresh_server, page):
    pg = page
    pg.add_init_script(HOLD_JS)
    open_app_page(pg, f"{fresh_server.url}/train")
    pg.get_by_text("Training settings", exact=True).click()
    preset_lr = f"{TRAIN.view().default('lr', {'task': TRAIN.by_name['task'].default}):.4f}"  # the task's preset
    assert read_settled(pg, lambda p: box(p, "lr").input_value(), preset_lr) == preset_lr  # not its minimum
    enter(pg, "seed", "10")
    settle(pg)
    assert query(pg).get("seed") == "10"

    pg.evaluate("() => { window.apHold = true; }")
    enter(pg, "seed", "11")
    pg.wait_for_timeout(SERVER_RUN_MS)  # the run has written seed=11 into an address the browser has not heard of
    enter(pg, "lr", "0.004")  # so this run is asked for with seed=10's address
    pg.evaluate("() => window.apRelease()")
    settle(pg, pause_ms=1000)
    shown = {name: box(pg, name).input_value() for name in ("seed", "lr")}
    screenshot(pg, "slow_link_two_changes")
    assert shown == {"seed": "11", "lr": "0.0040"}, shown
    assert {"seed": "11", "lr": "0.004"}.items() <= query(pg).items(), query(pg)

    pg.go_back()  # to seed=11 with the preset's lr
    wait_for_app(pg)
    pg.wait_for_function("() => !location.search.includes('lr=')")
    settle(pg)
    assert (box(pg, "seed").input_value(), box(pg, "lr").input_value()) == ("11", preset_lr)
    assert query(pg).get("seed") == "11" and "lr" not in query(pg)
