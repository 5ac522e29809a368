"""The CJK font that server-side images need for Chinese text: kaleido's Chromium (PNG/SVG export, animation frames)
finds it through fontconfig like any font, Pillow (an animation's caption) needs its file. On Debian and Ubuntu it is
the fonts-noto-cjk package (docs/INSTALL.md). Without one, Chinese text would be drawn as boxes: `export_language`
then says to export in English instead, and the export UI says why.
"""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
from functools import cache
from pathlib import Path
from typing import NamedTuple

from transformer.i18n import language

# where a CJK font lies when fontconfig cannot say: Debian's Noto Sans CJK, macOS, Windows
KNOWN_FONTS = ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", "/System/Library/Fonts/PingFang.ttc",
               "C:/Windows/Fonts/msyh.ttc")


class Font(NamedTuple):
    """A font file and the face in it (a .ttc holds several: Noto Sans CJK's Japanese, Korean, Simplified ...)."""

    path: str
    index: int = 0


def _rank(family: str, style: str) -> tuple:
    """Sans before serif, Simplified Chinese forms first, the regular weight: smaller is better."""
    return ("Sans" not in family or "Mono" in family, "SC" not in family, style != "Regular", family)


@cache
def cjk_font() -> Font | None:
    """The font this machine draws Simplified Chinese with (fontconfig's choice among the fonts covering zh-cn,
    else a known path), or None when it has none."""
    if shutil.which("fc-list"):
        listed = subprocess.run(["fc-list", "--format", "%{file}|%{index}|%{family[0]}|%{style[0]}\n", ":lang=zh-cn"],
                                capture_output=True, text=True, timeout=20).stdout
        faces = [line.split("|") for line in listed.splitlines() if line.count("|") == 3]
        if faces:
            path, index, *_ = min(faces, key=lambda face: _rank(face[2], face[3]))
            return Font(path, int(index or 0))
    return next((Font(path) for path in KNOWN_FONTS if Path(path).is_file()), None)


def wide(text: str) -> bool:
    """Whether `text` holds CJK (wide) characters, which only a CJK font draws."""
    return any(unicodedata.east_asian_width(char) in "WF" for char in text)


def export_language() -> str:
    """The language a server-side image is drawn in: the reader's, or English where Chinese would be boxes."""
    return language() if language() == "en" or cjk_font() is not None else "en"
