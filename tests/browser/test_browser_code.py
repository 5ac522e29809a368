"""The code page in Chromium (issue 27): a link opens it at its section, a chart's "code behind this chart" link
leads there from another page, it is laid out at 1440x900, 1280x720 and 1024x768 and in presenter mode (the
screenshots land in test-artifacts/), and presenter mode in a narrow window folds the sidebar by itself."""

from __future__ import annotations

import pytest
from helpers.browser import open_app_page, screenshot, settle, wait_for_app
from helpers.repo import ARTIFACTS

pytestmark = pytest.mark.browser

SIDEBAR = "[data-testid=stSidebar]"
TEXT = "hgffjercqwa"


# Where a section's heading sits in the window, and what a failure needs to tell: whether the page's scroll script is
# there, how far the main area is scrolled and how tall it is, and whether a script run is under way
WHERE_JS = """(anchor) => {
  const h = document.getElementById(anchor), main = document.querySelector("[data-testid=stMain]");
  return {top: h && h.getBoundingClientRect().top, script: !!document.getElementById("ap-code-scroll"),
          scrolled: main && main.scrollTop, height: main && main.scrollHeight,
          state: document.querySelector("[data-testid=stApp]")?.dataset.testScriptState};
}"""


def heading_top(pg, anchor: str) -> float:
    """Where the section's heading sits in the window (pixels from its top), once the page has scrolled there (a
    busy machine's browser may still be drawing the page well after its run has ended)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        pg.wait_for_function(f"() => {{ const y = ({WHERE_JS})('{anchor}').top; return y !== null && y > -5 && "
                             "y < 250; }", timeout=45_000)
    except PlaywrightTimeout:
        pytest.fail(f"the page did not settle at #{anchor}: {pg.evaluate(WHERE_JS, anchor)}")
    return pg.evaluate(WHERE_JS, anchor)["top"]


def sidebar_right(pg) -> float:
    return pg.evaluate(f"document.querySelector('{SIDEBAR}').getBoundingClientRect().right")


def test_a_link_opens_the_code_page_at_its_section_at_every_size(fresh_server, page):
    for width, height, query in ((1440, 900, ""), (1280, 720, ""), (1024, 768, ""), (1280, 720, "&presenter=1")):
        page.set_viewport_size({"width": width, "height": height})
        open_app_page(page, f"{fresh_server.url}/code?section=residual&input={TEXT}&layer=2&head=3{query}")
        assert 0 <= heading_top(page, "residual") < 250
        name = f"code-{width}{'-presenter' if query else ''}"
        screenshot(page, name)  # the window as opened (the whole page with WHOLE_PAGES=1)
    assert page.get_by_role("heading", name="6 · Residual connection and layer norm").is_visible()


def test_a_charts_code_link_leads_to_its_section(fresh_server, page):
    open_app_page(page, f"{fresh_server.url}/attention?input={TEXT}&layer=2&head=4")
    link = page.get_by_role("link", name="The code behind this chart").first
    link.scroll_into_view_if_needed()
    link.click()
    page.wait_for_url("**/code?**", timeout=30_000)
    wait_for_app(page)
    assert "section=attention" in page.url and f"input={TEXT}" in page.url and "head=4" in page.url
    heading_top(page, "attention")
    screenshot(page, "code-from-attention-link")


def test_presenter_mode_folds_the_sidebar_in_a_narrow_window_and_leaves_it_open_after(fresh_server, page):
    page.set_viewport_size({"width": 1024, "height": 768})
    open_app_page(page, f"{fresh_server.url}/decode?presenter=1")
    page.wait_for_function(f"document.querySelector('{SIDEBAR}').getBoundingClientRect().right <= 0")
    assert page.locator(".katex-display").first.is_visible()  # the formula on the first screen, whole
    page.screenshot(path=str(ARTIFACTS / "presenter-1024-first-screen.png"))
    page.locator("[data-testid=stExpandSidebarButton]").click()  # the teacher opens it again ...
    page.wait_for_function(f"document.querySelector('{SIDEBAR}').getBoundingClientRect().right > 0")
    page.locator(SIDEBAR).get_by_text("Masks").click()  # ... and moves to another page: it stays open
    settle(page, 1500)
    assert sidebar_right(page) > 0 and "/masks" in page.url
    page.set_viewport_size({"width": 1280, "height": 720})  # a wide window: presenter mode leaves it be
    open_app_page(page, f"{fresh_server.url}/decode?presenter=1")
    page.wait_for_timeout(1500)
    assert sidebar_right(page) > 0


# Every numbered listing line that wraps in the window: where its text box begins, where its wrapped rest begins (the
# leftmost fragment below its first row), its indentation and the width of one character of its font
WRAPPED_JS = """() => {
  const probe = document.createElement("span");
  const lines = [];
  for (const text of document.querySelectorAll("[data-testid=stCode] code > span > .linenumber + span")) {
    const range = document.createRange();
    range.selectNodeContents(text);
    const rects = [...range.getClientRects()].filter((r) => r.width > 0);
    const top = Math.min(...rects.map((r) => r.top));
    const rest = rects.filter((r) => r.top > top + 4);
    if (!rest.length) continue;
    probe.textContent = "0".repeat(40);
    text.appendChild(probe);
    const ch = probe.getBoundingClientRect().width / 40;
    probe.remove();
    lines.push({text: text.textContent.trim().slice(0, 40), box: text.getBoundingClientRect().left,
                rest: Math.min(...rest.map((r) => r.left)), indent: text.textContent.match(/^ */)[0].length, ch});
  }
  return lines;
}"""


def test_a_wrapped_code_line_goes_on_right_of_its_own_indentation(fresh_server, page):
    page.set_viewport_size({"width": 1024, "height": 768})
    open_app_page(page, f"{fresh_server.url}/code?input={TEXT}")
    page.wait_for_function("() => document.querySelectorAll('[data-ap-hang]').length > 100")
    wrapped = page.evaluate(WRAPPED_JS)
    assert len(wrapped) >= 5, wrapped  # the column is narrower than the code's longest lines
    for line in wrapped:  # the rest: 4 characters right of where the line's own code begins, not at the edge
        assert abs(line["rest"] - (line["box"] + (line["indent"] + 4) * line["ch"])) < 1.5, line
    page.locator("[data-testid=stCode]").nth(1).scroll_into_view_if_needed()
    screenshot(page, "code-wrapped-lines-1024")
