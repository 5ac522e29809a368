"""The model store: kept models survive a new store object (a server restart), ids are unguessable and
checked, the byte budget evicts the least recently used first, and the age limit drops stale models; fair shares:
no owner evicts another's recent models, an owner over its share is refused, Remove deletes what no link opened,
and orphans of killed writes are removed at start-up and counted in the budget."""

from __future__ import annotations

import os
import time

import pytest
import torch

from transformer.store.model_store import ID_PATTERN, ModelStore, ShareError, StoreError


def test_a_kept_model_comes_back_from_a_new_store_with_the_same_weights(tmp_path, bundle):
    model_id = ModelStore(tmp_path).put(bundle, "a")
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
    first = ModelStore(tmp_path).put(bundle, "a")
    size = (tmp_path / f"{first}.safetensors").stat().st_size
    store = ModelStore(tmp_path, max_bytes=int(size * 2.5))
    second = store.put(bundle, "a")
    old = time.time() - 100
    os.utime(tmp_path / f"{second}.safetensors", (old, old))
    os.utime(tmp_path / f"{first}.safetensors", (old + 50, old + 50))  # first used more recently
    third = store.put(bundle, "a")  # three do not fit: the least recently used (second) goes
    assert store.has(first) and store.has(third) and not store.has(second)
    assert sum(m.size for m in store.entries()) <= store.max_bytes


def test_models_unused_past_the_age_limit_are_dropped_and_say_so(tmp_path, bundle):
    store = ModelStore(tmp_path, max_age_s=60)
    model_id = store.put(bundle, "a")
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


# -- fair shares -------------------------------------------------------------------------------------------
@pytest.fixture
def tiny():
    from helpers.hostile import tiny_bundle

    return tiny_bundle()


def sized(tmp_path, tiny) -> int:
    """The bytes one tiny model takes in a store."""
    probe = ModelStore(tmp_path / "probe")
    return probe.entries()[0].size if probe.put(tiny, "x") else 0


def test_one_session_cannot_evict_another_sessions_recent_models(tmp_path, tiny):
    size = sized(tmp_path, tiny)
    store = ModelStore(tmp_path / "s", max_bytes=int(size * 3.5), session_bytes=int(size * 2.5), grace_s=600)
    victim = store.put(tiny, "victim")
    for _ in range(30):  # the loop: keep, remove, keep again (and keeping without removing)
        store.discard(store.put(tiny, "bully"), "bully")
        store.put(tiny, "bully")
    assert store.has(victim) and store.get(victim)
    assert store.share("bully").used <= store.session_bytes
    listed = [m.id for m in store.entries() if m.owner == "bully"]
    with pytest.raises(ShareError, match="your share of the server's model storage is full"):
        store.put(tiny, "bully", protect=listed)  # its own models it still lists may not go
    assert [m.id for m in store.entries() if m.owner == "bully"] == listed  # and nothing changed
    with pytest.raises(ShareError, match="server's model storage is full .* used in the last 10 minutes"):
        store.put(tiny, "third")  # the store is full of recent models of others: refused, nothing evicted
    assert store.has(victim) and len(store.entries()) == 3


def test_past_the_grace_time_the_least_recently_used_goes_and_those_over_their_share_first(tmp_path, tiny):
    size = sized(tmp_path, tiny)
    store = ModelStore(tmp_path / "s", max_bytes=int(size * 3.5), session_bytes=int(size * 2.5), grace_s=60)
    victim, first, second = store.put(tiny, "victim"), store.put(tiny, "bully"), store.put(tiny, "bully")
    old = time.time() - 120
    for age, model_id in enumerate((victim, first, second)):
        os.utime(store._path(model_id), (old + age, old + age))
    assert store.put(tiny, "new")
    assert not store.has(victim)  # all past the grace time, none over its share: the least recently used went
    smaller = ModelStore(tmp_path / "s", max_bytes=int(size * 3.5), session_bytes=int(size * 1.5), grace_s=60)
    for model_id in (first, second):  # the share shrank (a restart with other settings): the bully is over it
        os.utime(store._path(model_id), (old + 10, old + 10))
    newer = [m.id for m in smaller.entries() if m.owner == "new"]
    os.utime(smaller._path(newer[0]), (old, old))  # the oldest of all, but within its owner's share
    smaller.put(tiny, "later")
    assert smaller.has(newer[0]) and not (smaller.has(first) and smaller.has(second))


