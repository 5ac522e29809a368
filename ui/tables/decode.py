"""The step-by-step decoding page's view: model, input, the heads knocked out (shared with the all-heads page),
step, forced tokens, beam width, the top-k chart's scale and the sampling settings."""

from transformer.charts import TOPK_SCALES
from ui.state import Choice, Float, Int, IntMap, StateTable, register
from ui.tables.shared import INPUT, KNOCK_MODE, KNOCKED, LANG, MODEL, PRESENTER

BEAM_WIDTHS = (2, 3, 4, 6, 8)
SAMPLES = 3  # seeded samples shown beside greedy (seeds: seed, seed + 1, ...)

DECODE = register(StateTable("decode", (
    MODEL,
    INPUT,
    KNOCKED,
    KNOCK_MODE,
    Int("step", default=None, lo=1, hi=10_000, depends_on=("model", "input")),  # 1-based; None: the first
    IntMap("force", depends_on=("model", "input")),  # (1-based step, token id) pairs, in step order
    Choice("beam", default=4, options=BEAM_WIDTHS),
    Choice("scale", default="probability", options=tuple(TOPK_SCALES)),  # the top-k chart's values
    # sampling: the values the library takes (temperature > 0, top-k >= 1, top-p in (0, 1]) at the number boxes'
    # precision, so the boxes offer no other and a link's value outside them gets a note; top_k None: off
    Float("temperature", default=1.0, lo=0.01, hi=100.0),
    Int("top_k", default=None, lo=1, hi=100_000),
    Float("top_p", default=1.0, lo=0.01, hi=1.0),
    Int("seed", default=0, lo=0, hi=2**31 - 1),
    Int("sample_step", default=None, lo=1, hi=10_000, depends_on=("model", "input")),  # 1-based; None: first
    PRESENTER,
    LANG,
)))
