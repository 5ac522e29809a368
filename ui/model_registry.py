"""The models a session can use: shipped checkpoints (cached, shared read-only by every session) and
models trained or uploaded in this session. One of them is active; every page uses the active one.

A trained or uploaded model is also kept in the server's model store (`transformer.store.model_store`) under an
unguessable id, which is its key (`trained:<id>`): a reload, a link or a restarted server finds it there for
as long as the store keeps it. The store keeps it for this session (`owner`: a random token of the session) and its
browser's address (`client`, where the server sees one: not on localhost), each with a fair share of the store."""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from transformer.bundle import ModelBundle, ModelFacts
from transformer.i18n import Texts, sentences, t
from transformer.store.headers import CheckpointInfo, list_checkpoints
from transformer.store.model_store import ModelStore, StoreError, megabytes

from . import state

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets" / "checkpoints"
POSITIONS = ASSETS / "positions"  # models differing only in their position scheme (errors page), not in the list
STORE = ModelStore.configured(ROOT / ".model_store")  # AP_MODEL_STORE, AP_MODEL_STORE_MB, AP_STORE_*, ...
ORIGINS = ("trained", "uploaded", "snapshot")  # session models; a snapshot: a run's weights at a step, kept
DEFAULT_MODEL = "shipped:reverse"
ACTIVE = "active_model"  # session_state key of the sidebar's model picker
SESSION_MODELS = "session_models"  # session_state: key -> (origin, ModelBundle)
OWNER = "session_owner"  # session_state: this session's owner token (model store, run queue)
OPENED = "opened_positions"  # session_state: the position-scheme models this session opened (`positions:<scheme>`)
ORIGINS_SAID = Texts({"shipped": "app.origin_name.shipped", "trained": "app.origin_name.trained",
                      "uploaded": "app.origin_name.uploaded", "snapshot": "app.origin_name.snapshot"})  # in words
LABELS = {"shipped": "app.origin.shipped", "trained": "app.origin.trained", "uploaded": "app.origin.uploaded",
          "snapshot": "app.origin.snapshot"}  # a model's name in the picker, by origin: "{name} (pretrained)"
# Shipped models whose file's name says too little, named in the reader's language (their cards' names are English)
SHIPPED_NAMES = Texts({"reverse-early": "app.shipped_name.reverse_early"})


@dataclass(frozen=True)
class ModelEntry:
    key: str
    label: str
    origin: str  # "shipped", "trained", "uploaded" or "snapshot"
    path: Path | None = None


_loaded: set[tuple] = set()  # the files _load_shipped has read in this process


@st.cache_resource(show_spinner=False, max_entries=16)
def _load_shipped(path: str, mtime_ns: int, size: int) -> ModelBundle:
    """Shared by all sessions and never mutated; the file's mtime and size key the cache."""
    from transformer.store.checkpoints import load_bundle  # function-local: torch; the first page draws without it

    bundle = load_bundle(path)
    _loaded.add((path, mtime_ns, size))
    return bundle


def _session_models() -> dict[str, tuple[str, ModelBundle]]:
    return st.session_state.setdefault(SESSION_MODELS, {})


@st.cache_data(show_spinner=False, max_entries=4)
def _shipped_infos(signature: tuple) -> list[CheckpointInfo]:
    """Reads every checkpoint header once per state of the folder (`signature`), not on every rerun."""
    return list_checkpoints(ASSETS)


def shipped_infos() -> list[CheckpointInfo]:
    """The header of every checkpoint in assets/checkpoints, broken files included (with their error)."""
    stats = [(path.name, path.stat()) for path in sorted(ASSETS.glob("*.safetensors"))]
    return _shipped_infos(tuple((name, stat.st_mtime_ns, stat.st_size) for name, stat in stats))


def shipped_key(path: Path) -> str:
    """The entry key of a shipped checkpoint file."""
    return f"shipped:{path.stem}"


def shipped_path(key: str) -> Path:
    """The checkpoint file of a shipped model's entry key (`shipped:<name>`)."""
    return ASSETS / f"{key.removeprefix('shipped:')}.safetensors"


