"""The app frame: navigation, legacy-mode entry files, the shared sidebar."""

from __future__ import annotations

import ast

import pytest
from helpers.browser import open_app_page
from helpers.repo import ROOT

from ui import runtime
from ui.catalog import PAGES

PAGES_DIR = ROOT / "pages"


def test_every_page_url_has_a_legacy_entry_file_and_nothing_else_sits_in_pages():
    urls = [info.url_path for info in PAGES if info.url_path]
    assert len(urls) == len(PAGES) - 1 == len(set(urls))  # every page but home, each at its own URL
    entries = {p.stem for p in PAGES_DIR.glob("*.py")}
    assert entries == set(urls)
    for url in urls:
        assert "run_app()" in (PAGES_DIR / f"{url}.py").read_text()


def test_default_run_has_the_model_picker_and_a_card(app):
    at = app()
    picker = at.selectbox(key="active_model_widget")
    assert picker.value == "shipped:reverse"
    assert {o for o in picker.options} >= {"reverse (pretrained)"}
    assert any("Held-out exact match" in m.value for m in at.sidebar.markdown)


def test_the_app_parses_one_thread_at_a_time_where_python_needs_it(app, monkeypatch):
    unwrapped = ast.parse
    while hasattr(unwrapped, "__wrapped__"):  # another test's app run in this process may have wrapped it
        unwrapped = unwrapped.__wrapped__
    monkeypatch.setattr(ast, "parse", unwrapped)  # as it was restored after the test
    app()
    assert (getattr(ast.parse, "__wrapped__", None) is unwrapped) is runtime.shared_ast_depth()


@pytest.mark.browser
def test_a_page_url_as_the_first_request_shows_that_page_without_a_not_found_notice(fresh_server, page):
    open_app_page(page, f"{fresh_server.url}/positions")
    assert page.get_by_role("heading", name="Positional encoding").is_visible()
