"""Legacy-mode entry for /positions: hands over to app.py (see pages/common/legacy_entry.py)."""
from pages.common.legacy_entry import run_app

run_app()
