"""The step-by-step decoding page's view: model, input, step, forced tokens and beam width."""

from ui.state import Choice, Int, IntMap, StateTable, register
from ui.tables.shared import INPUT, MODEL

BEAM_WIDTHS = (2, 3, 4, 6, 8)

DECODE = register(StateTable("decode", (
    MODEL,
    INPUT,
    Int("step", default=None, lo=1, hi=10_000, depends_on=("model", "input")),  # 1-based; None: the middle
    IntMap("force", depends_on=("model", "input")),  # (1-based step, token id) pairs, in step order
    Choice("beam", default=4, options=BEAM_WIDTHS),
)))
