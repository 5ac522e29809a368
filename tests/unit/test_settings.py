"""transformer/settings.py: every AP_* variable is read there alone, typed and bounded, with its default."""

from __future__ import annotations

import re

import pytest
from helpers.repo import ROOT, tracked

from transformer import settings
from transformer.settings import SETTINGS, SettingError


def test_every_setting_has_a_default_of_its_kind_and_a_meaning(monkeypatch):
    for name, setting in SETTINGS.items():
        monkeypatch.delenv(name, raising=False)
        value = settings.get(name)
        assert setting.meaning and name.startswith("AP_")
        if setting.kind in ("int", "float"):
            assert isinstance(value, int if setting.kind == "int" else float) and setting.check(value) == value
        else:
            assert value is None  # optional: unset means "not configured"


@pytest.mark.parametrize(("name", "text", "value"), [
    ("AP_MAX_RUNS", " 3 ", 3), ("AP_WORKER_NICE", "0", 0), ("AP_MODEL_BUDGET_MB", "0.5", 0.5),
    ("AP_RAY_ADDRESS", " auto ", "auto"), ("AP_RAY_ADDRESS", "  ", None),
])
def test_a_set_variable_is_parsed(monkeypatch, name, text, value):
    monkeypatch.setenv(name, text)
    assert settings.get(name) == value


@pytest.mark.parametrize(("name", "text", "message"), [
    ("AP_MAX_RUNS", "two", "AP_MAX_RUNS must be a whole number from 1 to 10000, got 'two'"),
    ("AP_MAX_RUNS", "1.5", "whole number"),
    ("AP_WORKER_NICE", "20", "from 0 to 19"),
    ("AP_MODEL_BUDGET_MB", "0", "a number above 0"),
    ("AP_MODEL_BUDGET_MB", "nan", "a number above 0"),
    ("AP_MODEL_STORE_MB", "-5", "a number above 0"),
    ("AP_DECODE_CACHE_MB", "x" * 500, "got 'xxxxxxxx"),
])
def test_a_bad_value_names_the_variable_and_what_it_takes(monkeypatch, name, text, message):
    monkeypatch.setenv(name, text)
    with pytest.raises(SettingError, match=message) as caught:
        settings.get(name)
    assert len(str(caught.value)) < 200  # a huge value is not quoted back whole


def test_no_other_module_reads_an_ap_variable():
    """One home: the library, the UI, the pages and the app read AP_* only through transformer.settings."""
    files = tracked("transformer", "ui", "pages", "app.py")
    reads = re.compile(r"(environ|getenv)\W[^\n]*AP_|AP_\w+[\"']\s*\]")
    offenders = [f for f in files if f.endswith(".py") and f != "transformer/settings.py"
                 and reads.search((ROOT / f).read_text())]
    assert offenders == []


def test_every_setting_is_documented_for_whoever_hosts_a_class():
    """docs/SERVING.md's settings table names every setting, and no setting the code does not have."""
    text = (ROOT / "docs" / "SERVING.md").read_text()
    documented = set(re.findall(r"^\| `(AP_\w+)` \|", text, flags=re.M))
    assert documented == set(SETTINGS)
