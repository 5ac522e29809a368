"""The chart code the browser runs (assets/plotly/, served by ui/preload.py) is the plotly.js that plotly.py writes
its figures for, so a figure means the same to both; an upgrade of plotly that moves plotly.js fails here until the
vendored build follows (assets/plotly-build/: set the version in its package.json, then `npm install && npm run
build`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import plotly
from helpers import plotly_specs

from ui.preload import PLOTLY_DIR, PLOTLY_FILE

VERSION = re.compile(r"plotly\.js (?:\([^)]*\) )?v(\d+\.\d+\.\d+)")


def banner_version(path: Path) -> str:
    return VERSION.search(path.read_text(encoding="utf-8")[:300])[1]


def test_the_vendored_build_is_the_plotly_js_plotly_py_targets():
    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert banner_version(PLOTLY_DIR / PLOTLY_FILE) == banner_version(bundled)


def test_the_vendored_build_keeps_its_licence():
    assert "MIT" in (PLOTLY_DIR / "LICENSE").read_text(encoding="utf-8")


def test_the_vendored_build_is_the_one_its_recipe_names():
    recipe = json.loads((PLOTLY_DIR.parent / "plotly-build" / "package.json").read_text(encoding="utf-8"))
    assert banner_version(PLOTLY_DIR / PLOTLY_FILE) == recipe["devDependencies"]["plotly.js"]


def test_the_build_draws_the_app_s_trace_types_and_sets_the_global_the_charts_use():
    assert plotly_specs.build_traces() == {"scatter", "bar", "heatmap"}
    code = (PLOTLY_DIR / PLOTLY_FILE).read_text(encoding="utf-8")
    assert code.rstrip().endswith("window.Plotly = Plotly;")  # ui/step_player.js draws with window.Plotly
