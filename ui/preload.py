"""Start the browser on the chart renderer while the server is still busy with the first script run."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import streamlit as st

# Streamlit's plotly element lives in one lazily loaded chunk of its frontend (4.7 MB with plotly.js in it).
STATIC_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"
# Import the chunk next to the frontend's own entry module, so the page's base path needs no knowing. The
# element holds no content: the style hides its container, which would otherwise add a gap above the page.
IMPORT_JS = """<style>[data-testid=stElementContainer]:has(#ap-preload-charts) {{ display: none; }}</style>
<script id="ap-preload-charts">
const entry = document.querySelector('script[type=module][src*="static/js/"]');
if (entry) import(new URL('{chunk}', entry.src).href).catch(() => {{}});
</script>"""


@cache
def plotly_chunk() -> str | None:
    """File name of the frontend chunk that draws plotly charts, or None where this Streamlit has none."""
    found = list(STATIC_JS.glob("PlotlyChart.*.js"))
    return found[0].name if len(found) == 1 else None


def preload_charts() -> None:
    """Have the browser fetch and evaluate the chart chunk now, so a first chart need not wait for it."""
    if chunk := plotly_chunk():
        st.html(IMPORT_JS.format(chunk=chunk), unsafe_allow_javascript=True)
