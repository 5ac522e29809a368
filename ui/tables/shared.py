"""View state every page shares: the active model, the presenter switch and the language (every page's table holds
both, so every page's link keeps them), the input text and the heads knocked out (decode and attention pages)."""

from __future__ import annotations

from dataclasses import dataclass

from transformer.analysis.knockout import MODES, Head
from transformer.i18n import DEFAULT, LANGUAGES, t
from ui import model_registry as registry
from ui.state import Choice, Flag, LinkError, Prop, StateTable, Text, quoted, register


@dataclass(frozen=True)
class ModelProp(Prop):
    """The active model, written by its shipped name (`reverse`) or its session key (`trained:1a2b3c4d`)."""

    def parse(self, raw: str) -> str:
        key = raw if ":" in raw else f"shipped:{raw}"
        why = None if key in registry.entries() else registry.adopt_kept(key)
        if why is not None:
            active = registry.entries().get(registry.active_key())
            instead = t("app.link.instead", model=active.label) if active is not None else ""
            raise LinkError(t("app.link.no_model", raw=quoted(raw, 60), why=why) + instead)
        return key

    def format(self, value: str) -> str:
        return value.removeprefix("shipped:")

    def admits(self, value) -> bool:
        return isinstance(value, str) and value in registry.entries()


@dataclass(frozen=True)
class HeadSet(Prop):
    """Attention heads, written `cross:L1H4,encoder_self:L2H1` (1-based, as the pages label them); whether
    the model has them is the page's to judge."""

    default: tuple = ()
    max_items: int = 256

    def parse(self, raw: str) -> tuple[Head, ...]:
        items = [item for item in raw.split(",") if item]
        if len(items) > self.max_items:
            raise LinkError(t("app.link.too_many_heads", n=len(items), most=self.max_items))
        return tuple(sorted({self._head(item) for item in items}))

    @staticmethod
    def _head(item: str) -> Head:
        try:
            return Head.parse(item)
        except ValueError as exc:  # the library quotes the item whole: a long one is cut here
            raise LinkError(str(exc) if len(item) <= 40 else t("app.link.not_head", raw=quoted(item))) from None

    def format(self, value: tuple) -> str:
        return ",".join(str(head) for head in value)

    def admits(self, value) -> bool:
        return isinstance(value, tuple) and all(isinstance(head, Head) for head in value)


MODEL = ModelProp("model", default=registry.DEFAULT_MODEL, key=registry.ACTIVE)
PRESENTER = Flag("presenter", key="presenter")  # the sidebar's presenter switch: larger text and charts
LANG = Choice("lang", default=DEFAULT, options=LANGUAGES, key="lang")  # ui/language.py: English or Chinese
INPUT = Text("input", default=None, max_chars=200, depends_on=("model",), key="shared_input")
KNOCKED = HeadSet("knocked", depends_on=("model",), key="shared_knocked")
KNOCK_MODE = Choice("knock_mode", default="zero", options=MODES, key="shared_knock_mode")

SHARED = register(StateTable("shared", (MODEL, PRESENTER, LANG)))
