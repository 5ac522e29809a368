"""Entry files for Streamlit's legacy `pages/` mode.

The project keeps its page scripts under a top-level folder that must be named `pages` (the task's layout),
and a folder of that name switches Streamlit into its first, folder-based multipage mode. With
`st.navigation` in app.py, a fresh server's very first script run still resolves the requested URL among
the .py files directly inside pages/ (streamlit/streamlit#9992, "Page not found" modal on first load of a
non-default page; #9624, deep links on first load; the graceful-degradation note in PR #10276). Finding
none, it showed a "Page not found" dialog before app.py rendered the right page anyway. Each file
pages/<url_path>.py therefore just runs app.py, which takes over with the real navigation; the page scripts
themselves live one level down (pages/<group>/), where the legacy mode never looks.
tests/app/test_app_frame.py checks every page URL has one.
"""

from __future__ import annotations

import runpy
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app.py"


def run_app() -> None:
    runpy.run_path(str(APP), run_name="__main__")
