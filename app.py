"""Attention Playground: entry point. Page config, the reader's language, navigation, and the shared sidebar
(active model). `ast.parse` takes one lock where Python needs it, plotly waits for a pandas another thread is
importing, and a server's first run pauses the garbage collector (ui/runtime.py); an error nobody expected ends a run
with a note, not a traceback (ui/failure.py); once its page is drawn, the server warms what the other pages need
(ui/warm.py), and a page that computes, opened before torch's import has ended, waits for it under a spinner that
says so."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import failure, runtime, warm
from ui.catalog import PAGES
from ui.preload import preload_charts

# The favicon is Material Symbols' "hub" as a bundled file (assets/icons/; sent inline as a data: URL). With
# page_icon=":material/hub:" the browser fetched it from fonts.gstatic.com on every script run: offline, it failed.
FAVICON = Path(__file__).resolve().parent / "assets" / "icons" / "hub.svg"


def navigation() -> dict[str, list]:
    """The pages by group, titled in the reader's language."""
    groups: dict[str, list] = {}
    for info in PAGES:
        where = {"url_path": info.url_path} if info.url_path else {"default": True}
        groups.setdefault(info.group, []).append(st.Page(info.path, title=info.title, icon=info.icon, **where))
    return groups


def main() -> None:
    preload_charts()  # first: the browser fetches the chart code while this run goes on
    st.set_page_config(page_title="Attention Playground", page_icon=str(FAVICON), layout="wide")  # favicon: numpy, PIL

    runtime.configure_torch()  # before torch's import, which the first page may not need (ui/glance.py)
    from ui import language  # after set_page_config
    from ui.sidebar import render_sidebar
    from ui.tables import for_page

    language.follow_session()
    before = language.current()
    page = st.navigation(navigation())
    for_page(page.url_path).view().adopt_link()  # before the sidebar, whose model picker a link may set
    if language.current() != before:  # a link in the other language: its navigation is titled afresh
        st.rerun()
    render_sidebar()
    if page.url_path:  # every page but home computes with torch (home only a decode no server kept: ui/glance.py)
        runtime.load_torch()
    page.run()


runtime.serialize_ast_parse()
runtime.plotly_waits_for_imports()
with runtime.first_run(), warm.page_view(), failure.noted():
    main()
warm.start()
