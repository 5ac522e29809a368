"""The README's screenshot: the home page at 1440x900 in headless Chromium, written to docs/images/home.png.

Run from anywhere: `python3 .ci/screenshot.py [OUT.png]`. It starts `streamlit run app.py` on a free loopback
port (its own empty model store), waits for the home page's chart to be drawn, takes the screenshot and ends
the server by its process group. Chromium is Debian's (/usr/bin/chromium, or CHROMIUM_PATH).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.timing import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (the benchmarks' and tests' browser)

DRAWN = "[data-testid=stApp][data-test-script-state=notRunning] .js-plotly-plot"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images" / "home.png"
    port = free_port()
    store = tempfile.mkdtemp(prefix="ap-screenshot-")
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env={**os.environ, "AP_MODEL_STORE": store}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("the server did not answer its health check within 120 s")
            time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/", timeout=60_000)
            page.wait_for_selector(DRAWN, timeout=90_000)
            page.wait_for_function(
                "() => [...document.querySelectorAll('.js-plotly-plot')].every(d => d._fullLayout)", timeout=30_000)
            time.sleep(2)  # fonts and the formula settle
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(store, ignore_errors=True)
    print(f"{out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
