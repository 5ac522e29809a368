"""The compare page's view: the two models (any the session can use: shipped, trained, uploaded, a kept
snapshot), the input both decode, the attention kind, layer and head shown for both, the decoding step whose
top-k is shown, and the held-out inputs both are scored on (count and seed)."""

from __future__ import annotations

from dataclasses import dataclass

from transformer.i18n import t
from ui import model_registry as registry
from ui.state import Choice, Int, LinkError, StateTable, Text, quoted, register
from ui.tables.attention import KINDS
from ui.tables.shared import LANG, PRESENTER, ModelProp


@dataclass(frozen=True)
class CompareModel(ModelProp):
    """One of the two models compared, written like the active model (`reverse`, `snapshot:1a2b3c4d`); None:
    the page's default."""

    def parse(self, raw: str) -> str:
        key = raw if ":" in raw else f"shipped:{raw}"
        why = None if key in registry.entries() else registry.adopt_kept(key)
        if why is not None:
            raise LinkError(t("compare.link", raw=quoted(raw, 60), why=why))
        return key


COMPARE = register(StateTable("compare", (
    CompareModel("a", default=None),
    CompareModel("b", default=None),
    Text("input", default=None, max_chars=200, depends_on=("a",)),
    Choice("kind", default="cross", options=KINDS),
    # 1-based, as the pickers label them; None: model A's best-aligned head (cross-attention), else 1
    Int("layer", default=None, lo=1, hi=64, depends_on=("a", "b", "kind")),
    Int("head", default=None, lo=1, hi=64, depends_on=("a", "b", "kind")),
    Int("step", default=1, lo=1, hi=1000, depends_on=("a", "b", "input")),  # 1-based decoding step of the top-k
    Int("samples", default=200, lo=20, hi=2000),
    Int("seed", default=7, lo=0, hi=2**31 - 1),
    PRESENTER,
    LANG,
)))
