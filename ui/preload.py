"""Start the browser on the chart renderer while the server is still busy with the first script run, and on the
other elements' renderers once it is idle."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import streamlit as st

# Streamlit's plotly element lives in one lazily loaded chunk of its frontend (4.7 MB with plotly.js in it), its
# dataframe element in another (the tables of the Checkpoints, Where it fails, attention, masks, positions and
# compare pages): each was fetched and run only when a page first showed one. Other elements have small chunks of
# their own, and one that a page shows first holds back every element drawn with it until its chunk has come: the
# Train page's live view waited ~0.4 s after Start for those below (the syntax highlighter, 1.6 MB, is run for
# code in markdown) before its first progress line showed.
STATIC_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"
# Each brings the chunks it imports (the progress bar's, the slider's width).
LATER = ("DataFrame", "Progress", "DownloadButton", "PageLink", "Slider", "StreamlitSyntaxHighlighter")
# Import the chunks next to the frontend's own entry module, so the page's base path needs no knowing: the charts'
# at once (the home page's first chart needs it), the others one at a time whenever the browser is idle after it
# (no home page element needs them). The element holds no content: the style hides its container, which would
# otherwise add a gap above the page.
IMPORT_JS = """<style>[data-testid=stElementContainer]:has(#ap-preload-charts) {{ display: none; }}</style>
<script id="ap-preload-charts">
const entry = document.querySelector('script[type=module][src*="static/js/"]');
const load = (chunk) => import(new URL(chunk, entry.src).href).catch(() => {{}});
const idle = window.requestIdleCallback || ((then) => setTimeout(then, 200));
const later = (chunks) => chunks.reduce((done, chunk) => done.then(() => new Promise(
  (loaded) => idle(() => load(chunk).then(loaded)))), Promise.resolve());
if (entry) load({charts}).then(() => later({later}));
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
    other chunks (LATER) after it."""
    if plotly_chunk():
        later = [found for name in LATER if (found := chunk(name))]
        st.html(IMPORT_JS.format(charts=json.dumps(plotly_chunk()), later=json.dumps(later)),
                unsafe_allow_javascript=True)
