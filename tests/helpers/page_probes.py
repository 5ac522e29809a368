"""Probes for tests/app/test_page_train.py. The Train page's runs probe inside their worker process, so a probe a
test slips into the page must live in a module that process can import (tests/ is on sys.path under pytest,
and a worker is given the sys.path of the process that starts it)."""

from __future__ import annotations

from transformer.runs.probe import Probe


class DivergingProbe(Probe):
    """The page's probe, raising FloatingPointError (as a diverging run does) at the first probe at or after
    step AT: the run fails there, in the worker."""

    AT = 4

    def __call__(self, bundle):
        step = bundle.card["steps"]
        if step >= self.AT:
            raise FloatingPointError(f"simulated divergence at step {step}")
        return super().__call__(bundle)
