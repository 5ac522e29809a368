"""Probes for tests/unit/test_worker.py. They run inside worker processes, so they live in a module the worker can
import (tests/ is on sys.path under pytest, and a worker is given the sys.path of the process that starts it)."""

from __future__ import annotations

import time


class TextProbe:
    """Returns its text (so a test sees which text each probe used), after `delay` seconds: a slow probe
    makes a step long enough that pause() and stop() surely arrive in the middle of one."""

    def __init__(self, text: str, delay: float = 0.0):
        self.text = text
        self.delay = delay

    def __call__(self, bundle) -> str:
        time.sleep(self.delay)
        return self.text


class FailingProbe:
    """Raises at the first probe at or after step `at` (the worker's run fails there)."""

    def __init__(self, at: int):
        self.at = at

    def __call__(self, bundle) -> int:
        step = bundle.card["steps"]
        if step >= self.at:
            raise FloatingPointError(f"probe failed on purpose at step {step}")
        return step