def test_remove_deletes_a_model_no_other_session_opened_and_keeps_one_a_link_opened(tmp_path, tiny):
    store = ModelStore(tmp_path)
    alone, linked = store.put(tiny, "me"), store.put(tiny, "me")
    store.get(linked, user="me")  # my own use shares nothing
    assert store.discard(alone, "me") and not store.has(alone)
    store.get(linked, user="classmate")  # a classmate opened my link
    assert not store.discard(linked, "classmate")  # not theirs to remove
    assert not store.discard(linked, "me") and store.has(linked)  # kept for the classmate's link
    share = ModelStore(tmp_path).share("me", listed=[])  # a restart keeps the owner and the link's mark
    assert share.models == 1 and share.held == 1 and share.used == store.entries()[0].size


def test_a_client_share_covers_all_its_sessions_and_localhost_has_none(tmp_path, tiny):
    size = sized(tmp_path, tiny)
    store = ModelStore(tmp_path / "s", client_bytes=int(size * 2.5), grace_s=600)
    store.put(tiny, "tab1", "laptop")
    store.put(tiny, "tab2", "laptop")
    with pytest.raises(ShareError, match="models kept from your computer"):
        store.put(tiny, "tab3", "laptop")
    assert store.put(tiny, "tab3", "other-laptop") and store.put(tiny, "tab3", None)  # no address: no client share
    assert store.client_share("laptop").used == 2 * size and store.client_share(None) is None
    for m in store.entries():
        os.utime(m.path, (time.time() - 900,) * 2)
    assert store.put(tiny, "tab3", "laptop")  # past the grace time its own sessions' oldest makes room
    assert store.client_share("laptop").models == 2


def test_a_model_larger_than_a_share_is_refused_before_anything_is_written(tmp_path, tiny):
    store = ModelStore(tmp_path, session_bytes=1000)
    with pytest.raises(ShareError, match="more than one session's share"):
        store.put(tiny, "me")
    assert not list(tmp_path.iterdir()) or [p.name for p in tmp_path.iterdir()] == [".lock"]


def test_orphans_of_killed_writes_go_at_start_up_and_writes_under_way_count_in_the_budget(tmp_path, tiny):
    import fcntl

    size = sized(tmp_path, tiny)
    folder = tmp_path / "s"
    folder.mkdir()
    killed = [folder / f".{'K' * 22}.safetensors.abcdefgh.tmp", folder / f".{'R' * 22}.json.12345678.tmp"]
    for path in killed:
        path.write_bytes(b"x" * size)
    (folder / f"{'O' * 22}.json").write_text('{"owner": "gone"}')  # a record whose model is gone
    busy = folder / f".{'B' * 22}.safetensors.busybusy.tmp"
    busy.write_bytes(b"x" * (2 * size))
    others = [folder / "notes.tmp", folder / "README"]
    for path in others:
        path.write_text("not ours")
    with open(busy, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # a write still under way in another process
        store = ModelStore(folder, max_bytes=int(size * 3.5), grace_s=600)
        assert sorted(p.name for p in store.orphans_removed) == sorted([p.name for p in killed] + [f"{'O' * 22}.json"])
        assert busy.exists() and all(p.exists() for p in others) and store.temp_bytes() == 2 * size
        store.put(tiny, "me")
        with pytest.raises(ShareError, match="server's model storage is full"):
            store.put(tiny, "someone else")  # 2 sizes under way + 1 kept + 1 more > 3.5
