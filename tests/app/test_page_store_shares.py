"""Fair shares of the model store, as students meet them on the Checkpoints page (AppTest): the page says what is
left of one's share; an upload past it is refused with a message and changes nothing; uploading and removing in a
loop never evicts another session's model; Remove deletes a model no other session opened and keeps one a
classmate's link opened, and the link keeps working."""

from __future__ import annotations

import itertools

import pytest
from helpers.repo import REVERSE, ROOT, needs_reverse, open_link, reverse_variant
from streamlit.testing.v1 import AppTest

from transformer.store.checkpoints import bundle_to_bytes
from transformer.store.model_store import ModelStore
from ui import model_registry as registry
from ui import uploads
from ui.markdown import plain

PAGE = "pages/models/checkpoints.py"
pytestmark = needs_reverse


@pytest.fixture
def sessions(monkeypatch, tmp_path, clean_caches):
    """`open(name)`: the Checkpoints page of a session of its own (AppTest gives every session one id: the owner
    is set by name here), on a store whose share holds two uploads of the shipped model and whole holds four."""
    size = len(REVERSE.read_bytes())
    store = ModelStore(tmp_path, max_bytes=int(size * 4.5), session_bytes=int(size * 2.5), grace_s=600)
    monkeypatch.setattr(registry, "STORE", store)
    current = {"owner": ""}
    monkeypatch.setattr(registry, "owner", lambda: current["owner"])

    def as_owner(name: str, at: AppTest) -> AppTest:
        current["owner"] = name
        return at

    def open_page(name: str) -> AppTest:
        at = as_owner(name, AppTest.from_file(str(ROOT / "app.py"), default_timeout=60))
        at.switch_page(PAGE)
        return at.run()

    return store, as_owner, open_page


NUDGES = itertools.count(1)  # each upload a model of its own: the shipped one uploaded back is not added


def upload(at: AppTest, name: str) -> AppTest:
    data = bundle_to_bytes(reverse_variant(1e-3 * next(NUDGES)))
    at.file_uploader(key=uploads.FILE).upload(name, data).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def uploaded(at: AppTest) -> list[str]:
    return [key for key in at.session_state[registry.SESSION_MODELS] if key.startswith("uploaded:")] \
        if registry.SESSION_MODELS in at.session_state else []


def share_line(at: AppTest) -> str:
    return next(plain(c.value) for c in at.caption if "share of this server's model storage" in c.value)


def test_a_session_past_its_share_is_refused_and_cannot_evict_another(sessions):
    store, as_owner, open_page = sessions
    victim = upload(open_page("victim"), "mine.safetensors")
    kept = uploaded(victim)[0].partition(":")[2]
    assert "used by 1 model," in share_line(victim)

    bully = open_page("bully")
    for i in range(2):
        upload(as_owner("bully", bully), f"b{i}.safetensors")
    before = uploaded(bully)
    active = bully.session_state[registry.ACTIVE]
    upload(as_owner("bully", bully), "b2.safetensors")
    assert "your share of the server's model storage is full" in plain(bully.error[0].value)
    assert uploaded(bully) == before and bully.session_state[registry.ACTIVE] == active  # nothing changed
    assert "left." in share_line(bully) and "used by 2 models" in share_line(bully)

    for i in range(6):  # the loop: upload, Remove, upload again
        upload(as_owner("bully", bully), f"again{i}.safetensors")
        if uploaded(bully) != before:
            remove(as_owner("bully", bully), uploaded(bully)[-1])
        else:
            remove(as_owner("bully", bully), before.pop())
    assert store.has(kept) and len(store.entries()) <= 3
    assert store.share("bully").used <= store.session_bytes


def remove(at: AppTest, key: str) -> None:
    at.selectbox(key=next(s.key for s in at.selectbox if s.key and "inspect" in s.key)).set_value(key).run()
    at.button(key="ckpt_remove").click().run()
    assert not at.exception and key not in uploaded(at)


def test_remove_deletes_an_unshared_model_and_keeps_one_a_link_opened(sessions):
    store, as_owner, open_page = sessions
    me = upload(open_page("me"), "alone.safetensors")
    upload(as_owner("me", me), "linked.safetensors")
    alone, linked = uploaded(me)
    as_owner("classmate", None)
    link = open_link("pages/explore/decode.py", {"model": linked})  # a classmate opens my shared link
    assert linked in link.session_state[registry.SESSION_MODELS] and not link.exception
    remove(as_owner("me", me), alone)
    assert not store.has(alone.partition(":")[2])  # no other session had opened it: its file is gone
    remove(as_owner("me", me), linked)
    assert store.has(linked.partition(":")[2])  # the classmate's link opened it: it stays for them
    assert "1 of them you removed, but another session opened through a link" in share_line(me)
    again = open_link("pages/explore/decode.py", {"model": linked})
    assert linked in again.session_state[registry.SESSION_MODELS]
