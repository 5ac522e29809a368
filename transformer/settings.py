"""Every server setting the app reads from the environment (`AP_*`), in one table: its type, default, bounds and
meaning. `get(name)` is the one way to read one; a bad value is a `SettingError` (a ValueError) that names the
variable and what it takes, never a silent default: a typo must not lift a protection.

A value is parsed once per distinct text (so a changed environment, as in tests, is seen at the next `get`).
docs/SERVING.md explains each setting for someone hosting a class; a test holds the two in step.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class SettingError(ValueError):
    """An environment variable holds a value its setting cannot take; the message says which and why."""


@dataclass(frozen=True)
class Setting:
    """One `AP_*` variable: `kind` "int", "float", "text" or "path"; numbers lie within lo..hi (inclusive; `lo_open`:
    lo itself is refused). `default` None means "not set" (the setting is optional)."""

    name: str
    kind: str
    default: Any
    meaning: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    def value(self, text: str) -> Any:
        """The value of the variable's `text`: the default when it is empty."""
        text = text.strip()
        if not text:
            return self.default() if callable(self.default) else self.default
        return _parse(self.name, text)

    def parse(self, text: str) -> Any:
        if self.kind == "text":
            return text
        if self.kind == "path":
            return Path(text).expanduser()
        try:
            value = int(text) if self.kind == "int" else float(text)
        except ValueError:
            value = None
        if value is None or value != value or not self._within(value):
            raise SettingError(f"the environment variable {self.name} must be {self.wanted()}, got {text[:40]!r}")
        return value

    def check(self, value: Any) -> Any:
        """`value` given in code in place of the variable, held to the same bounds."""
        number = isinstance(value, int) or (self.kind == "float" and isinstance(value, float))
        if isinstance(value, bool) or not number or not self._within(value):
            raise SettingError(f"{self.name} must be {self.wanted()}, got {value!r}")
        return value

    def _within(self, value: float) -> bool:
        low_ok = self.lo is None or (value > self.lo if self.lo_open else value >= self.lo)
        return low_ok and (self.hi is None or value <= self.hi)

    def wanted(self) -> str:
        """What the setting takes, in words."""
        noun = "a whole number" if self.kind == "int" else "a number"
        if self.lo is not None and self.hi is not None and not self.lo_open:
            return f"{noun} from {self.lo:g} to {self.hi:g}"
        if self.lo is not None:
            return f"{noun} {'above' if self.lo_open else 'of at least'} {self.lo:g}" + (
                f" and at most {self.hi:g}" if self.hi is not None else "")
        return noun


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    # resources of one piece of work (transformer.network.budget)
    Setting("AP_MODEL_BUDGET_MB", "float", 1024.0, "memory for loading one model, or one traced decode of it (MB)",
            lo=0, hi=1e7, lo_open=True),
    Setting("AP_RUN_BUDGET_MB", "float", 2048.0, "memory for one training run: weights, optimizer state, "
            "activations, evaluation (MB)", lo=0, hi=1e7, lo_open=True),
    # training runs (transformer.runs)
    Setting("AP_MAX_RUNS", "int", lambda: os.cpu_count() or 1, "training runs that train at once on this server "
            "(default: the number of CPU cores)", lo=1, hi=10_000),
    Setting("AP_MAX_QUEUED", "int", 32, "runs that may wait in the server's line; beyond that Start is refused",
            lo=0, hi=10_000),
    Setting("AP_RUNS_PER_SESSION", "int", 1, "training runs one browser session may have live at once (waiting, "
            "training or paused)", lo=1, hi=10_000),
    Setting("AP_RUNS_PER_CLIENT", "int", 3, "training runs one client address may have live at once, all its "
            "sessions together (0: no limit; not applied to localhost)", lo=0, hi=10_000),
    Setting("AP_MAX_WORKERS", "int", lambda: 2 * (os.cpu_count() or 1), "training worker processes alive at once, "
            "paused runs' included: past it the longest-paused hand theirs back (default: twice the CPU cores)",
            lo=1, hi=10_000),
    Setting("AP_PARK_AFTER_S", "float", 120.0, "seconds a paused run keeps its worker process; then it hands its "
            "state to the server and resumes from it, exactly, in a new worker", lo=0, hi=86_400),
    Setting("AP_WORKER_NICE", "int", 0, "how many nice levels below the server a training worker runs "
            "(0: the server's priority, for one learner; 10 on a class server)", lo=0, hi=19),
    Setting("AP_RAY_ADDRESS", "text", None, "a Ray cluster to train on ('auto', 'HOST:PORT' or "
            "'ray://HOST:10001'); unset: worker processes on this machine"),
    Setting("AP_RAY_CONNECT_TIMEOUT", "float", 60.0, "seconds a run waits for the first connection to the Ray "
            "cluster", lo=0, hi=3600, lo_open=True),
    # kept models (transformer.store.model_store) and the server's caches
    Setting("AP_MODEL_STORE", "path", None, "the folder where trained and uploaded models are kept "
            "(default: .model_store/ in the app's folder)"),
    Setting("AP_MODEL_STORE_MB", "float", 1024.0, "disk space for kept models, all sessions together (MB)",
            lo=0, hi=1e7, lo_open=True),
    Setting("AP_MODEL_STORE_DAYS", "float", 7.0, "days a kept model nobody uses stays", lo=0, hi=36_500,
            lo_open=True),
    Setting("AP_STORE_SESSION_MB", "float", 32.0, "one browser session's share of the kept models' disk space "
            "(MB): beyond it a session makes room from its own models, or is refused", lo=0, hi=1e7, lo_open=True),
    Setting("AP_STORE_CLIENT_MB", "float", 96.0, "one client address's share of the kept models' disk space, all "
            "its sessions together (MB; 0: none; not applied to localhost)", lo=0, hi=1e7),
    Setting("AP_STORE_GRACE_MIN", "float", 30.0, "minutes a kept model used by one session is safe from eviction "
            "by another", lo=0, hi=525_600),
    Setting("AP_DECODE_CACHE_MB", "float", 256.0, "memory for the server-wide cache of decodes, attention maps "
            "and figures (MB)", lo=0, hi=1e7, lo_open=True),
    Setting("AP_FIRST_PAGE_CACHE", "path", None, "the folder where the home page's decode of each shipped model's "
            "default input is kept for the next server start (default: .first_page/ in the app's folder)"),
)}


def get(name: str) -> Any:
    """The value of setting `name` from the environment, or its default; SettingError for a bad value."""
    return SETTINGS[name].value(os.environ.get(name, ""))


@functools.lru_cache(maxsize=256)
def _parse(name: str, text: str) -> Any:
    """A set variable's value, parsed once per distinct text."""
    return SETTINGS[name].parse(text)
