"""A folder that keeps trained and uploaded models across server restarts, bounded in size and age, shared fairly.

Each model is one checkpoint file named by an unguessable id (`secrets.token_urlsafe`): knowing the id is
the permission to use it, so a session keeps the ids it created and a link carries one. Beside it, a small JSON
record (`<id>.json`, written atomically) names who keeps it: an `owner` (the app passes a digest of the session)
and, where the server can tell, a `client` (a digest of the browser's address), and whether another owner has
opened it (through a link). Loading touches the file: its modification time is its last use.

Fair shares, checked before anything is written (`put`):
- an owner keeps at most `session_bytes`, a client at most `client_bytes` (0: no client share). An owner over
  its share makes room from its own models first, least recently used first (never those it names in
  `protect`: the app names the models the session still lists); a client over its share from its own sessions'
  models, another session's only once unused for the grace time;
- the whole folder holds at most `max_bytes`, temp files of writes under way or killed included: room is made
  from whoever is over a share first, then the least recently used, but never from another owner's model used
  in the last `grace_s` seconds;
- where no room can be made, `ShareError` says why and nothing changes.
Anything unused for `max_age_s` seconds goes. Orphans (temp files of killed writes, records without a model) are
removed when the store is opened. `discard` deletes a model its owner removed, unless another owner has opened it
(a classmate's link still works); it then stays, counted in its owner's share, and goes first when they need room.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from transformer import settings
from transformer.bundle import ModelBundle
from transformer.i18n import t
from .atomic import is_temp_name, remove_leftover_temps, write_atomic
from .headers import CheckpointError

try:
    import fcntl
except ImportError:  # not on Windows: the thread lock alone (one server process per store)
    fcntl = None

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{22}")  # token_urlsafe(16)
SUFFIX = ".safetensors"
RECORD = ".json"
LOCK_NAME = ".lock"
MB = 2**20


class StoreError(ValueError):
    """A model the store does not have (never kept, evicted, or a malformed id); the message says which."""


class ShareError(StoreError):
    """A model cannot be kept: its owner's or client's share, or the whole store, is full of models that may not
    go; the message says which, in a sentence that fits after "It was not kept: "."""


@dataclass(frozen=True)
class StoredModel:
    id: str
    path: Path
    size: int
    last_used: float  # seconds since the epoch
    owner: str | None = None  # None: kept before owners were recorded
    client: str | None = None
    shared: bool = False  # another owner has opened it


@dataclass(frozen=True)
class Share:
    """What one owner (or client) keeps: `used` of `limit` bytes in `models` models, `held` of them removed by it
    but kept for another owner's link."""

    used: int
    limit: int
    models: int
    held: int = 0

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)


def megabytes(size: float) -> str:
    return f"{size / MB:.1f} MB"


