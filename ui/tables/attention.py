"""The all-heads attention page's view: model, input, the heads knocked out (shared with the decode page), the
attention kind shown, its layer and head, the heatmap cell clicked (query, key), and the held-out inputs head
importance is measured on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformer.i18n import Texts
from ui.state import Choice, Int, IntList, Prop, StateTable, register
from ui.tables.shared import INPUT, KNOCK_MODE, KNOCKED, LANG, MODEL, PRESENTER

KINDS = ("cross", "encoder_self", "decoder_self")
KIND_NAMES = Texts({"cross": "charts.kind.cross", "encoder_self": "charts.kind.encoder_self",  # the kind pickers'
                    "decoder_self": "attention.kind.decoder_self"})


@dataclass(frozen=True)
class Picks(Prop):
    """The layer and head last shown of the other kinds, so switching back to a kind shows them again:
    (model key, kind, layer, head) tuples. Kept in the session only; the URL names the shown kind's."""

    default: tuple = ()
    url: bool = False

    def admits(self, value: Any) -> bool:
        return isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 4 for p in value)


ATTENTION = register(StateTable("attention", (
    MODEL,
    INPUT,
    KNOCKED,
    KNOCK_MODE,
    Choice("kind", default="cross", options=KINDS),
    # 1-based, as the pickers label them; None: the best-aligned head (cross-attention), else layer 1 head 1
    Int("layer", default=None, lo=1, hi=64, depends_on=("model", "kind")),
    Int("head", default=None, lo=1, hi=64, depends_on=("model", "kind")),
    IntList("cell", length=2, hi=10_000, depends_on=("model", "input", "kind", "layer", "head")),  # 0-based
    Picks("picks", depends_on=("model",)),
    Int("samples", default=300, lo=20, hi=2000),  # held-out inputs of the head-importance sweep
    PRESENTER,
    LANG,
)))
