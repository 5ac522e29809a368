"""The chart code, and starting the browser on it while the server is still busy with the first script run (the
other elements' code once it is idle); and the browser's word to the server, once it has drawn the page, that the
warm-up need not wait for it any longer (ui/warm.py).

Every chart of the app is drawn by ui/step_player.py's component with a build of plotly.js that holds the trace
types the app draws (scatter, bar, heatmap; assets/plotly-build/), at the plotly.js version plotly.py targets:
1.3 MB that a page imports in ~0.2 s here, where plotly.js's own cartesian build took ~0.55 s and Streamlit's chart
element brings the full build (4.7 MB, ~1.1 s) inside one chunk of its frontend (docs/MEASUREMENTS.md). A custom
component's path is how Streamlit serves a folder of files whatever the app's main script: assets/plotly/ at
`component/ap_chart_code/`."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import streamlit as st
from streamlit.components.v1.component_registry import ComponentRegistry
from streamlit.components.v1.custom_component import CustomComponent
from streamlit.runtime import Runtime

from ui import warm

PLOTLY_DIR = Path(__file__).resolve().parents[1] / "assets" / "plotly"
PLOTLY_FILE = "plotly-app.min.js"
# Registered as `declare_component("ap_chart_code", path=PLOTLY_DIR)` would, less its search for the calling module
# (~60 ms of a fresh server's first page run, before the preload goes out)
SERVED = CustomComponent(name="ap_chart_code", path=str(PLOTLY_DIR), module_name=__name__)
# Other elements have chunks of their own in Streamlit's frontend, fetched and run only when a page first shows
# one, and one that a page shows first holds back every element drawn with it until its chunk has come: the Train
# page's live view waited ~0.4 s after Start for those below (the syntax highlighter, 1.6 MB, is run for code in
# markdown) before its first progress line showed. Each brings the chunks it imports (the progress bar's, the
# slider's width).
# In-page, whether the page is drawn: no skeleton left, every element of ui/step_player.py's component holding its
# player or its chart, stamped drawn (the beacon's test; benchmarks/click_latency.py's for a page's first visit)
PAGE_DRAWN_JS = """!document.querySelector("[data-testid=stSkeleton]") &&
  [...document.querySelectorAll("[data-testid=stBidiComponentRegular]")].every((element) =>
    element.querySelector(".ap-player") || element.querySelector(".ap-chart")?.dataset.apStep)"""
STATIC_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"
CHARTS = "BidiComponent"  # the element the charts are drawn in (ui/step_player.py's st.components.v2 component)
LATER = ("DataFrame", "Progress", "DownloadButton", "PageLink", "Slider", "StreamlitSyntaxHighlighter")
# All load next to the frontend's own entry module, so the page's base path needs no knowing: the chart code and
# CHARTS at once (the home page's first chart needs them), the LATER chunks one at a time whenever the browser is
# idle once they have come and the page's run has ended (no home page element needs them, and evaluating one is a
# task the page's drawing would wait for: the syntax highlighter's took ~0.3 s of a cold start's first chart). The
# element holds no content: the style hides its container, which would otherwise add a gap above the page. Once the
# page is drawn as well (PAGE_DRAWN_JS), it asks for BEACON's file when next idle (after DRAWN_WAITS looks in any case).
IMPORT_JS = """<style>[data-testid=stElementContainer]:has(#ap-preload-charts) {{ display: none; }}</style>
<script id="ap-preload-charts">
const entry = document.querySelector('script[type=module][src*="static/js/"]');
const load = (path) => import(new URL(path, entry.src).href).catch(() => {{}});
const idle = window.requestIdleCallback || ((then) => setTimeout(then, 200));
const later = (chunks) => chunks.reduce((done, chunk) => done.then(() => new Promise(
  (loaded) => idle(() => load(chunk).then(loaded)))), Promise.resolve());
const ran = () => document.querySelector('[data-testid=stApp][data-test-script-state=notRunning]');
const run = new Promise((ended) => ran() ? ended() : new MutationObserver((_, watch) => {{
  if (ran()) {{ watch.disconnect(); ended(); }}
}}).observe(document.body, {{subtree: true, attributes: true, attributeFilter: ["data-test-script-state"]}}));
const drawn = () => {page_drawn};
const tell = (waits) => drawn() || !waits ? idle(() => fetch(new URL({drawn}, entry.src), {{cache: "no-store"}})
  .catch(() => {{}})) : setTimeout(() => tell(waits - 1), 50);
if (entry) Promise.all([window.apPlotly ??= load({plotly}), load({charts}), run]).then(() => {{
  tell({waits});
  later({later});
}});
</script>"""


class _Beacon(CustomComponent):
    """A component whose file the browser asks for once it has drawn its page: the server's warm-up waits for that
    (ui/warm.py). Streamlit reads a component's `abspath` at each request for one of its files (and as it registers
    one, during a script run: no word of a drawn page, since the warm-up heeds only words after the last run)."""

    @property
    def abspath(self) -> str:
        warm.drawn()
        return super().abspath


BEACON = _Beacon(name="ap_drawn", path=str(PLOTLY_DIR), module_name=__name__)
BEACON_FILE = "LICENSE"  # a small file of PLOTLY_DIR, never cached (fetch's "no-store"): every page load asks anew
DRAWN_WAITS = 200  # 50-ms looks for a drawn page (no skeleton, every chart drawn) before the beacon goes anyway


def plotly_path() -> str:
    """The chart code's address, relative to the frontend's entry module (`static/js/index.*.js`). Serves it first,
    where a server runs (the registry lives in its runtime; ui/step_player.py asks too)."""
    if Runtime.exists():
        registry = ComponentRegistry.instance()
        registry.register_component(SERVED)
        if registry.get_component(BEACON.name) is not BEACON:  # once: registering reads `abspath` too
            registry.register_component(BEACON)
    return f"../../component/{SERVED.name}/{PLOTLY_FILE}"


@cache
def chunk(name: str) -> str | None:
    """File name of the frontend chunk `name` (e.g. "DataFrame"), or None where this Streamlit has none."""
    found = list(STATIC_JS.glob(f"{name}.*.js"))
    return found[0].name if len(found) == 1 else None


def preload_charts() -> None:
    """Have the browser fetch and evaluate the chart code and its element's chunk now, so a first chart need not
    wait for them, and the other chunks (LATER) after them."""
    later = [found for name in LATER if (found := chunk(name))]
    st.html(IMPORT_JS.format(plotly=json.dumps(plotly_path()), charts=json.dumps(chunk(CHARTS)),
                             drawn=json.dumps(f"../../component/{BEACON.name}/{BEACON_FILE}"),
                             page_drawn=PAGE_DRAWN_JS, waits=DRAWN_WAITS,
                             later=json.dumps(later)), unsafe_allow_javascript=True)
