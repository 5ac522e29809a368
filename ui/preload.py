"""Start the browser on the chart renderer while the server is still busy with the first script run, and on the
table renderer once it is idle."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import streamlit as st

# Streamlit's plotly element lives in one lazily loaded chunk of its frontend (4.7 MB with plotly.js in it), its
# dataframe element in another (the tables of the Checkpoints, Where it fails, attention, masks, positions and
# compare pages): each was fetched and run only when a page first showed one.
STATIC_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"
# Import the chunks next to the frontend's own entry module, so the page's base path needs no knowing: the charts'
# at once (the home page's first chart needs it), the tables' once the browser is idle after it (no home page
# element needs it). The element holds no content: the style hides its container, which would otherwise add a gap
# above the page.
IMPORT_JS = """<style>[data-testid=stElementContainer]:has(#ap-preload-charts) {{ display: none; }}</style>
<script id="ap-preload-charts">
const entry = document.querySelector('script[type=module][src*="static/js/"]');
const load = (chunk) => chunk ? import(new URL(chunk, entry.src).href).catch(() => {{}}) : Promise.resolve();
const idle = window.requestIdleCallback || ((then) => setTimeout(then, 200));
if (entry) load({charts}).then(() => idle(() => load({tables})));
</script>"""


@cache
def chunk(name: str) -> str | None:
    """File name of the frontend chunk `name` (e.g. "PlotlyChart"), or None where this Streamlit has none."""
    found = list(STATIC_JS.glob(f"{name}.*.js"))
    return found[0].name if len(found) == 1 else None


def plotly_chunk() -> str | None:
    """The chunk that draws plotly charts."""
    return chunk("PlotlyChart")


def preload_charts() -> None:
    """Have the browser fetch and evaluate the chart chunk now, so a first chart need not wait for it, and the
    table chunk after it."""
    if plotly_chunk():
        st.html(IMPORT_JS.format(charts=json.dumps(plotly_chunk()), tables=json.dumps(chunk("DataFrame"))),
                unsafe_allow_javascript=True)
