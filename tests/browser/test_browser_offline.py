"""Fully offline (issue 12, item 8). Every browser test's page is cut off from every host but the app's own server
(tests/conftest.py's `page`): a request elsewhere (an icon font, a favicon, a script or font CDN) fails the test
that made it, so the narrow-window walk checks every page in English and in Chinese (whose text the browser's own
CJK fonts draw: issue 26) at five sizes. Here: the tab icon is there, bundled, not dropped."""

from __future__ import annotations

from urllib.parse import urlparse

from helpers.browser import LOOPBACK, offline, open_app_page


def test_the_tab_icon_is_bundled_not_fetched(module_server, page):
    open_app_page(page, module_server.url + "/masks")
    icon = page.evaluate("document.querySelector(\"link[rel='shortcut icon']\")?.href || ''")
    assert icon.startswith("data:image/svg+xml") or urlparse(icon).hostname in LOOPBACK, icon[:80]


def test_a_request_to_another_host_is_refused_and_recorded(module_server, _browser):
    """The check itself: what `offline` records is what every browser test's page fails on."""
    context = _browser.new_context()
    asked = offline(context)
    try:
        page = context.new_page()
        open_app_page(page, module_server.url + "/masks")
        assert asked == []  # the page itself asks nothing of another host
        reached = page.evaluate("fetch('http://example.invalid/font.woff2').then(() => true, () => false)")
        assert not reached and [url.rsplit(": ", 1)[1] for url in asked] == ["http://example.invalid/font.woff2"]
    finally:
        context.close()
