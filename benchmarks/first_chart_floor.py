"""How soon can any Streamlit page show its first chart on this machine? The floor under issue 25's fresh-server
target (first chart on Home within 3 s). Prints JSON.

Four bare pages, each a heading and one element, against the app's home page, on servers started here (loopback,
ended by their pid) with the project's .streamlit/config.toml, Chromium on the same cores:
  text       a heading and an inline SVG image (no chart element: Streamlit's frontend alone)
  component  a heading and one plotly heatmap through the app's own chart (ui/step_player.plot: the element every
             chart of the app uses, the app's build of plotly.js, asked for first by ui/preload.py; no torch)
  plotly     a heading and one plotly heatmap through Streamlit's own element (st.plotly_chart: the full plotly.js)
  vega       a heading and one Vega-Lite heatmap (st.vega_lite_chart)
  new_visitor_ms  a new browser page (empty cache) opening each warm server, ms until its first chart (the text
                  page: its image) is drawn, as Playwright sees it; the five in turn, --visitors rounds.
  cold_start_ms   from `streamlit run` to the first chart in a new page, the app against the bare component and
                  plotly pages, in turn, --starts each: the server's start is in all, the app's first script run only
                  in its own.
  *_painted_ms    the same to the frame that painted the chart, by the page's clock (serving.PAINTED_JS):
                  Playwright hears of it up to ~0.5 s later, when the page's main thread is busy right after.
So the app's home page can be no quicker than the component page, whose cold start is what any Streamlit page that
draws its chart as the app does needs here. The machine (CPU, capability, load) is printed with the figures;
`--cpu avx2` caps the app server's kernels (the bare pages run none).

    python benchmarks/first_chart_floor.py [--visitors 6] [--starts 4] [--cpu avx2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import add_cpu_argument, machine, use_cpu_kind  # noqa: E402

use_cpu_kind()

from serving import (  # noqa: E402
    CHART, CHROMIUM, CHROMIUM_ARGS, AppServer, chromium_missing, load_average, painted_at, percentiles, watch_paint,
)

HEAD = 'import streamlit as st\nst.set_page_config(page_title="bare", layout="wide")\nst.title("Bare")\n'
HEATMAP = "z = [[(i * j) % 7 for j in range(12)] for i in range(12)]\n"
# name: (the page's script, the selector of its first chart)
PAGES = {
    "text": (HEAD + "st.image('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"240\" height=\"240\">"
                    "<rect width=\"120\" height=\"120\" fill=\"#336\"/></svg>')\n", "[data-testid=stImage] img"),
    "component": ("import plotly.graph_objects as go\n" + HEAD
                  + "from ui.preload import preload_charts\npreload_charts()\nfrom ui.step_player import plot\n"
                  + HEATMAP + "plot('chart', go.Figure(go.Heatmap(z=z, colorscale='Blues')), 'chart', 'png')\n",
                  CHART),
    "plotly": ("import plotly.graph_objects as go\n" + HEAD + HEATMAP
               + "st.plotly_chart(go.Figure(go.Heatmap(z=z, colorscale='Blues')), key='chart')\n", CHART),
    "vega": (HEAD + "values = [{'x': i, 'y': j, 'z': (i * j) % 7} for i in range(12) for j in range(12)]\n"
                    "st.vega_lite_chart({'data': {'values': values}, 'mark': 'rect', 'encoding': {"
                    "'x': {'field': 'x', 'type': 'ordinal'}, 'y': {'field': 'y', 'type': 'ordinal'},"
                    "'color': {'field': 'z', 'type': 'quantitative'}}}, key='chart')\n",
             ".vega-embed svg, .vega-embed canvas"),
}


def visit(browser, url: str, selector: str, began: float | None = None) -> tuple[int, int]:
    """A new page (its own context: nothing cached) opening `url`: ms until `selector` is visible as Playwright sees
    it, and until the frame that painted it; from `began` (time.time()) if given, else from the navigation."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    watch_paint(page, selector)
    try:
        start = time.time() if began is None else began
        page.goto(url)
        page.wait_for_selector(selector, timeout=60_000)
        seen = round((time.time() - start) * 1000), round(painted_at(page) - start * 1000)
        page.wait_for_timeout(1000)  # let it settle before the next visitor
        return seen
    finally:
        page.close()


def cold_start(browser, script: str, selector: str) -> tuple[int, int]:
    """A new server of `script` and a new page on it as soon as it answers: ms from the start to the chart, as
    Playwright sees it and painted."""
    began = time.time()
    server = AppServer(script=script)
    try:
        return visit(browser, server.url, selector, began)
    finally:
        server.stop()


def both(figure: str, times: dict[str, list[tuple[int, int]]]) -> dict:
    """`figure`_ms (as Playwright sees the chart) and `figure`_painted_ms, each page's percentiles."""
    return {f"{figure}_ms": {name: percentiles([seen for seen, _ in pairs]) for name, pairs in times.items()},
            f"{figure}_painted_ms": {name: percentiles([painted for _, painted in pairs])
                                     for name, pairs in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=6, help="rounds of new visitors, the four pages in turn")
    parser.add_argument("--starts", type=int, default=4, help="cold starts of the app, component and plotly pages each")
    add_cpu_argument(parser)
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="ap-floor-"))
    pages = {"app": ("app.py", CHART)}
    for name, (source, selector) in PAGES.items():
        (folder / f"{name}.py").write_text(source)
        pages[name] = (str(folder / f"{name}.py"), selector)
    out: dict = {"benchmark": "first_chart_floor", "target_ms": 3000, "cpu": args.cpu,
                 "load_avg_before": load_average()}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        browser.new_page().close()  # Chromium's own start is no page's
        try:
            servers = {name: AppServer(script=script) for name, (script, _) in pages.items()}
            try:
                for name, server in servers.items():
                    visit(browser, server.url, pages[name][1])  # each server's first run is not a new visitor's
                times: dict[str, list[tuple[int, int]]] = {name: [] for name in pages}
                for _ in range(args.visitors):
                    for name, server in servers.items():
                        times[name].append(visit(browser, server.url, pages[name][1]))
            finally:
                for server in servers.values():
                    server.stop()
            out.update(both("new_visitor", times))
            starts: dict[str, list[tuple[int, int]]] = {"app": [], "component": [], "plotly": []}
            for _ in range(args.starts):
                for name in starts:
                    starts[name].append(cold_start(browser, *pages[name]))
            out.update(both("cold_start", starts))
        finally:
            browser.close()
    print(json.dumps({**out, "machine": machine(torch_threads=1)}))


if __name__ == "__main__":
    main()
