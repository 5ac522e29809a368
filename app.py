"""Attention Playground: entry point. `streamlit run app.py` imports this file as its server (`app`, an st.App whose
start-up warms what the first pages need: ui/warm.py), then runs it, as `__main__`, for every page view: page
config, navigation, and the shared sidebar (active model)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

# The favicon is Material Symbols' "hub" as a bundled file (assets/icons/; sent inline as a data: URL). With
# page_icon=":material/hub:" the browser fetched it from fonts.gstatic.com on every script run: offline, it failed.
FAVICON = Path(__file__).resolve().parent / "assets" / "icons" / "hub.svg"


def main() -> None:
    from ui import warm
    from ui.catalog import PAGES
    from ui.preload import preload_charts

    st.set_page_config(page_title="Attention Playground", page_icon=str(FAVICON), layout="wide")
    preload_charts()  # the browser loads the chart code while the server finishes its warm-up
    warm.wait()

    from ui.runtime import configure_torch

    configure_torch()

    navigation: dict[str, list] = {}
    for info in PAGES:
        where = {"url_path": info.url_path} if info.url_path else {"default": True}
        navigation.setdefault(info.group, []).append(st.Page(info.path, title=info.title, icon=info.icon, **where))
    page = st.navigation(navigation)

    from ui.sidebar import render_sidebar  # after set_page_config
    from ui.tables import for_page

    for_page(page.url_path).view().adopt_link()  # before the sidebar, whose model picker a link may set
    render_sidebar()
    page.run()


if __name__ == "__main__":  # a page view (Streamlit and AppTest run the script as __main__)
    main()
else:  # `streamlit run app.py` imports it to serve it
    from ui.warm import lifespan

    app = st.App(__file__, lifespan=lifespan)
