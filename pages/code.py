"""Legacy-mode entry for /code: hands over to app.py (see ui/legacy_entry.py)."""
from ui.legacy_entry import run_app

run_app()
