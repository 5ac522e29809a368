"""Every page of the app in navigation order: its group, script, title, icon and URL. app.py builds the
navigation from it and the home page its cards, so the two can never disagree. Groups and titles are catalog
keys (transformer/locales/app.toml): `group` and `title` read them in the reader's language."""

from __future__ import annotations

from typing import NamedTuple

from transformer.i18n import t


class PageInfo(NamedTuple):
    group_key: str
    path: str
    title_key: str
    icon: str
    url_path: str | None  # None: the default page, served at /

    @property
    def group(self) -> str:
        return t(self.group_key)

    @property
    def title(self) -> str:
        return t(self.title_key)


START, EXPLORE, CONCEPTS, MODELS = "app.group.start", "app.group.explore", "app.group.concepts", "app.group.models"
PAGES = (
    PageInfo(START, "pages/learn/home.py", "app.page.home", ":material/home:", None),
    PageInfo(START, "pages/learn/code.py", "app.page.code", ":material/code:", "code"),
    PageInfo(EXPLORE, "pages/explore/decode.py", "app.page.decode", ":material/play_arrow:", "decode"),
    PageInfo(EXPLORE, "pages/explore/attention.py", "app.page.attention", ":material/grid_view:", "attention"),
    PageInfo(EXPLORE, "pages/explore/errors.py", "app.page.errors", ":material/troubleshoot:", "errors"),
    PageInfo(EXPLORE, "pages/explore/compare.py", "app.page.compare", ":material/compare:", "compare"),
    PageInfo(CONCEPTS, "pages/concepts/masks.py", "app.page.masks", ":material/visibility_off:", "masks"),
    PageInfo(CONCEPTS, "pages/concepts/positions.py", "app.page.positions", ":material/waves:", "positions"),
    PageInfo(MODELS, "pages/models/train.py", "app.page.train", ":material/model_training:", "train"),
    PageInfo(MODELS, "pages/models/checkpoints.py", "app.page.checkpoints", ":material/inventory_2:", "checkpoints"),
)
