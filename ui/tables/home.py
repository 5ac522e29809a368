"""The home page's view: the active model and the input whose cross-attention it shows (the input shared with
the decode and attention pages)."""

from ui.state import StateTable, register
from ui.tables.shared import INPUT, LANG, MODEL, PRESENTER

HOME = register(StateTable("home", (MODEL, INPUT, PRESENTER, LANG)))
