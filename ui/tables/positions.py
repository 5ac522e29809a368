"""The positional-encoding page's view: the sinusoidal table's size and plotted dimensions, the offset k of
the rotation, the input whose embeddings it shows, a RoPE model's query/key pair (positions, head), and the
decode without positions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformer.i18n import t
from ui.state import Flag, Int, LinkError, Prop, StateTable, Text, quoted, register
from ui.tables.shared import LANG, MODEL, PRESENTER

MAX_DIMS = 8  # curves plotted at once


@dataclass(frozen=True)
class EvenInt(Int):
    """A whole number that must be even (d_model: dimensions come in sine/cosine pairs)."""

    def parse(self, raw: str) -> int:
        value = super().parse(raw)
        if value % 2:
            raise LinkError(t("positions.link.odd", value=value))
        return value

    def admits(self, value: Any) -> bool:
        return super().admits(value) and value % 2 == 0


@dataclass(frozen=True)
class IntSet(Prop):
    """A few distinct whole numbers, written `4,5,12` (empty: none chosen)."""

    default: tuple | None = None
    max_items: int = MAX_DIMS
    hi: int = 10_000

    def parse(self, raw: str) -> tuple[int, ...]:
        parts = [p for p in raw.split(",") if p.strip()]
        if len(parts) > self.max_items:
            raise LinkError(t("positions.link.too_many", n=len(parts), most=self.max_items))
        if not all(p.strip().isdigit() and len(p) < 8 for p in parts):
            raise LinkError(t("positions.link.not_numbers", raw=quoted(raw)))
        values = tuple(dict.fromkeys(int(p) for p in parts))
        if values and max(values) > self.hi:
            raise LinkError(t("app.link.larger", value=max(values), hi=self.hi))
        return values

    def format(self, value: tuple) -> str:
        return ",".join(str(v) for v in value)

    def admits(self, value: Any) -> bool:
        return isinstance(value, tuple) and len(value) <= self.max_items and all(isinstance(v, int) for v in value)


POSITIONS = register(StateTable("positions", (
    MODEL,
    EvenInt("d_model", default=None, lo=8, hi=512, depends_on=("model",)),  # None: the model's own (if even)
    Int("length", default=64, lo=8, hi=256),  # positions in the table
    IntSet("dims", depends_on=("model",), hi=511),  # None: 4, 5, 12, 24 (those below d_model); reset with d_model
    Int("k", default=5, lo=1, hi=50),  # the rotation's offset
    Text("text", default=None, max_chars=200, depends_on=("model",)),  # None: an example that repeats a token
    Flag("no_positions"),
    # RoPE models: the query and key positions (0-based, within the input) and the 1-based head of the pair shown
    Int("query_pos", default=None, lo=0, hi=1023, depends_on=("model", "text")),  # None: the input's last token
    Int("key_pos", default=0, lo=0, hi=1023, depends_on=("model", "text")),
    Int("head", default=1, lo=1, hi=16, depends_on=("model",)),
    PRESENTER,
    LANG,
)))
