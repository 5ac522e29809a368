"""Entry files for Streamlit's legacy `pages/` mode.

On a fresh server, Streamlit's very first script run still uses the legacy multipage mode (because a
`pages/` folder exists) until app.py's st.navigation switches it off. That run looks the requested URL
up among the .py files directly inside pages/; finding none, it showed a "Page not found" dialog before
app.py rendered the right page anyway. Each file pages/<url_path>.py therefore just runs app.py, which
takes over with the real navigation. tests/test_app_frame.py checks every page URL has one.
"""

from __future__ import annotations

import runpy
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app.py"


def run_app() -> None:
    runpy.run_path(str(APP), run_name="__main__")
