"""The error-analysis page's view: the active model, the held-out inputs analysed (how many, which seed), and
the length range (with inputs per length) of the length-generalisation view, and whether the position schemes'
comparison is shown."""

from ui.state import Flag, Int, StateTable, register
from ui.tables.shared import LANG, MODEL, PRESENTER

SAMPLES = (10, 5000)  # held-out inputs analysed: 1,000 take about a second on one core (reverse)
PER_LENGTH = (10, 2000)  # held-out inputs per length in the by-length view
MAX_LENGTH = 48  # the letter tasks' longest input; a model's own max_len may allow fewer (the page says so)

ERRORS = register(StateTable("errors", (
    MODEL,
    Int("samples", default=1000, lo=SAMPLES[0], hi=SAMPLES[1]),
    Int("seed", default=1, lo=0, hi=2**31 - 1),
    Int("len_from", default=None, lo=1, hi=MAX_LENGTH, depends_on=("model",)),  # None: the trained shortest
    Int("len_to", default=None, lo=1, hi=MAX_LENGTH, depends_on=("model",)),  # None: past the trained longest
    Int("per_length", default=100, lo=PER_LENGTH[0], hi=PER_LENGTH[1]),
    Flag("schemes", default=False),  # the position schemes' comparison is shown (it evaluates four models)
    PRESENTER,
    LANG,
)))
