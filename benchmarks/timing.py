"""Helpers shared by the benchmark scripts: timing, and the headless Chromium that paints charts."""

from __future__ import annotations

import statistics
import time

from plotly.offline import get_plotlyjs

BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]


def plot_page() -> str:
    """An HTML page with plotly.js inlined and one empty <div id='plot'> to paint into."""
    return f"<html><body><div id='plot'></div><script>{get_plotlyjs()}</script></body></html>"


def median_ms(fn, repeats: int, digits: int = 2) -> float:
    """Median wall time of `fn()` over `repeats` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), digits)