class ModelStore:
    """Models kept on disk in `folder`; the limits default to the settings AP_MODEL_STORE_MB (max_bytes),
    AP_MODEL_STORE_DAYS (max_age_s), AP_STORE_SESSION_MB (session_bytes), AP_STORE_CLIENT_MB (client_bytes) and
    AP_STORE_GRACE_MIN (grace_s)."""

    def __init__(self, folder: str | os.PathLike, max_bytes: int | None = None, max_age_s: float | None = None,
                 session_bytes: int | None = None, client_bytes: int | None = None, grace_s: float | None = None):
        def mb(value: int | None, name: str) -> int:
            return int(settings.get(name) * MB) if value is None else value

        self.max_bytes = mb(max_bytes, "AP_MODEL_STORE_MB")
        self.session_bytes = mb(session_bytes, "AP_STORE_SESSION_MB")
        self.client_bytes = mb(client_bytes, "AP_STORE_CLIENT_MB")
        self.max_age_s = settings.get("AP_MODEL_STORE_DAYS") * 86400 if max_age_s is None else max_age_s
        self.grace_s = settings.get("AP_STORE_GRACE_MIN") * 60 if grace_s is None else grace_s
        if min(self.max_bytes, self.max_age_s, self.session_bytes) <= 0 or self.client_bytes < 0 or self.grace_s < 0:
            raise ValueError("the model store needs positive size and age limits")
        self.folder = Path(folder)
        self._thread_lock = threading.Lock()
        self.orphans_removed = self.remove_orphans()

    @classmethod
    def configured(cls, default_folder: str | os.PathLike) -> ModelStore:
        """The store in the folder AP_MODEL_STORE names, else `default_folder`."""
        return cls(settings.get("AP_MODEL_STORE") or default_folder)

    def _path(self, model_id: str) -> Path:
        if not isinstance(model_id, str) or not ID_PATTERN.fullmatch(model_id):
            raise StoreError(t("messages.not_an_id"))
        return self.folder / f"{model_id}{SUFFIX}"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One change of the folder at a time: between this process's threads, and between processes (flock)."""
        with self._thread_lock:
            if fcntl is None:
                yield
                return
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / LOCK_NAME, "a+b") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                yield

    # -- keeping and loading -------------------------------------------------------------------------------
    def put(self, bundle: ModelBundle, owner: str, client: str | None = None, protect: Collection[str] = ()) -> str:
        """Keep `bundle` for `owner` (and `client`, where known); returns its new id. Room is made as the module
        docstring says (never from `protect`, ids of the owner's that must stay); ShareError when it cannot be."""
        from .checkpoints import bundle_to_bytes  # function-local: torch loads when a model is kept, not with the store

        data = bundle_to_bytes(bundle)
        with self._locked():
            models = []
            for model in self.entries():
                if self._expired(model):
                    self._delete(model.id)
                else:
                    models.append(model)
            for model in self._make_room(models, len(data), owner, client, set(protect)):
                self._delete(model.id)
            model_id = secrets.token_urlsafe(16)
            write_atomic(data, self._path(model_id))
            self._write_record(model_id, {"owner": owner, "client": client, "shared": False})
        return model_id

    def get(self, model_id: str, user: str | None = None) -> ModelBundle:
        """The kept model `model_id` (its last use is now); StoreError when the store does not have it. `user`: who
        opens it; another owner than its own marks it as shared (its owner's Remove then keeps it)."""
        from .checkpoints import load_bundle  # function-local: torch loads when a model is opened, not with the store

        path = self._path(model_id)
        try:
            os.utime(path)
            bundle = load_bundle(path)
        except FileNotFoundError:
            raise StoreError(t("messages.not_kept")) from None
        except CheckpointError as exc:
            raise StoreError(t("messages.unreadable", error=exc)) from None
        record = self._read_record(model_id)
        if user is not None and record.get("owner") not in (None, user) and not record.get("shared"):
            with self._locked():
                if path.is_file():
                    self._write_record(model_id, record | {"shared": True})
        return bundle

    def has(self, model_id: str) -> bool:
        try:
            return self._path(model_id).is_file()
        except StoreError:
            return False

    def discard(self, model_id: str, owner: str) -> bool:
        """`owner` removed `model_id`: delete it unless another owner has opened it (or it is not the owner's).
        True when it was deleted."""
        try:
            self._path(model_id)
        except StoreError:
            return False
        with self._locked():
            record = self._read_record(model_id)
            if record.get("owner") != owner or record.get("shared"):
                return False
            self._delete(model_id)
            return True

    # -- what is kept -------------------------------------------------------------------------------------
    def entries(self) -> list[StoredModel]:
        """Every kept model, least recently used first."""
        found = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            try:
                stat = path.stat()
            except FileNotFoundError:  # evicted by another process meanwhile
                continue
            if ID_PATTERN.fullmatch(path.stem):
                record = self._read_record(path.stem)
                found.append(StoredModel(path.stem, path, stat.st_size, stat.st_mtime, record.get("owner"),
                                         record.get("client"), bool(record.get("shared"))))
        return sorted(found, key=lambda m: m.last_used)

    def share(self, owner: str, listed: Collection[str] = ()) -> Share:
        """What `owner` keeps against its share; `listed`: the ids it still lists (the others are held for a link)."""
        mine = [m for m in self.entries() if m.owner == owner]
        return Share(sum(m.size for m in mine), self.session_bytes, len(mine),
                     sum(m.id not in listed for m in mine))

    def client_share(self, client: str | None) -> Share | None:
        """What `client`'s sessions keep against its share (None: no client share applies)."""
        if client is None or not self.client_bytes:
            return None
        theirs = [m for m in self.entries() if m.client == client]
        return Share(sum(m.size for m in theirs), self.client_bytes, len(theirs))

    def temp_bytes(self) -> int:
        """Bytes of temp files in the folder: writes under way, or killed ones not yet cleaned."""
        total = 0
        for entry in self._scan():
            if is_temp_name(entry.name):
                try:
                    total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    pass
        return total

    def expires_in(self, model_id: str, now: float | None = None) -> float | None:
        """Seconds until `model_id` ages out if it is not used again (None when it is not kept)."""
        try:
            last = self._path(model_id).stat().st_mtime
        except (FileNotFoundError, StoreError):
            return None
        return max(0.0, last + self.max_age_s - (time.time() if now is None else now))

    # -- making room --------------------------------------------------------------------------------------
    def evict(self, now: float | None = None) -> list[str]:
        """Drop models unused for longer than the age limit; returns their ids."""
        with self._locked():
            dropped = [m.id for m in self.entries() if self._expired(m, now)]
            for model_id in dropped:
                self._delete(model_id)
        return dropped

    def remove_orphans(self) -> list[Path]:
        """Remove what killed writes left (unlocked temp files of any name) and records without a model."""
        with self._locked():
            removed = remove_leftover_temps(self.folder)
            for entry in self._scan():
                stem = entry.name.removesuffix(RECORD)
                if entry.name.endswith(RECORD) and ID_PATTERN.fullmatch(stem) and not self.has(stem):
                    Path(entry.path).unlink(missing_ok=True)
                    removed.append(Path(entry.path))
        return removed

    def _make_room(self, models: list[StoredModel], size: int, owner: str, client: str | None,
                   protect: set[str]) -> list[StoredModel]:
        """The models to delete so that `size` more bytes fit every share (see the module docstring)."""
        now = time.time()
        if size > self.session_bytes:
            raise ShareError(t("messages.share.too_big", size=megabytes(size), share=megabytes(self.session_bytes)))
        gone: list[StoredModel] = []

        def free(candidates, need: int, refusal: str) -> None:
            for model in candidates:
                if need <= 0:
                    break
                if model not in gone:
                    gone.append(model)
                    need -= model.size
            if need > 0:
                raise ShareError(refusal)

        def kept(pick) -> list[StoredModel]:
            return [m for m in models if m not in gone and pick(m)]

        def removable(m: StoredModel) -> bool:  # never another owner's model used within the grace time
            return (m.owner == owner and m.id not in protect) or (m.owner != owner and now - m.last_used > self.grace_s)

        mine = kept(lambda m: m.owner == owner)
        used = sum(m.size for m in mine)
        free([m for m in mine if m.id not in protect], used + size - self.session_bytes,
             t("messages.share.own_full", n=len(mine), used=megabytes(used), share=megabytes(self.session_bytes)))
        if client is not None and self.client_bytes:
            theirs = kept(lambda m: m.client == client)
            used = sum(m.size for m in theirs)
            free([m for m in theirs if removable(m)], used + size - self.client_bytes,
                 t("messages.share.client_full", used=megabytes(used), share=megabytes(self.client_bytes)))
        rest = kept(lambda m: True)
        total = sum(m.size for m in rest) + self.temp_bytes()
        over = self._over_share(rest)
        free(sorted((m for m in rest if removable(m)), key=lambda m: (m not in over, m.last_used)),
             total + size - self.max_bytes,
             t("messages.share.store_full", used=megabytes(total), share=megabytes(self.max_bytes),
               minutes=self.grace_s / 60))
        return gone

    def _over_share(self, models: list[StoredModel]) -> set[StoredModel]:
        """The models of owners, or clients, who keep more than their share."""
        def over(key, limit: int) -> set[StoredModel]:
            groups: dict[str, list[StoredModel]] = {}
            for model in models:
                if key(model) is not None:
                    groups.setdefault(key(model), []).append(model)
            return {m for group in groups.values() if sum(g.size for g in group) > limit for m in group}

        return over(lambda m: m.owner, self.session_bytes) | (
            over(lambda m: m.client, self.client_bytes) if self.client_bytes else set())

    def _expired(self, model: StoredModel, now: float | None = None) -> bool:
        return (time.time() if now is None else now) - model.last_used > self.max_age_s

    # -- files --------------------------------------------------------------------------------------------
    def _delete(self, model_id: str) -> None:
        self._path(model_id).unlink(missing_ok=True)
        (self.folder / f"{model_id}{RECORD}").unlink(missing_ok=True)

    def _read_record(self, model_id: str) -> dict:
        try:
            record = json.loads((self.folder / f"{model_id}{RECORD}").read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}

    def _write_record(self, model_id: str, record: dict) -> None:
        write_atomic(json.dumps(record).encode("utf-8"), self.folder / f"{model_id}{RECORD}")

    def _scan(self) -> list[os.DirEntry]:
        try:
            return list(os.scandir(self.folder))
        except OSError:
            return []
