"""The app in Chinese in a real browser (issue 26): every page opened by a `lang=zh` link at 1280x720 shows no
English outside tokens, code and formulas (the text a reader sees: the page's own, its charts' titles, axes,
legends and annotations, the step player's), marks itself as Chinese for the browser's fonts, and keeps
`lang=zh` in its link; moving between pages keeps the language, the sidebar's switch changes it and keeps the
view, and with no choice made the browser's locale picks it. Screenshots of every page land in test-artifacts/."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from helpers.browser import open_app_page, query, screenshot, settle, wait_for_app
from helpers.chinese import english_words, names, prose

from ui.catalog import PAGES

pytestmark = pytest.mark.browser

# The words a reader sees: visible text outside formulas, code and monospace tokens (chips, code spans), icons
# (Material Symbols' ligatures), the example pills (data), the language switch (each language in its own words)
# and what is off the screen (the keyboard's "skip to content" link); a chart's text but its token axes and the
# numbers in its cells. Shadow roots (the step player) are read too.
VISIBLE_TEXT_JS = """() => {
  const out = [];
  const skip = '.katex, code, pre, textarea, [data-testid=stCode], .st-key-lang_widget, [class*="_examples"], ' +
               '.xtick, .ytick, .x2tick, .y2tick, .x3tick, .y3tick, .textpoint, .hoverlayer';
  const seen = (node) => {
    const el = node.parentElement;
    if (!el || el.closest(skip)) return false;
    const box = el.getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1 || box.right < 0) return false;
    if (el.namespaceURI === 'http://www.w3.org/2000/svg') return true;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true})) return false;
    const font = getComputedStyle(el).fontFamily.toLowerCase();
    return !font.includes('mono') && !font.includes('material');
  };
  const visit = (root) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    for (let node = walker.currentNode; node; node = walker.nextNode()) {
      if (node.nodeType === Node.TEXT_NODE) { if (node.textContent.trim() && seen(node)) out.push(node.textContent); }
      else if (node.shadowRoot) visit(node.shadowRoot);
    }
  };
  visit(document.querySelector('[data-testid=stApp]'));
  return out;
}"""


def english_seen(page) -> list[str]:
    known = names()
    return [f"{word} (in {text.strip()[:80]!r})" for text in page.evaluate(VISIBLE_TEXT_JS)
            for word in english_words(prose(text), known)]


def test_every_page_reads_in_chinese(fresh_server, page):
    page.set_viewport_size({"width": 1280, "height": 720})
    found = {}
    for info in PAGES:
        path = info.url_path or ""
        open_app_page(page, f"{fresh_server.url}/{path}?lang=zh")
        page.wait_for_timeout(1500)  # charts and the step player draw after the run
        wait_for_app(page)
        assert query(page).get("lang") == "zh", page.url
        assert page.evaluate("document.documentElement.lang") == "zh-CN"  # the browser's CJK font, Simplified
        if english := english_seen(page):
            found[path or "home"] = english
        screenshot(page, f"zh-1280-{path or 'home'}")
    assert not found, "\n".join(f"/{where}: {word}" for where, words in found.items() for word in words)


def test_the_language_follows_the_pages_and_the_switch_keeps_the_view(fresh_server, page):
    open_app_page(page, f"{fresh_server.url}/decode?lang=zh&input=abcd&step=2")
    assert page.get_by_role("heading", name="逐步解码").is_visible()
    page.locator("[data-testid=stSidebarNav]").get_by_text("掩码", exact=True).click()
    settle(page)
    assert urlparse(page.url).path.endswith("/masks") and query(page).get("lang") == "zh"
    assert page.get_by_role("heading", name="掩码", exact=True).is_visible()
    page.locator("[data-testid=stSidebarNav]").get_by_text("逐步解码", exact=True).click()
    settle(page)
    assert query(page) == {"v": "1", "lang": "zh", "input": "abcd", "step": "2"}
    page.locator(".st-key-lang_widget").get_by_text("English", exact=True).click()
    settle(page)
    page.get_by_role("heading", name="Step-by-step decoding").wait_for()  # a busy server may start the run late
    assert page.get_by_role("heading", name="Step-by-step decoding").is_visible()
    assert query(page) == {"v": "1", "input": "abcd", "step": "2"}  # the view kept; English is the default
    assert page.evaluate("document.documentElement.lang") == "en"


def test_with_no_choice_made_the_browsers_locale_picks_the_language(fresh_server, _browser):
    context = _browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 720})
    try:
        page = context.new_page()
        open_app_page(page, fresh_server.url + "/masks")
        assert page.get_by_role("heading", name="掩码", exact=True).is_visible()
        assert query(page).get("lang") == "zh"  # the page's link carries the choice the locale made
    finally:
        context.close()

