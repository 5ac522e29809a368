"""Process-wide runtime choices, made once before any model runs."""

from __future__ import annotations

import gc

import torch

_configured = False


def configure_torch() -> None:
    """One intra-op thread: inside Streamlit's threads the default pool was up to 30x slower (docs/ARCHITECTURE.md),
    and a single thread leaves the other core to the server and a second session. Then move every object
    alive after the imports out of the garbage collector's reach: a full collection fell from ~200 ms to
    under 1 ms."""
    global _configured
    if not _configured:
        torch.set_num_threads(1)
        gc.freeze()
        _configured = True
