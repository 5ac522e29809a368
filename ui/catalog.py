"""Every page of the app in navigation order: its group, script, title, icon and URL. app.py builds the
navigation from it and the home page its cards, so the two can never disagree."""

from __future__ import annotations

from typing import NamedTuple


class PageInfo(NamedTuple):
    group: str
    path: str
    title: str
    icon: str
    url_path: str | None  # None: the default page, served at /


PAGES = (
    PageInfo("Start", "pages/learn/home.py", "Home", ":material/home:", None),
    PageInfo("Start", "pages/learn/code.py", "Read the code", ":material/code:", "code"),
    PageInfo("Explore a model", "pages/explore/decode.py", "Step-by-step decoding", ":material/play_arrow:", "decode"),
    PageInfo("Explore a model", "pages/explore/attention.py", "All attention heads", ":material/grid_view:",
             "attention"),
    PageInfo("Explore a model", "pages/explore/errors.py", "Where it fails", ":material/troubleshoot:", "errors"),
    PageInfo("Explore a model", "pages/explore/compare.py", "Compare two models", ":material/compare:", "compare"),
    PageInfo("Concepts", "pages/concepts/masks.py", "Masks", ":material/visibility_off:", "masks"),
    PageInfo("Concepts", "pages/concepts/positions.py", "Positional encoding", ":material/waves:", "positions"),
    PageInfo("Models", "pages/models/train.py", "Train live", ":material/model_training:", "train"),
    PageInfo("Models", "pages/models/checkpoints.py", "Checkpoints", ":material/inventory_2:", "checkpoints"),
)
