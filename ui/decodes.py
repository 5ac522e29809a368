"""The decodes the pages show, computed once per (model, model version, input, options), and the figures built
from them.

Every result is shared read-only by every session (a hit hands back the same object, with no copy; pages
never mutate one) from one server-wide cache bounded in bytes, not entries: a traced decode of a large model
holds every step's attention, so 64 entries of a big model could hold gigabytes. The least recently used
results go first once the cache passes AP_DECODE_CACHE_MB (default 256). A model is named by its registry
key and `registry.version(key)`, so a replaced shipped checkpoint computes afresh. The library's ValueErrors
(TokenizerError, DecodeError) pass through to the page, which says what is wrong with the input.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import cachetools
import numpy as np
import streamlit as st
import torch
from plotly.basedatatypes import BaseFigure

from transformer import settings
from transformer.i18n import language, t
from transformer.analysis import ablation
from transformer.analysis.attention_maps import AttentionMap, attention_maps
from transformer.analysis.errors import ErrorAnalysis, analyse_errors
from transformer.bundle import ModelBundle
from transformer.network.decoding import BeamResult, DecodeError, DecodeResult, beam_search, greedy_decode
from transformer.network.sampling import output_logits
from transformer.network.tokenizers import TokenizerError

from . import model_registry as registry
from .state import View
from .widgets import current_input

TOPK = 5  # next-token candidates recorded at each step
REFERENCE = (500, 1_000_003)  # held-out pairs (count, seed) whose head outputs mean ablation puts in
IMPORTANCE_SEED = 1  # the held-out inputs head importance scores (`eval` and `ablate` default to it too)
CACHE_BYTES = int(settings.get("AP_DECODE_CACHE_MB") * 2**20)


def nbytes(value) -> int:
    """Bytes of the arrays a result holds (tensors and numpy arrays, through lists, dicts, dataclasses and
    a plotly figure's data and layout); a number counts 32 bytes (a Python float and its pointer), a string its
    length, anything else a token 256 bytes."""
    if isinstance(value, BaseFigure):
        return nbytes(value.to_plotly_json())
    if isinstance(value, int | float | None):
        return 32
    if isinstance(value, str | bytes):
        return 64 + len(value)
    if isinstance(value, torch.Tensor):
        return value.nelement() * value.element_size()
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, list | tuple):
        return 256 + sum(nbytes(v) for v in value)
    if isinstance(value, dict):
        return 256 + sum(nbytes(v) for v in value.values())
    if dataclasses.is_dataclass(value):
        return 256 + sum(nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 256


_cache = cachetools.LRUCache(maxsize=CACHE_BYTES, getsizeof=nbytes)
_lock = threading.Lock()


def memo(kind: str, compute, *args):
    """`compute(*args)`, from the cache when it holds the result of the same kind and arguments (hashable,
    naming the model by key and version). A result larger than the whole budget is handed back but not kept."""
    key = (kind, *args)
    with _lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    value = compute(*args)
    with _lock:
        try:
            _cache[key] = value
        except ValueError:  # cachetools: the value alone exceeds the budget
            pass
    return value


@contextmanager
def model_for(key: str, version: int, knocked: tuple = (), mode: str = "zero"):
    """The model to run: the shared one, or with heads `knocked` out a private copy (hooks on the shared
    model would reach every session's decodes)."""
    model = registry.bundle_for(key).model
    if not knocked:
        yield model
        return
    means = memo("head_means", _head_means, key, version) if mode == "mean" else None
    with ablation.ablated(copy.deepcopy(model), knocked, mode, means) as knocked_out:
        yield knocked_out


def _head_means(key: str, version: int) -> dict:
    bundle = registry.bundle_for(key)
    return ablation.head_means(bundle.model, bundle.tokenizer, bundle.task.pairs(*REFERENCE, "heldout"))


def _greedy(key: str, version: int, text: str, forced: tuple, positions: bool, knocked: tuple,
            mode: str) -> DecodeResult:
    tokenizer = registry.bundle_for(key).tokenizer
    with model_for(key, version, knocked, mode) as model:
        return greedy_decode(model, tokenizer, text, k=TOPK, force=dict(forced), positions=positions)


def greedy(key: str, version: int, text: str, forced: tuple[tuple[int, int], ...] = (),
           positions: bool = True, knocked: tuple = (), mode: str = "zero") -> DecodeResult:
    """Traced greedy decode of `text`, with `forced` (0-based step, token id) pairs, positions on or off,
    and the heads `knocked` out (ablation.Head, sorted) by zeroing or by their mean (`mode`)."""
    with st.spinner(t("app.decoding")):  # shown only when it takes longer than half a second
        return memo("greedy", _greedy, key, version, text, forced, positions, knocked, mode)


def _beam(key: str, version: int, text: str, width: int, knocked: tuple, mode: str) -> BeamResult:
    tokenizer = registry.bundle_for(key).tokenizer
    with model_for(key, version, knocked, mode) as model:
        return beam_search(model, tokenizer, text, beam=width)


def beam(key: str, version: int, text: str, width: int, knocked: tuple = (), mode: str = "zero") -> BeamResult:
    return memo("beam", _beam, key, version, text, width, knocked, mode)


def _logits(key: str, version: int, text: str, output_ids: tuple, knocked: tuple, mode: str) -> torch.Tensor:
    tokenizer = registry.bundle_for(key).tokenizer
    with model_for(key, version, knocked, mode) as model:
        return output_logits(model, tokenizer, text, list(output_ids))


def logits(key: str, version: int, text: str, output_ids: tuple, knocked: tuple = (), mode: str = "zero"
           ) -> torch.Tensor:
    """The raw logits at every step of a decode that wrote `output_ids` (sampling.output_logits)."""
    return memo("logits", _logits, key, version, text, output_ids, knocked, mode)


def _maps(key: str, version: int, text: str, knocked: tuple, mode: str) -> dict[str, AttentionMap]:
    result = greedy(key, version, text, knocked=knocked, mode=mode)
    return attention_maps(result, registry.bundle_for(key).task, text)


def maps(key: str, version: int, text: str, knocked: tuple = (), mode: str = "zero") -> dict[str, AttentionMap]:
    """Every kind of attention of the greedy decode of `text` (heads `knocked` out as in greedy()), with
    labels and the task's alignment."""
    return memo("maps", _maps, key, version, text, knocked, mode)


def _importance(key: str, version: int, samples: int, mode: str) -> dict:
    bundle = registry.bundle_for(key)
    means = memo("head_means", _head_means, key, version) if mode == "mean" else None
    pairs = bundle.task.pairs(samples, IMPORTANCE_SEED, "heldout")
    return ablation.importance(copy.deepcopy(bundle.model), bundle.tokenizer, pairs, mode, means)


def importance(key: str, version: int, samples: int, mode: str) -> dict:
    """ablation.importance of the model on `samples` held-out inputs: each head's exact-match drop and the
    removal curve (a private copy of the model carries the hooks)."""
    return memo("importance", _importance, key, version, samples, mode)


def _errors(key: str, version: int, samples: int, seed: int) -> ErrorAnalysis:
    bundle = registry.bundle_for(key)
    return analyse_errors(bundle.model, bundle.tokenizer, bundle.task, samples, seed)


def errors(key: str, version: int, samples: int, seed: int) -> ErrorAnalysis:
    """Where the model fails on `samples` held-out inputs drawn with `seed` (the "Where it fails" page)."""
    return memo("errors", _errors, key, version, samples, seed)


@dataclass(frozen=True)
class Source:
    """What a page decodes: the model (registry key and the version of its file), the input text, and the heads
    knocked out (ablation.Head, sorted) with how (`mode`: "zero" or "mean"). Hashable: it names its results in the
    cache, and its methods are the cached decodes of it."""

    key: str
    version: int
    text: str
    knocked: tuple = ()
    mode: str = "zero"

    def greedy(self, forced: tuple[tuple[int, int], ...] = ()) -> DecodeResult:
        """The traced greedy decode, with `forced` (0-based step, token id) pairs."""
        return greedy(self.key, self.version, self.text, forced, knocked=self.knocked, mode=self.mode)

    def intact(self) -> Source:
        """The same decode with every head in place."""
        return dataclasses.replace(self, knocked=())

    def beam(self, width: int) -> BeamResult:
        return beam(self.key, self.version, self.text, width, self.knocked, self.mode)

    def logits(self, output_ids: tuple) -> torch.Tensor:
        """The raw logits at every step of a decode that wrote `output_ids`."""
        return logits(self.key, self.version, self.text, output_ids, self.knocked, self.mode)

    def model(self):
        """A context manager: the model to run (with the heads knocked out, a private copy)."""
        return model_for(self.key, self.version, self.knocked, self.mode)


def figure(name: tuple, build):
    """The plotly figure `build()` makes, built once per language and kept in the same byte-bounded cache. `name`
    is a hashable tuple that determines the figure: the decode's (model key, version, input) and the chart's own
    arguments. Shared read-only: a chart serialises it and pages never change a figure."""
    return memo("figure", lambda *_: build(), language(), *name)


def clear() -> None:
    """Empty the cache (tests: it outlives an AppTest, like Streamlit's own caches)."""
    with _lock:
        _cache.clear()


def readable_link_input(view: View, key: str, bundle: ModelBundle) -> None:
    """An input from a link that model `key` cannot decode gives way to the default input, with a note."""
    if not view.from_link("input"):
        return
    try:
        greedy(key, registry.version(key), current_input(view, bundle.examples()))
    except (TokenizerError, DecodeError) as exc:
        view.refuse("input", t("attention.cannot_decode_link", name=bundle.name, error=exc))
