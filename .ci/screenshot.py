"""The README's screenshot: the home page at 1440x900 in headless Chromium, written to docs/images/home.png.

Run from anywhere: `python3 .ci/screenshot.py [OUT.png]`. It starts the app as the benchmarks do
(`benchmarks/serving.AppServer`: a free loopback port, a model store of its own, stopped by its pid), waits for
the home page's chart to be drawn and takes the screenshot. Chromium is Debian's (/usr/bin/chromium, or
CHROMIUM_PATH).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the benchmarks import each other as top-level modules
from serving import IDLE, AppServer  # noqa: E402  (after the sys.path insert)
from timing import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

DRAWN = f"{IDLE} .js-plotly-plot"


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images" / "home.png"
    server = AppServer()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(f"{server.url}/", timeout=60_000)
            page.wait_for_selector(DRAWN, timeout=90_000)
            page.wait_for_function(
                "() => [...document.querySelectorAll('.js-plotly-plot')].every(d => d._fullLayout)", timeout=30_000)
            time.sleep(2)  # fonts and the formula settle
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
            browser.close()
    finally:
        server.stop()
    print(f"{out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
