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
        if key not in registry.entries():
            active = registry.entries().get(registry.active_key())
            instead = f"; showing {active.label} instead" if active is not None else ""
            raise LinkError(f"“{raw[:60]}” is not a model on this server (models trained or uploaded in another "
                            f"session, or on another server, are not kept here){instead}")
        return key

    def format(self, value: str) -> str:
        return value.removeprefix("shipped:")

    def admits(self, value) -> bool:
        return isinstance(value, str) and value in registry.entries()


MODEL = ModelProp("model", default=registry.DEFAULT_MODEL, key=registry.ACTIVE)
INPUT = Text("input", default=None, max_chars=200, depends_on=("model",), key="shared_input")

SHARED = register(StateTable("shared", (MODEL,)))
