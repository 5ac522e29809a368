"""The app frame: navigation, legacy-mode entry files, the shared sidebar."""

from __future__ import annotations

import ast
import logging

import pytest
from helpers.browser import open_app_page
from helpers.repo import ROOT, open_link
from streamlit import config

from transformer.i18n import t, using

from ui import failure, runtime, sidebar
from ui.catalog import PAGES
from ui.state import View
from ui.tables.positions import POSITIONS

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


class Bug(RuntimeError):
    """The error a test puts in a page's way."""


@pytest.fixture
def learners_server(caplog):
    """The server's error display as the app ships it (.streamlit/config.toml); yields what ui/failure.py has logged
    so far (Streamlit's loggers do not propagate to caplog's). The tests' own display ("full") afterwards."""
    config.set_option("client.showErrorDetails", "type")
    failure._LOGGER.addHandler(caplog.handler)
    yield lambda: [record for record in caplog.records if record.name == failure._LOGGER.name]
    failure._LOGGER.removeHandler(caplog.handler)
    config.set_option("client.showErrorDetails", "full")


def broken(*args, **kwargs):
    raise Bug("a bug in the sidebar")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_unexpected_error_is_a_note_in_the_readers_language_and_the_traceback_goes_to_the_log(
        learners_server, monkeypatch, lang):
    at = open_link("pages/explore/decode.py", {"lang": lang, "input": "hello"})
    picker = at.selectbox(key="active_model_widget")
    assert not at.exception and not at.error
    monkeypatch.setattr(sidebar, "render_sidebar", broken)  # app.py imports it at each run
    at.run()
    assert not at.exception  # no traceback on the page
    with using(lang):
        assert [e.value for e in at.error] == [t("app.unexpected", kind="Bug")]
    (record,) = learners_server()
    assert record.exc_info[0] is Bug and "render_sidebar" in logging.Formatter().formatException(record.exc_info)
    monkeypatch.undo()  # the bug fixed: the next run is the page as it was
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="active_model_widget").value == picker.value
    assert at.text_input(key="shared_input_widget").value == "hello"


def test_with_full_details_an_unexpected_error_is_streamlits_to_show(monkeypatch):
    at = open_link("pages/explore/decode.py", {})
    monkeypatch.setattr(sidebar, "render_sidebar", broken)
    at.run()
    assert [e.value for e in at.exception] and "a bug in the sidebar" in at.exception[0].value
    assert not at.error


def fragment_page():
    """A page whose fragment breaks at a click (AppTest runs this function's body as a script)."""
    import streamlit as st

    from ui.failure import fragment

    @fragment
    def part():
        if st.button("Break", key="break"):
            raise RuntimeError("a bug in a fragment")
        st.write("whole")

    part()


def test_a_fragments_run_ends_in_the_note_too(learners_server):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(fragment_page).run()
    assert [m.value for m in at.markdown] == ["whole"]
    at.button(key="break").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == [t("app.unexpected", kind="RuntimeError")]
    assert learners_server()[0].exc_info[0] is RuntimeError


def callback_page():
    """A page whose button's callback breaks (AppTest runs this function's body as a script)."""
    import streamlit as st

    from ui.failure import callback

    def bug():
        raise RuntimeError("a bug in a callback")

    st.button("Break", key="break", on_click=callback(bug))
    st.write("whole")


def test_a_buttons_callback_ends_in_the_note_and_the_page_draws_on(learners_server):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(callback_page).run()
    at.button(key="break").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == [t("app.unexpected", kind="RuntimeError")]
    assert [m.value for m in at.markdown] == ["whole"]  # the page's run after the callback
    assert learners_server()[0].exc_info[0] is RuntimeError


def test_a_widgets_change_callback_ends_in_the_note_and_keeps_the_change(learners_server, monkeypatch):
    """View.widget's own callback (here the positions page's d_model slider, which resets the plotted dimensions)."""
    at = open_link("pages/concepts/positions.py", {})
    monkeypatch.setattr(View, "reset", broken)
    at.slider(key=POSITIONS.view().widget_key("d_model")).set_value(30).run()
    assert not at.exception
    assert [e.value for e in at.error] == [t("app.unexpected", kind="Bug")]
    assert at.slider(key=POSITIONS.view().widget_key("d_model")).value == 30
    assert learners_server()[0].exc_info[0] is Bug


@pytest.mark.browser
def test_a_page_url_as_the_first_request_shows_that_page_without_a_not_found_notice(fresh_server, page):
    open_app_page(page, f"{fresh_server.url}/positions")
    assert page.get_by_role("heading", name="Positional encoding").is_visible()
