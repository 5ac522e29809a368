"""The decodes the pages show, computed once per (model, model version, input, options).

Every result is shared read-only by every session (`st.cache_resource`: a hit hands back the same object,
with no copy; pages never mutate one). A model is named by its registry key and `registry.version(key)`, so a
replaced shipped checkpoint computes afresh. The library's ValueErrors (TokenizerError, DecodeError) pass
through to the page, which says what is wrong with the input.
"""

from __future__ import annotations

import streamlit as st

from transformer.attention_maps import AttentionMap, attention_maps
from transformer.decoding import BeamResult, DecodeResult, beam_search, greedy_decode

from . import model_registry as registry

TOPK = 5  # next-token candidates recorded at each step


@st.cache_resource(max_entries=64, show_spinner="Decoding…")
def greedy(key: str, version: int, text: str, forced: tuple[tuple[int, int], ...] = (),
           positions: bool = True) -> DecodeResult:
    """Traced greedy decode of `text`, with `forced` (0-based step, token id) pairs and positions on or off."""
    bundle = registry.bundle_for(key)
    return greedy_decode(bundle.model, bundle.tokenizer, text, k=TOPK, force=dict(forced), positions=positions)


@st.cache_resource(max_entries=64, show_spinner="Beam search…")
def beam(key: str, version: int, text: str, width: int) -> BeamResult:
    bundle = registry.bundle_for(key)
    return beam_search(bundle.model, bundle.tokenizer, text, beam=width)


@st.cache_resource(max_entries=64, show_spinner="Reading the attention…")
def maps(key: str, version: int, text: str) -> dict[str, AttentionMap]:
    """Every kind of attention of the greedy decode of `text`, with labels and the task's alignment."""
    return attention_maps(greedy(key, version, text), registry.bundle_for(key).task, text)
