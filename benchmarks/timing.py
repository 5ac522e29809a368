"""Timing helpers shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time


def median_ms(fn, repeats: int, digits: int = 2) -> float:
    """Median wall time of `fn()` over `repeats` calls, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), digits)
