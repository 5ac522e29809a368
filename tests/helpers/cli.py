"""Running `python -m transformer` as a user does: a fresh interpreter in the repository."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.repo import ROOT


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "transformer", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
