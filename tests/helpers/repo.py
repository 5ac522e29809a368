"""Where the tests find the repository and its shipped model, and small helpers every kind of test uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


REVERSE = ROOT / "assets" / "checkpoints" / "reverse.safetensors"


needs_reverse = pytest.mark.skipif(not REVERSE.is_file(), reason=f"the shipped model {REVERSE} is missing")


def tracked(*pathspecs: str) -> list[str]:
    """The files git tracks that match `pathspecs`, as paths from the repository's root."""
    return subprocess.run(["git", "ls-files", *pathspecs], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def fresh_python(code: str) -> str:
    """What `code` prints, run by a new interpreter at the repository's root (nothing imported yet, as in a server
    or a worker); the test fails with its stderr if it fails."""
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stderr
    return run.stdout


def reverse_variant(nudge: float):
    """The shipped reverse model with its generator's biases moved by `nudge`: a model not in the app's list (an
    upload of the shipped file itself is named as that model and not added)."""
    import torch

    from transformer.store.checkpoints import load_bundle

    bundle = load_bundle(REVERSE)
    with torch.no_grad():
        bundle.model.generator.proj.bias.add_(nudge)
    return bundle


ARTIFACTS = ROOT / "test-artifacts"


def require_image_export() -> None:
    """Skip a test of server-side PNG/SVG export where it is unavailable (no Chromium for kaleido); under
    REQUIRE_BROWSER=1 (CI) fail instead."""
    from transformer.charts.export import image_export_available

    ok, reason = image_export_available()
    if not ok:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but server-side export is unavailable: {reason}")
        pytest.skip(reason)


def open_link(page: str, query: dict[str, str]):
    """An AppTest of `page` (a script path like "pages/explore/decode.py") opened by a link with `query` as
    its parameters, as a new session opens it."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(page)
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def link_id(query) -> str:
    """A parametrized hostile link's test id: its parameters, each name and value cut to 12 characters."""
    return "&".join(f"{name[:12]}={value[:12]!r}" for name, value in query.items()) if isinstance(query, dict) else ""


def refused_with_a_note(at, note: str, table) -> str:
    """What every page shows for a link it cannot follow: no exception, a warning that the link could not be
    followed naming `note`, and the default model (shipped reverse) in `table`'s model picker and active. Returns
    that warning."""
    assert not at.exception, [e.value for e in at.exception]
    warnings = [w.value.replace("\\", "") for w in at.warning]
    refusals = [w for w in warnings if "could not be followed" in w and note in w]
    assert refusals, warnings
    assert at.selectbox(key=table.view().widget_key("model")).value == "shipped:reverse"
    assert at.session_state["active_model"] == "shipped:reverse"
    return refusals[0]
