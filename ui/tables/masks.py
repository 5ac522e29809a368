"""The masks page's view: the batch's inputs and teacher-forced targets, the batch row of the decoder masks,
the head and row whose scores and weights it shows, and the run without the causal mask with its head and row.

Layers, heads and rows are 1-based, as the page shows them; a row None is the page's choice (by input length).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer.analysis.batch_size import MAX_BATCH
from transformer.i18n import t
from ui.state import Choice, Flag, Int, LinkError, StateTable, Text, register
from ui.tables.shared import LANG, MODEL, PRESENTER

CORRECT, GREEDY = "correct", "greedy"
TARGETS = (CORRECT, GREEDY)
KINDS = ("decoder_self", "encoder_self", "cross")
MAX_INDEX = 64  # no model here has more layers or heads; the page refuses what the active model lacks


@dataclass(frozen=True)
class Lines(Text):
    """Text of one entry per line: newlines are allowed, other control characters are not."""

    def parse(self, raw: str) -> str:
        text = raw.replace("\r\n", "\n")
        if any(ord(c) < 32 and c != "\n" for c in text):
            raise LinkError(t("app.link.control"))
        if len(text) > self.max_chars:
            raise LinkError(t("app.link.too_long", n=len(text), most=self.max_chars))
        return text


def _row(name: str) -> Int:
    return Int(name, default=None, lo=1, hi=MAX_BATCH, depends_on=("model", "inputs"))


def _index(name: str) -> Int:
    return Int(name, default=1, lo=1, hi=MAX_INDEX, depends_on=("model",))


MASKS = register(StateTable("masks", (
    MODEL,
    Lines("inputs", default=None, max_chars=400, depends_on=("model",)),  # None: examples of varied lengths
    Choice("targets", default=CORRECT, options=TARGETS),
    _row("row"),  # the decoder masks' row; None: the shortest input
    Choice("kind", default="decoder_self", options=KINDS),  # 3 · scores and weights
    _index("layer"),
    _index("head"),
    _row("score_row"),  # None: the input of middle length
    Flag("no_causal"),  # 4 · without the causal mask
    _index("open_layer"),
    _index("open_head"),
    _row("open_row"),  # None: the longest input
    PRESENTER,
    LANG,
)))
