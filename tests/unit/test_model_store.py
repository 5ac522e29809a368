"""The model store: kept models survive a new store object (a server restart), ids are unguessable and
checked, the byte budget evicts the least recently used first, and the age limit drops stale models."""

from __future__ import annotations

import os
import time

import pytest
import torch

from transformer.store.model_store import ID_PATTERN, ModelStore, StoreError


def test_a_kept_model_comes_back_from_a_new_store_with_the_same_weights(tmp_path, bundle):
    model_id = ModelStore(tmp_path).put(bundle)
    assert ID_PATTERN.fullmatch(model_id)
    again = ModelStore(tmp_path).get(model_id)  # as after a restart: nothing in memory
    for name, tensor in bundle.model.state_dict().items():
        torch.testing.assert_close(again.model.state_dict()[name], tensor, rtol=0, atol=0)
    assert again.task.name == bundle.task.name and ModelStore(tmp_path).has(model_id)


@pytest.mark.parametrize("bad", ["", "../../etc/passwd", "a" * 21, "a" * 23, "x/" + "a" * 20, None, 7])
def test_malformed_or_unknown_ids_are_refused_without_touching_files(tmp_path, bad):
    store = ModelStore(tmp_path)
    with pytest.raises(StoreError, match="not the id"):
        store.get(bad)
    assert not store.has(bad)
    with pytest.raises(StoreError, match="no longer kept"):
        store.get("A" * 22)


def test_the_byte_budget_evicts_the_least_recently_used_first(tmp_path, bundle):
    first = ModelStore(tmp_path).put(bundle)
    size = (tmp_path / f"{first}.safetensors").stat().st_size
    store = ModelStore(tmp_path, max_bytes=int(size * 2.5))
    second = store.put(bundle)
    old = time.time() - 100
    os.utime(tmp_path / f"{second}.safetensors", (old, old))
    os.utime(tmp_path / f"{first}.safetensors", (old + 50, old + 50))  # first used more recently
    third = store.put(bundle)  # three do not fit: the least recently used (second) goes
    assert store.has(first) and store.has(third) and not store.has(second)
    assert sum(m.size for m in store.entries()) <= store.max_bytes


def test_models_unused_past_the_age_limit_are_dropped_and_say_so(tmp_path, bundle):
    store = ModelStore(tmp_path, max_age_s=60)
    model_id = store.put(bundle)
    assert 59 < store.expires_in(model_id) <= 60
    assert store.evict(now=time.time() + 61) == [model_id]
    assert store.expires_in(model_id) is None
    with pytest.raises(StoreError, match="no longer kept"):
        store.get(model_id)


def test_limits_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AP_MODEL_STORE", str(tmp_path / "kept"))
    monkeypatch.setenv("AP_MODEL_STORE_MB", "3")
    monkeypatch.setenv("AP_MODEL_STORE_DAYS", "0.5")
    store = ModelStore.configured(tmp_path / "default")
    assert store.folder == tmp_path / "kept" and store.max_bytes == 3 * 2**20 and store.max_age_s == 43200
    with pytest.raises(ValueError):
        ModelStore(tmp_path, max_bytes=0)
