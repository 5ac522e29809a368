"""The chart code the browser runs (assets/plotly/, served by ui/preload.py) is the plotly.js that plotly.py writes
its figures for, so a figure means the same to both; an upgrade of plotly that moves plotly.js fails here until the
vendored build follows (`npm pack plotly.js-cartesian-dist-min@<version>`)."""

from __future__ import annotations

import re
from pathlib import Path

import plotly

from ui.preload import PLOTLY_DIR, PLOTLY_FILE

VERSION = re.compile(r"plotly\.js (?:\([^)]*\) )?v(\d+\.\d+\.\d+)")


def banner_version(path: Path) -> str:
    return VERSION.search(path.read_text(encoding="utf-8")[:300])[1]


def test_the_vendored_build_is_the_plotly_js_plotly_py_targets():
    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert banner_version(PLOTLY_DIR / PLOTLY_FILE) == banner_version(bundled)


def test_the_vendored_build_keeps_its_licence():
    assert "MIT" in (PLOTLY_DIR / "LICENSE").read_text(encoding="utf-8")
