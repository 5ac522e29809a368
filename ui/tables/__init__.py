"""Every page's state table, by the page's URL path ("" for home). app.py adopts a link through the
current page's table before anything renders, so the sidebar's model picker already shows the linked model."""

from ui.state import StateTable
from ui.tables.attention import ATTENTION
from ui.tables.checkpoints import CHECKPOINTS
from ui.tables.code import CODE
from ui.tables.compare import COMPARE
from ui.tables.decode import DECODE
from ui.tables.errors import ERRORS
from ui.tables.home import HOME
from ui.tables.masks import MASKS
from ui.tables.positions import POSITIONS
from ui.tables.shared import SHARED
from ui.tables.train import TRAIN

TABLES: dict[str, StateTable] = {table.page: table for table in (
    ATTENTION, CHECKPOINTS, CODE, COMPARE, DECODE, ERRORS, HOME, MASKS, POSITIONS, TRAIN,
)}


def for_page(url_path: str) -> StateTable:
    """The table of the page served at `url_path` (the shared one for a page without its own)."""
    return TABLES.get(url_path or "home", SHARED)
