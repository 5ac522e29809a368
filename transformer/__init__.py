"""Attention Playground's transformer library: model, attention trace, tasks, training, decoding,
checkpoints. No UI code lives here.

Importing the package loads none of it: `transformer.i18n` (the app's page titles) needs no torch, and a fresh
server's first page showed nothing for the second torch took to import. The names below load the network when
first asked for."""

from __future__ import annotations

__all__ = ["AttentionTrace", "EncoderDecoder", "ModelConfig"]
HOMES = {"AttentionTrace": "transformer.network.trace", "EncoderDecoder": "transformer.network.model",
         "ModelConfig": "transformer.network.config"}


def __getattr__(name: str):
    if name not in HOMES:
        raise AttributeError(f"module 'transformer' has no attribute {name!r}")
    import importlib  # function-local: the network, and torch, load on first use, not with every submodule

    return getattr(importlib.import_module(HOMES[name]), name)
