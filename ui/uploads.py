"""Uploaded checkpoints: every file is untrusted. A refused file changes nothing (the active model stays);
an accepted one joins this session's models and becomes active if the page's switch says so. A file holding a
model already in the list (the same weights, configuration, tokenizer and task, whatever its name) is named as that
model and not added again. Each upload is handled once.

Outcome messages are plain text that names the file and may quote it (a tensor name, a config key): show them
through `ui.markdown.literal`, never as markdown."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import streamlit as st

from transformer.network.budget import BudgetError, decode_estimate
from transformer.bundle import ModelBundle
from transformer.i18n import t
from transformer.store.checkpoints import load_bundle, load_state_dict_file
from transformer.store.headers import CheckpointError
from transformer.store.model_store import StoreError

from . import model_registry as registry

# server.maxUploadSize in .streamlit/config.toml (a test keeps them equal). Streamlit's server takes it as
# MB of 2**20 bytes, its browser side (1.67, outside Windows) as MB of 10**6 bytes: measured in Chromium, a
# file of 20,000,001 bytes never reaches the server. So the app accepts what every browser sends, exactly
# 20,000,000 bytes, and says so; the server's own cap (20 MiB) stays above it.
UPLOAD_LIMIT_MB = 20
UPLOAD_LIMIT = UPLOAD_LIMIT_MB * 10**6
CHECKPOINT_TYPES = ["safetensors", "pt"]
MAX_UPLOADED_MODELS = 8  # per session: each one is held in this server's memory until the tab closes
OUTCOME = "upload_outcome"  # session_state: the outcome of the last upload handled (not view state)
FILE, METADATA = "ckpt_upload", "ckpt_upload_config"  # the checkpoints page's two file uploaders (widget keys)


@dataclass(frozen=True)
class UploadOutcome:
    upload_id: tuple  # (checkpoint file_id, config file_id or None): what was handled
    ok: bool
    message: str
    key: str | None = None  # the new model's entry key when accepted


def _metadata(config: bytes | None) -> dict | None:
    """The JSON metadata given beside a bare .pt state dict (None if none was given)."""
    if config is None:
        return None
    if len(config) > UPLOAD_LIMIT:
        raise CheckpointError(t("app.upload.config_too_big", n=len(config), limit=limit_text()))
    try:
        data = json.loads(config)
    except (ValueError, RecursionError):
        raise CheckpointError(t("app.upload.config_not_json")) from None
    if not isinstance(data, dict):
        raise CheckpointError(t("app.upload.config_not_object"))
    return data


def load_upload(name: str, data: bytes, config: bytes | None = None) -> ModelBundle:
    """A model from an uploaded file: `.safetensors`, or `.pt` (its metadata inside, or `config` JSON bytes
    beside a bare state dict). Named after the file. Raises CheckpointError saying what is wrong."""
    if len(data) > UPLOAD_LIMIT:
        raise CheckpointError(t("app.upload.too_big", n=len(data), limit=limit_text()))
    suffix = Path(name).suffix.lower()
    if suffix == ".safetensors":
        bundle = load_bundle(data, max_bytes=UPLOAD_LIMIT)
    elif suffix == ".pt":
        bundle = load_state_dict_file(data, _metadata(config), max_bytes=UPLOAD_LIMIT)
    else:
        raise CheckpointError(t("app.upload.kinds"))
    return replace(bundle, card=bundle.card | {"name": Path(name).stem})


def listed_as(bundle: ModelBundle) -> str | None:
    """The key of a model in this session's list that computes exactly what `bundle` does, or None."""
    printed = bundle.fingerprint()
    return next((key for key in registry.entries() if registry.bundle_for(key).fingerprint() == printed), None)


def add_upload(name: str, data: bytes, config: bytes | None = None, upload_id: tuple = (),
               activate: bool = True) -> UploadOutcome:
    """Load an uploaded file and, if it is sound and not already listed, add it to this session's models; make
    it (or the listed model it equals) the active one when `activate`. Call from a widget callback: it may set
    the active model, whose picker renders before the page."""
    try:
        uploaded = sum(entry.origin == "uploaded" for entry in registry.entries().values())
        bundle = load_upload(name, data, config)
        same = listed_as(bundle)
        if same is None and uploaded >= MAX_UPLOADED_MODELS:
            raise CheckpointError(t("app.upload.too_many", n=uploaded))
    except CheckpointError as exc:
        return UploadOutcome(upload_id, False, t("app.upload.refused", name=name, error=exc))
    if same is not None:
        label = registry.entries()[same].label
        if activate:
            registry.set_active(same)
        now = t("app.upload.now_active", model=label) if registry.active_key() == same else t("app.upload.still")
        return UploadOutcome(upload_id, True, t("app.upload.same", name=name, model=label, now=now), same)
    try:
        key = registry.add_session_model(bundle, "uploaded", activate=activate)
    except StoreError as exc:  # this session's share of the server's model storage is full
        why = t("app.upload.cannot_keep", error=exc)
        return UploadOutcome(upload_id, False, t("app.upload.refused", name=name, error=why))
    now = t("app.upload.active") if activate else t("app.upload.listed")
    return UploadOutcome(upload_id, True, t("app.upload.loaded", name=name, model=bundle.name,
                                            task=bundle.task.title.lower(), n=bundle.model.num_parameters(), now=now)
                         + caveats(bundle), key)


def caveats(bundle: ModelBundle) -> str:
    """What an accepted upload's message adds: its card's dropped fields, and a model whose traced decodes
    are over the memory budget even for the shortest input (the decoding pages will refuse them)."""
    text = t("app.upload.cleaned", notes=t("app.list_separator").join(bundle.notes)) if bundle.notes else ""
    shortest = replace(decode_estimate(bundle.config, source_len=1), what=t("app.upload.one_token"))
    try:
        shortest.check()
    except BudgetError as exc:
        text += t("app.upload.over_budget", error=exc)
    return text


def limit_text() -> str:
    """The upload limit in words: "20 MB (20,000,000 bytes)"."""
    return t("app.upload.limit", mb=UPLOAD_LIMIT_MB, n=UPLOAD_LIMIT)


def handle(file, config_file=None, activate: bool = True) -> UploadOutcome | None:
    """The uploader widgets' callback body: handle `file` (an UploadedFile) with the optional JSON
    `config_file` once (made active when `activate`); a rerun, or a config added beside a .safetensors file, does
    not add it again. Returns the new outcome, or None when there was nothing new to do."""
    if file is None:
        return None
    use_config = config_file is not None and file.name.lower().endswith(".pt")
    upload_id = (file.file_id, config_file.file_id if use_config else None)
    previous = st.session_state.get(OUTCOME)
    if previous is not None and previous.upload_id == upload_id:
        return None
    outcome = add_upload(file.name, file.getvalue(), config_file.getvalue() if use_config else None, upload_id,
                         activate)
    st.session_state[OUTCOME] = outcome
    return outcome


def handle_widgets(activate: bool) -> UploadOutcome | None:
    """`handle` what the checkpoints page's two uploaders (keys FILE and METADATA) hold."""
    return handle(st.session_state.get(FILE), st.session_state.get(METADATA), activate)


def shown_outcome(file) -> UploadOutcome | None:
    """The outcome to show while its file is still in the uploader."""
    outcome = st.session_state.get(OUTCOME)
    return outcome if file is not None and outcome is not None and outcome.upload_id[0] == file.file_id else None
