"""A pick in a view that renews itself holds (tests/helpers/pick_app.py, a real server and Chromium). The live
view on the Train page drew its head picker again at every renewal with the value it held, and a value written into a
widget's key is sent to the browser as one to show: a renewal under way at a pick drew the old head back over it
(seen in CI under load). ui/state.seed leaves a widget drawn as before that holds its value alone."""

from __future__ import annotations

import pytest
from helpers.browser import choose, serving


@pytest.fixture(scope="module")
def pick_server():
    with serving("tests/helpers/pick_app.py") as server:
        yield server


def test_a_pick_made_while_the_view_renews_itself_holds(pick_server, page):
    """Each renewal (pick_app.py) outlasts the time between two, as a live view's do on a busy machine: the runs
    queue up, and a pick lands while one is under way."""
    page.goto(pick_server.url)
    page.wait_for_selector("text=/^showing head 1/")
    box = page.get_by_role("combobox")
    for head in (2, 3, 4):
        choose(page, box, f"Head {head}")
        shown = []
        for _ in range(30):  # three seconds: several renewals
            shown.append(box.input_value())
            page.wait_for_timeout(100)
        assert set(shown) == {f"Head {head}"}, f"the box went back: {shown}"
        page.wait_for_selector(f"text=/^showing head {head},/", timeout=30_000)  # the view follows the pick
