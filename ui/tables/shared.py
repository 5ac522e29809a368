"""View state every page shares: the active model and the input text (decode and attention pages)."""

from __future__ import annotations

from dataclasses import dataclass

from ui import model_registry as registry
from ui.state import LinkError, Prop, StateTable, Text, register


@dataclass(frozen=True)
class ModelProp(Prop):
    """The active model, written by its shipped name (`reverse`) or its session key (`trained:1a2b3c4d`)."""

    def parse(self, raw: str) -> str:
        key = raw if ":" in raw else f"shipped:{raw}"
        why = None if key in registry.entries() else registry.adopt_kept(key)
        if why is not None:
            active = registry.entries().get(registry.active_key())
            instead = f"; showing {active.label} instead" if active is not None else ""
            raise LinkError(f"“{raw[:60]}”: {why} (a model trained on another server, or removed from this "
                            f"one's store, can be trained again from its Train page link){instead}")
        return key

    def format(self, value: str) -> str:
        return value.removeprefix("shipped:")

    def admits(self, value) -> bool:
        return isinstance(value, str) and value in registry.entries()


MODEL = ModelProp("model", default=registry.DEFAULT_MODEL, key=registry.ACTIVE)
INPUT = Text("input", default=None, max_chars=200, depends_on=("model",), key="shared_input")

SHARED = register(StateTable("shared", (MODEL,)))
