"""A link to the home, masks or positional-encoding page restores its view: change the page through its widgets
in Chromium, read the address, open it in a new browser context on a second, freshly started server, and
compare what that shows (the charts' data and titles, the widgets' values, the page's text) with the original."""

from __future__ import annotations

import json

import pytest
from helpers.browser import choose, on_a_fresh_server, open_app_page, screenshot, settle
from helpers.repo import needs_reverse

pytestmark = [pytest.mark.browser, needs_reverse]

VIEW_JS = """() => ({
    charts: [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')].map(el => ({
        title: el.querySelector('.gtitle') ? el.querySelector('.gtitle').textContent : '',
        data: el.data.map(d => ({x: d.x, y: d.y, z: d.z, text: d.text}))})),
    inputs: [...document.querySelectorAll('[data-testid=stMain] input, [data-testid=stMain] textarea')]  // sliders too
        .map(e => e.type === 'checkbox' || e.type === 'radio' ? e.checked : e.value),
    text: document.querySelector('[data-testid=stMainBlockContainer]').innerText,
    model: document.querySelector('.st-key-active_model_widget').innerText})"""


def view(pg, charts: int) -> dict:
    """What the page shows, once its `charts` charts have painted."""
    pg.wait_for_function(f"() => document.querySelectorAll('[data-testid=stMain] .js-plotly-plot .gtitle').length"
                         f" >= {charts}", timeout=60_000)
    pg.evaluate("() => document.activeElement && document.activeElement.blur()")  # no "5/200" counter shown
    settle(pg, 500)
    return pg.evaluate(VIEW_JS)


def pick(pg, key: str, option: str) -> None:
    """Choose `option` in the selectbox (or add it in the multiselect) of widget key `key`."""
    opener = pg.locator(f".st-key-{key} button[aria-haspopup=listbox]")
    opener.scroll_into_view_if_needed()  # its list closes when the page scrolls: scroll first, then open it
    pg.wait_for_timeout(300)
    choose(pg, opener, option)
    settle(pg)


def type_into(pg, selector: str, text: str, submit: str = "Enter") -> None:
    box = pg.locator(selector)
    box.fill(text)
    box.press(submit)
    settle(pg)


def slide(pg, key: str, *keys: str) -> None:
    """Move the slider of widget key `key` with the keyboard (Home, End, ArrowRight...)."""
    thumb = pg.locator(f".st-key-{key} input[type=range]")
    for press in keys:  # one at a time: each one reruns the page
        thumb.press(press)
        settle(pg, 500)


def change_home(pg) -> None:
    pick(pg, "active_model_widget", "copy (pretrained)")
    type_into(pg, ".st-key-shared_input_widget input", "hello")


def change_masks(pg) -> None:
    type_into(pg, ".st-key-masks_inputs_widget textarea", "abc\nabcdefgh\nab", "Control+Enter")
    pg.get_by_text("the model's own greedy output", exact=True).click()
    settle(pg)
    pick(pg, "masks_row_widget", "seq 2: abcdefgh")
    pick(pg, "masks_kind_widget", "Cross-attention")
    pick(pg, "masks_head_widget", "Head 3")
    pick(pg, "masks_score_row_widget", "seq 3: ab")
    pg.get_by_text("Remove the causal mask", exact=True).click()
    settle(pg)
    pick(pg, "masks_open_layer_widget", "Layer 2")


def change_positions(pg) -> None:
    slide(pg, "positions_d_model_widget", "Home", "ArrowRight", "ArrowRight")
    slide(pg, "positions_length_widget", "End", "ArrowLeft")
    pick(pg, "positions_dims_widget", "7")
    slide(pg, "positions_k_widget", "End")
    type_into(pg, ".st-key-positions_text_widget input", "abcabc")
    pg.get_by_text("Decode without positions", exact=True).click()
    settle(pg)


PAGES = [  # (path, how to change it, what its URL then holds, charts it then shows)
    ("", change_home, {"model": "copy", "input": "hello"}, 2),
    ("masks", change_masks, {"inputs": "abc\nabcdefgh\nab", "targets": "greedy", "row": "2", "kind": "cross",
                             "head": "3", "score_row": "3", "no_causal": "1", "open_layer": "2"}, 11),
    ("positions", change_positions, {"d_model": "12", "length": "255", "dims": "4,5,7", "k": "50",
                                     "text": "abcabc", "no_positions": "1"}, 8),
]


@pytest.mark.parametrize("path, change, query, charts", PAGES, ids=["home", "masks", "positions"])
def test_a_link_restores_the_view_on_a_fresh_server(fresh_server, page, _browser, path, change, query, charts):
    from urllib.parse import parse_qsl, urlsplit

    open_app_page(page, f"{fresh_server.url}/{path}")
    change(page)
    link = page.url
    assert dict(parse_qsl(urlsplit(link).query)) == {"v": "1", **query}
    original = view(page, charts)
    assert not page.locator("[data-testid=stException], [data-testid=stAlertContentWarning]").count()
    screenshot(page, f"link-{path or 'home'}-original")

    with on_a_fresh_server(_browser, link, fresh_server.url) as fresh:  # nothing of the first session
        restored = view(fresh, charts)
        assert fresh.url.split("?")[1] == link.split("?")[1]
        assert restored["model"] == original["model"] and restored["inputs"] == original["inputs"]
        assert restored["text"] == original["text"]
        assert [c["title"] for c in restored["charts"]] == [c["title"] for c in original["charts"]]
        assert json.dumps(restored["charts"]) == json.dumps(original["charts"])  # NaN (a masked cell) included
        screenshot(fresh, f"link-{path or 'home'}-restored")


ROOT_FONT_JS = "() => getComputedStyle(document.documentElement).fontSize"
CHART_FONTS_JS = ("() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')]"
                  ".map(el => el.layout.font.size)")


def test_a_presenter_link_opens_in_presenter_mode_on_a_fresh_server(fresh_server, page, _browser):
    """The sidebar's presenter switch goes into the page's link; the link opens the page in presenter mode on
    another server (larger text, the same enlarged charts); switching it off takes it out of the link."""
    from urllib.parse import parse_qsl, urlsplit

    switch = ".st-key-presenter_widget"
    open_app_page(page, fresh_server.url)
    view(page, 2)
    plain_fonts = page.evaluate(CHART_FONTS_JS)
    page.locator(switch).get_by_text("Presenter mode").click()
    settle(page)
    link = page.url
    assert dict(parse_qsl(urlsplit(link).query)) == {"v": "1", "presenter": "1"}
    original, fonts = view(page, 2), page.evaluate(CHART_FONTS_JS)
    assert page.evaluate(ROOT_FONT_JS) == "21px" and all(a > b for a, b in zip(fonts, plain_fonts))

    with on_a_fresh_server(_browser, link, fresh_server.url) as fresh:
        restored = view(fresh, 2)
        assert fresh.locator(f"{switch} input").is_checked() and fresh.evaluate(ROOT_FONT_JS) == "21px"
        assert fresh.evaluate(CHART_FONTS_JS) == fonts
        assert restored["text"] == original["text"]
        assert json.dumps(restored["charts"]) == json.dumps(original["charts"])
        screenshot(fresh, "link-home-presenter-restored")

    page.locator(switch).get_by_text("Presenter mode").click()
    settle(page)
    assert "presenter" not in page.url and page.evaluate(ROOT_FONT_JS) == "16px"
