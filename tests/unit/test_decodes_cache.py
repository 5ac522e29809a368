"""The app's decode cache is bounded in bytes: a result is counted by the arrays it holds, and the least
recently used results leave once the total passes the budget."""

from __future__ import annotations

import numpy as np
import torch
from helpers.repo import needs_reverse

from transformer.network.decoding import greedy_decode
from ui import decodes


def test_nbytes_counts_the_arrays_a_result_holds(bundle):
    result = greedy_decode(bundle.model, bundle.tokenizer, "hello")
    arrays = sum(t.nelement() * 4 for s in result.steps for t in (s.self_attention, s.cross_attention, s.log_probs))
    arrays += result.encoder_self.nelement() * 4
    assert arrays <= decodes.nbytes(result) <= arrays + 256 * 40 * (len(result.steps) + 4)
    assert decodes.nbytes({"a": np.zeros(1000, np.float32), "b": [torch.zeros(10)]}) == 4000 + 40 + 256 * 2


@needs_reverse
def test_the_cache_stays_within_its_byte_budget_and_evicts_the_oldest(monkeypatch, bundle):
    import cachetools

    size = decodes.nbytes(greedy_decode(bundle.model, bundle.tokenizer, "abcdefgh"))
    small = cachetools.LRUCache(maxsize=int(size * 2.5), getsizeof=decodes.nbytes)
    monkeypatch.setattr(decodes, "_cache", small)
    monkeypatch.setattr(decodes.registry, "bundle_for", lambda key: bundle)
    for text in ("abcdefgh", "bcdefgha", "cdefghab"):
        decodes.greedy("shipped:reverse", 0, text)
    assert small.currsize <= small.maxsize
    assert len(small) == 2 and ("greedy", "shipped:reverse", 0, "abcdefgh", (), True) not in small
    huge = cachetools.LRUCache(maxsize=size // 2, getsizeof=decodes.nbytes)
    monkeypatch.setattr(decodes, "_cache", huge)
    assert decodes.greedy("shipped:reverse", 0, "abcdefgh").output_text == "hgfedcba"  # handed back, not kept
    assert len(huge) == 0


def test_a_figure_is_built_once_counted_in_bytes_and_evicted_like_a_decode(monkeypatch):
    import cachetools

    from transformer import charts

    labels = [f"t{i}" for i in range(12)]
    built = []

    def build(seed: int):
        built.append(seed)
        return charts.attention_heatmap(np.random.default_rng(seed).random((12, 12)), labels, labels, "t")

    one = build(0)
    assert decodes.nbytes(one) >= len(one.to_json())  # at least its JSON: the weights, labels and hover text
    small = cachetools.LRUCache(maxsize=int(decodes.nbytes(one) * 2.5), getsizeof=decodes.nbytes)
    monkeypatch.setattr(decodes, "_cache", small)
    built.clear()
    first = decodes.figure(("model", 0, "abc", "head", "cross", 0, 1, None), lambda: build(1))
    assert decodes.figure(("model", 0, "abc", "head", "cross", 0, 1, None), lambda: build(1)) is first
    assert built == [1]  # the second call was a hit
    for seed in (2, 3):
        decodes.figure(("model", 0, "abc", "head", "cross", 0, seed, None), lambda s=seed: build(s))
    assert small.currsize <= small.maxsize and len(small) == 2
    assert ("figure", "model", 0, "abc", "head", "cross", 0, 1, None) not in small  # the oldest left first
