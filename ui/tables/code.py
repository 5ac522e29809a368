"""The code page's view: the model, the input (shared with the decode and attention pages), the section it opens at,
and the attention kind, layer and head whose tensors its sections show (1-based, as the pickers label them; None:
the head that best follows the task's alignment, else layer 1 head 1)."""

from transformer.analysis.tour_order import KEYS
from ui.state import Choice, Int, StateTable, register
from ui.tables.attention import KINDS
from ui.tables.shared import INPUT, LANG, MODEL, PRESENTER

CODE = register(StateTable("code", (
    MODEL,
    INPUT,
    Choice("section", default=KEYS[0], options=KEYS),
    Choice("kind", default="cross", options=KINDS),
    Int("layer", default=None, lo=1, hi=64, depends_on=("model", "kind")),
    Int("head", default=None, lo=1, hi=64, depends_on=("model", "kind")),
    PRESENTER,
    LANG,
)))
