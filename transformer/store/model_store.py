"""A folder that keeps trained and uploaded models across server restarts, bounded in size and age.

Each model is one checkpoint file named by an unguessable id (`secrets.token_urlsafe`): knowing the id is
the permission to use it, so a session keeps the ids it created and a link carries one. Saving writes
atomically (through `save_bundle`); loading touches the file, so eviction drops the least recently used
first once the folder is over its byte budget, and anything not used for `max_age_s` seconds.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from transformer import settings
from transformer.bundle import ModelBundle
from transformer.i18n import t
from .checkpoints import CheckpointError, load_bundle, save_bundle

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{22}")  # token_urlsafe(16)
SUFFIX = ".safetensors"


class StoreError(ValueError):
    """A model the store does not have (never kept, evicted, or a malformed id); the message says which."""


@dataclass(frozen=True)
class StoredModel:
    id: str
    path: Path
    size: int
    last_used: float  # seconds since the epoch


class ModelStore:
    """Models kept on disk in `folder`, at most `max_bytes` in all and none older than `max_age_s` (defaults: the
    settings AP_MODEL_STORE_MB and AP_MODEL_STORE_DAYS)."""

    def __init__(self, folder: str | os.PathLike, max_bytes: int | None = None, max_age_s: float | None = None):
        max_bytes = int(settings.get("AP_MODEL_STORE_MB") * 2**20) if max_bytes is None else max_bytes
        max_age_s = settings.get("AP_MODEL_STORE_DAYS") * 86400 if max_age_s is None else max_age_s
        if max_bytes <= 0 or max_age_s <= 0:
            raise ValueError("the model store needs a positive size and age limit")
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s

    @classmethod
    def configured(cls, default_folder: str | os.PathLike) -> ModelStore:
        """The store in the folder AP_MODEL_STORE names, else `default_folder`."""
        return cls(settings.get("AP_MODEL_STORE") or default_folder)

    def _path(self, model_id: str) -> Path:
        if not isinstance(model_id, str) or not ID_PATTERN.fullmatch(model_id):
            raise StoreError(t("messages.not_an_id"))
        return self.folder / f"{model_id}{SUFFIX}"

    def put(self, bundle: ModelBundle) -> str:
        """Keep `bundle`; returns its new id. Older models may be evicted to stay within the budget."""
        self.folder.mkdir(parents=True, exist_ok=True)
        model_id = secrets.token_urlsafe(16)
        save_bundle(bundle, self._path(model_id))
        self.evict(keep=model_id)
        return model_id

    def get(self, model_id: str) -> ModelBundle:
        """The kept model `model_id` (its last use is now); StoreError when the store does not have it."""
        path = self._path(model_id)
        try:
            os.utime(path)
            return load_bundle(path)
        except FileNotFoundError:
            raise StoreError(t("messages.not_kept")) from None
        except CheckpointError as exc:
            raise StoreError(t("messages.unreadable", error=exc)) from None

    def has(self, model_id: str) -> bool:
        try:
            return self._path(model_id).is_file()
        except StoreError:
            return False

    def entries(self) -> list[StoredModel]:
        """Every kept model, least recently used first."""
        found = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            try:
                stat = path.stat()
            except FileNotFoundError:  # evicted by another process meanwhile
                continue
            if ID_PATTERN.fullmatch(path.stem):
                found.append(StoredModel(path.stem, path, stat.st_size, stat.st_mtime))
        return sorted(found, key=lambda m: m.last_used)

    def evict(self, keep: str | None = None, now: float | None = None) -> list[str]:
        """Drop models unused for longer than the age limit, then the least recently used until the folder
        fits its byte budget (never `keep`). Returns the ids dropped."""
        now = time.time() if now is None else now
        models = self.entries()
        total = sum(m.size for m in models)
        dropped = []
        for model in models:
            if model.id == keep:
                continue
            if now - model.last_used > self.max_age_s or total > self.max_bytes:
                model.path.unlink(missing_ok=True)
                total -= model.size
                dropped.append(model.id)
        return dropped

    def expires_in(self, model_id: str, now: float | None = None) -> float | None:
        """Seconds until `model_id` ages out if it is not used again (None when it is not kept)."""
        try:
            last = self._path(model_id).stat().st_mtime
        except (FileNotFoundError, StoreError):
            return None
        return max(0.0, last + self.max_age_s - (time.time() if now is None else now))
