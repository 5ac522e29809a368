"""Showing charts the same way on every page: toolbar export in the chosen format, and the numbers."""

from __future__ import annotations

import numpy as np
import streamlit as st

from transformer.export import chart_config, matrix_to_csv

from .sidebar import EXPORT_FORMAT


def show_figure(fig, filename: str, *, key: str | None = None, on_select=None, **kwargs):
    """Plot `fig`; its toolbar camera saves `<filename>.png|svg` (the sidebar's format) at slide scale."""
    fmt = st.session_state.get(EXPORT_FORMAT, "png")
    return st.plotly_chart(fig, config=chart_config(filename, fmt), key=key,
                           on_select=on_select or "ignore", **kwargs)


def csv_download(matrix: np.ndarray, row_labels, col_labels, filename: str, *, key: str | None = None) -> None:
    """A button that downloads the numbers behind a heatmap as CSV (rows and columns labelled)."""
    st.download_button(
        "Numbers (CSV)",
        matrix_to_csv(np.asarray(matrix), row_labels, col_labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key or f"csv-{filename}",
        icon=":material/table:",
        on_click="ignore",
    )