def shipped_name(stem: str) -> str:
    """What every page calls the shipped model of file `stem`: its name in SHIPPED_NAMES, else the file's."""
    return SHIPPED_NAMES[stem] if stem in SHIPPED_NAMES else stem


def display_name(key: str) -> str:
    """What every page calls model `key` (the picker, the tables, the compare page): a shipped model its
    `shipped_name`, a position-scheme model `positions/<scheme>`, any other its own name."""
    origin, _, name = key.partition(":")
    if origin == "shipped":
        return shipped_name(name)
    if origin == "positions":
        return f"positions/{name}"
    return bundle_for(key).name


def file_name(entry: ModelEntry) -> str:
    """The name `entry`'s model downloads under (the checkpoints page, the runs table): its shipped file's, else its
    own name with every run of characters other than letters, digits, "_", "." and "-" as one "-"."""
    if entry.path is not None:
        return entry.path.name
    stem = re.sub(r"[^\w.-]+", "-", bundle_for(entry.key).name).strip("-")
    return f"{stem or 'model'}.safetensors"


def shipped_entries() -> list[ModelEntry]:
    return [ModelEntry(shipped_key(i.path), t(LABELS["shipped"], name=shipped_name(i.path.stem)), "shipped", i.path)
            for i in shipped_infos() if i.error is None]


def entries() -> dict[str, ModelEntry]:
    """Every model this session can pick, shipped first, keyed by entry key."""
    found = {e.key: e for e in shipped_entries()}
    models = position_models()
    for scheme in st.session_state.get(OPENED, ()):
        if scheme in models:
            key = f"positions:{scheme}"
            found[key] = ModelEntry(key, t(LABELS["shipped"], name=display_name(key)), "shipped", models[scheme])
    for key, (origin, bundle) in _session_models().items():
        found[key] = ModelEntry(key, t(LABELS[origin], name=bundle.name), origin)
    return found


def version(key: str) -> int:
    """Changes when a shipped checkpoint file is replaced: every page cache keyed by (key, version) then
    computes afresh instead of serving results of the old weights (session models get a new key instead). A shipped
    model's is read from its file, without the session's list (the warm-up has no session)."""
    if key.startswith("shipped:"):
        path = shipped_path(key)
        return file_version(path) if path.is_file() else 0
    entry = entries().get(key)
    return file_version(entry.path) if entry is not None and entry.path is not None else 0


def file_version(path: Path) -> int:
    """The version of a shipped checkpoint's entry (see `version`): its file's modification time."""
    return path.stat().st_mtime_ns


def load_file(path: Path) -> ModelBundle:
    """A checkpoint shipped under assets/checkpoints, loaded once and shared read-only like the listed ones."""
    stat = path.stat()
    file = (str(path), stat.st_mtime_ns, stat.st_size)
    if file in _loaded:
        return _load_shipped(*file)
    with st.spinner(t("app.loading_model")):  # a spinner in the reader's language, for a first load only
        return _load_shipped(*file)


def position_models() -> dict[str, Path]:
    """The shipped models that differ only in their position scheme (assets/build_position_zoo.py): scheme ->
    file, sorted by name; empty when they were not built."""
    return {path.stem: path for path in sorted(POSITIONS.glob("*.safetensors"))}


def bundle_for(key: str) -> ModelBundle:
    """The bundle behind an entry key (KeyError if it is gone)."""
    if key.startswith("shipped:"):
        return load_file(shipped_path(key))
    if key.startswith("positions:"):
        return load_file(position_models()[key.removeprefix("positions:")])
    return _session_models()[key][1]


def open_position_model(scheme: str) -> None:
    """Put a position-scheme model in this session's list (out of it until opened) and make it active. Call from
    a widget callback."""
    adopt_kept(f"positions:{scheme}")
    set_active(f"positions:{scheme}")


