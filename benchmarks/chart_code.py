"""How long does a browser take to start the chart code (issue 25's first chart)? Prints JSON.

In headless Chromium on this machine, each round a new browser context (nothing cached) opens a blank page served
here (loopback, a thread of this process) and imports one build of plotly.js as the app does (`import()` of the
file, ui/preload.py), then draws one 15 x 15 heatmap:
  import_ms      from import() to the module evaluated (fetch, parse, compile, run)
  first_plot_ms  Plotly.newPlot of the heatmap (its first drawing compiles what the import left lazy)
The app's build (assets/plotly/, built by assets/plotly-build/) against the peer: the full plotly.js that plotly.py
ships (package_data/plotly.min.js, the build Streamlit's own chart element runs), the builds in turn, --rounds each;
`--also FILE` adds another build (e.g. plotly.js's own cartesian dist, `npm pack plotly.js-cartesian-dist-min`).

    python benchmarks/chart_code.py [--rounds 8] [--also path/to/plotly-cartesian.min.js]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from serving import CHROMIUM, CHROMIUM_ARGS, chromium_missing  # noqa: E402
from timing import machine  # noqa: E402

from ui.preload import PLOTLY_DIR, PLOTLY_FILE  # noqa: E402

TIME_JS = """async (file) => {
  const t0 = performance.now();
  await import(`./${file}`);
  const t1 = performance.now();
  const z = [...Array(15)].map((_, i) => [...Array(15)].map((_, j) => Math.cos(i * j)));
  await window.Plotly.newPlot("chart", [{type: "heatmap", z}], {height: 420});
  return {import_ms: t1 - t0, first_plot_ms: performance.now() - t1};
}"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve(folder: Path) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--also", type=Path, action="append", default=[], help="another build of plotly.js")
    args = parser.parse_args()
    if missing := chromium_missing():
        print(json.dumps({"skipped": missing}))
        return
    from plotly import __file__ as plotly_py
    from playwright.sync_api import sync_playwright

    full = Path(plotly_py).parent / "package_data" / "plotly.min.js"
    builds = {"app": PLOTLY_DIR / PLOTLY_FILE, "plotly_py_full": full, **{path.name: path for path in args.also}}
    folder = Path(tempfile.mkdtemp(prefix="ap-bench-chart-code-"))
    for name, path in builds.items():
        shutil.copy(path, folder / f"{name}.js")
    (folder / "blank.html").write_text("<html><body><div id='chart' style='width: 640px'></div></body></html>")
    server = serve(folder)
    times: dict[str, list[dict]] = {name: [] for name in builds}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            browser.new_page().close()  # Chromium's own start is not the code's
            for _ in range(args.rounds):
                for name in builds:  # in turn, so that other load hits each alike
                    context = browser.new_context()
                    page = context.new_page()
                    page.goto(f"http://127.0.0.1:{server.server_port}/blank.html")
                    times[name].append(page.evaluate(TIME_JS, f"{name}.js"))
                    context.close()
            browser.close()
    finally:
        server.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    out = {name: {"bytes": builds[name].stat().st_size,
                  **{key: round(statistics.median(t[key] for t in runs)) for key in ("import_ms", "first_plot_ms")},
                  "total_ms": round(statistics.median(t["import_ms"] + t["first_plot_ms"] for t in runs))}
           for name, runs in times.items()}
    print(json.dumps({"benchmark": "chart_code", "rounds": args.rounds, "builds": out,
                      "app_vs_peer": round(out["app"]["total_ms"] / out["plotly_py_full"]["total_ms"], 2),
                      "machine": machine()}))


if __name__ == "__main__":
    main()
