"""Attention Playground: entry point. Page config, navigation, and the shared sidebar (active model)."""

from __future__ import annotations

import streamlit as st

from pages.common.runtime import configure_torch

configure_torch()

st.set_page_config(page_title="Attention Playground", page_icon=":material/hub:", layout="wide")

PAGES = {
    "Start": [
        st.Page("pages/learn/home.py", title="Home", icon=":material/home:", default=True),
    ],
    "Explore a model": [
        st.Page("pages/explore/decode.py", title="Step-by-step decoding", icon=":material/play_arrow:", url_path="decode"),
        st.Page("pages/explore/attention.py", title="All attention heads", icon=":material/grid_view:", url_path="attention"),
    ],
    "Concepts": [
        st.Page("pages/concepts/masks.py", title="Masks", icon=":material/visibility_off:", url_path="masks"),
        st.Page("pages/concepts/positions.py", title="Positional encoding", icon=":material/waves:", url_path="positions"),
    ],
    "Models": [
        st.Page("pages/models/train.py", title="Train live", icon=":material/model_training:", url_path="train"),
        st.Page("pages/models/checkpoints.py", title="Checkpoints", icon=":material/inventory_2:", url_path="checkpoints"),
    ],
}

page = st.navigation(PAGES)

from pages.common.sidebar import render_sidebar  # noqa: E402  (after set_page_config)

render_sidebar()
page.run()
