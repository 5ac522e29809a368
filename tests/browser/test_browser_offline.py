"""Fully offline (issue 12, item 8): with every request to a host other than the app's own server blocked,
opening each page of the app asks no other host for anything (no icon font, favicon, script or font CDN), in
English and in Chinese (whose text the browser's own CJK fonts draw: issue 26)."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from helpers.browser import open_app_page

from ui.catalog import PAGES

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


@pytest.mark.parametrize("query", ["", "?lang=zh"], ids=["en", "zh"])
def test_no_page_asks_any_host_but_the_app_server(module_server, page, query):
    attempts: list[tuple[str, str]] = []  # (page, blocked URL)
    current = {"page": ""}

    def only_loopback(route):
        url = route.request.url
        if urlparse(url).scheme in ("http", "https", "ws", "wss") and urlparse(url).hostname not in LOOPBACK:
            attempts.append((current["page"], url))
            route.abort("internetdisconnected")
        else:
            route.continue_()

    page.context.route("**/*", only_loopback)
    for info in PAGES:
        current["page"] = f"/{info.url_path or ''}"
        open_app_page(page, module_server.url + current["page"] + query)
        page.wait_for_timeout(1500)  # late requests: charts, fonts and icons painted after the run finished
    assert not attempts, f"{len(attempts)} request(s) to hosts other than the app's server:\n" + "\n".join(
        f"  {where}: {url}" for where, url in attempts)
    # The tab icon is still there, bundled (app.py sends assets/icons/hub.svg inline), not dropped.
    icon = page.evaluate("document.querySelector(\"link[rel='shortcut icon']\")?.href || ''")
    assert icon.startswith("data:image/svg+xml") or urlparse(icon).hostname in LOOPBACK, icon[:80]
