"""Chinese in server-side images (issue 26): this machine has a CJK font (Debian's fonts-noto-cjk, which the README's
test command installs) with a glyph for every Chinese character the app writes; kaleido's PNG export and the
animations' caption draw Chinese text with it, not as boxes; without a font, exports fall back to English."""

from __future__ import annotations

import io

import numpy as np
import plotly.graph_objects as go
import pytest
from helpers.repo import require_image_export
from PIL import Image, ImageFont

from transformer import i18n
from transformer.charts import animation, export, fonts

UNASSIGNED = "\u0378\u0379\u0380"  # code points no font draws: each one is the font's empty box (.notdef)


def drawn(font, text: str) -> np.ndarray:
    return np.asarray(font.getmask(text))


def test_this_machine_has_a_cjk_font_with_every_chinese_character_the_app_writes():
    found = fonts.cjk_font()
    assert found is not None, "no CJK font: install fonts-noto-cjk (docs/INSTALL.md)"
    font = ImageFont.truetype(found.path, 24, index=found.index)
    box = drawn(font, UNASSIGNED[0])
    chinese = sorted({char for entry in i18n.catalog().values() for char in entry["zh"] if fonts.wide(char)})
    missing = [char for char in chinese if drawn(font, char).shape == box.shape and (drawn(font, char) == box).all()]
    assert len(chinese) > 500 and missing == []


def test_an_animation_caption_draws_chinese_in_the_cjk_font():
    text = "第 3 步，共 5 步 · 目前的输出：cba"
    strip = animation.caption_strip(text, 600)
    boxes = animation.caption_strip(text.replace("第", UNASSIGNED[0]).replace("步", UNASSIGNED[1]), 600)
    assert strip.shape == (animation.CAPTION_PX, 600, 3) and (strip != boxes).any()


def png_of(title: str) -> np.ndarray:
    fig = go.Figure(layout=dict(title=dict(text=title), width=360, height=120, font=dict(size=20)))
    with Image.open(io.BytesIO(export.figure_to_image(fig, "png", scale=1))) as image:
        return np.asarray(image.convert("L"))


def test_a_png_export_draws_chinese_characters_not_boxes():
    require_image_export()
    one, other, boxes = png_of("注意力头"), png_of("交叉掩码"), png_of(UNASSIGNED + UNASSIGNED[0])
    assert (one != other).any() and (one != boxes).any()  # boxes would be alike: the same .notdef glyph each


def test_without_a_cjk_font_exports_are_drawn_in_english(monkeypatch):
    monkeypatch.setattr(fonts, "cjk_font", lambda: None)
    with i18n.using("zh"):
        assert fonts.export_language() == "en"
    monkeypatch.setattr(fonts, "cjk_font", lambda: fonts.Font("/somewhere/cjk.ttc"))
    with i18n.using("zh"):
        assert fonts.export_language() == "zh"
    assert fonts.export_language() == "en"


@pytest.mark.parametrize(("family", "style", "better"), [
    ("Noto Sans CJK SC", "Regular", ("Noto Sans CJK JP", "Regular")),
    ("Noto Sans CJK SC", "Regular", ("Noto Sans CJK SC", "Bold")),
    ("Noto Sans CJK SC", "Regular", ("Noto Serif CJK SC", "Regular")),
    ("Noto Sans CJK SC", "Regular", ("Noto Sans Mono CJK SC", "Regular")),
])
def test_the_simplified_chinese_sans_regular_face_is_preferred(family, style, better):
    assert fonts._rank(family, style) < fonts._rank(*better)