def adopt_kept(key: str) -> str | None:
    """Make a kept model (`trained:<id>` from a link or a reload), or a position-scheme model
    (`positions:<scheme>`), one of this session's models. Returns
    None when it is now available, else why not."""
    origin, _, model_id = key.partition(":")
    if key in _session_models():
        return None
    if origin == "positions" and model_id in position_models():  # a position-scheme model (link or reload)
        opened = st.session_state.setdefault(OPENED, [])
        opened.extend([model_id] if model_id not in opened else [])
        return None
    if origin not in ORIGINS:
        return t("app.link.not_here")
    try:
        bundle = STORE.get(model_id, user=owner())
    except StoreError as exc:
        return str(exc)
    _session_models()[key] = (origin, bundle)
    return None


def owner() -> str:
    """Who this session is to the model store and the run queue: a random token made once per session (kept in
    its session state, so it lives exactly as long as the session)."""
    return st.session_state.setdefault(OWNER, secrets.token_hex(12))


def client() -> str | None:
    """A digest of this session's browser address, or None where the server cannot tell one (localhost)."""
    address = st.context.ip_address
    if not isinstance(address, str):
        return None
    return hashlib.blake2b(address.encode("utf-8"), digest_size=12).hexdigest()  # no address is written to disk


def _listed_ids() -> set[str]:
    return {key.partition(":")[2] for key in _session_models()}


def share_text() -> str:
    """What is left of this session's (and its computer's) share of the server's model storage, in sentences."""
    share = STORE.share(owner(), _listed_ids())
    said = [t("app.share.own", used=megabytes(share.used), limit=megabytes(share.limit), n=share.models,
              left=megabytes(share.left))]
    if share.held:
        said.append(t("app.share.held", n=share.held))
    if (theirs := STORE.client_share(client())) is not None:
        said.append(t("app.share.client", used=megabytes(theirs.used), limit=megabytes(theirs.limit)))
    return sentences(said)


def kept_for(key: str) -> float | None:
    """Seconds a trained or uploaded model stays kept if it is not used again (None: not kept)."""
    origin, _, model_id = key.partition(":")
    return STORE.expires_in(model_id) if origin in ORIGINS else None


def add_session_model(bundle: ModelBundle, origin: str, activate: bool = True) -> str:
    """Keep a trained or uploaded model for this session and in the server's store; returns its entry key.
    ShareError (a StoreError) when this session's or its computer's share, or the store, has no room for it: then
    nothing changes. A store that cannot write (a full or read-only disk) still leaves the model to this session."""
    try:
        key = f"{origin}:{STORE.put(bundle, owner(), client(), protect=_listed_ids())}"
    except OSError:
        key = f"{origin}:{uuid.uuid4().hex[:8]}"
    _session_models()[key] = (origin, bundle)
    if activate:
        set_active(key)
    return key


def remove_session_model(key: str) -> None:
    """Take a model off this session's list; the store deletes its file unless another session has opened it."""
    _session_models().pop(key, None)
    origin, _, model_id = key.partition(":")
    if origin in ORIGINS:
        STORE.discard(model_id, owner())
    if st.session_state.get(ACTIVE) == key:
        set_active(default_key())


def default_key() -> str | None:
    keys = list(entries())
    return DEFAULT_MODEL if DEFAULT_MODEL in keys else (keys[0] if keys else None)


def set_active(key: str | None) -> None:
    """Make `key` the active model (what depends on the model, such as the decode page's input, starts
    afresh). Call from a widget callback, before the sidebar picker renders."""
    if st.session_state.get(ACTIVE) != key:
        state.changed("model", ACTIVE)
    st.session_state[ACTIVE] = key


def facts(key: str) -> ModelFacts:
    """What describes model `key` (its card, task and shape): a shipped file's from its header, with no weights
    loaded (a fresh server's first page needs no torch: ui/glance.py), any other model's from its bundle."""
    if key.startswith("shipped:"):
        path = shipped_path(key)
        header = next((info for info in shipped_infos() if info.error is None and info.path == path), None)
        if header is not None:
            return header.facts()
    return bundle_for(key).facts()


def active_key() -> str | None:
    key = st.session_state.get(ACTIVE)
    return key if key in entries() else default_key()
