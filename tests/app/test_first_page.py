"""A fresh server's first page without torch (ui/glance.py): the home page's decode of the default input, kept in a
file by an earlier server, draws the same page as the model; a stale, broken or hostile file is computed afresh and
rewritten; a fresh interpreter draws the home page from it without importing torch; the sidebar's card comes from
the checkpoint's header, the same facts the loaded model gives."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.plotly_specs import spec
from helpers.repo import ROOT, fresh_python, needs_reverse

from transformer.store.checkpoints import load_bundle
from transformer.store.headers import list_checkpoints
from ui import decodes, glance
from ui.tables.home import HOME

INPUT = HOME.view().widget_key("input")
CHART = "fig-home-cross"
pytestmark = needs_reverse


@pytest.fixture
def kept(tmp_path, monkeypatch, clean_caches):
    """An empty folder for kept glances, this test's own."""
    monkeypatch.setenv("AP_FIRST_PAGE_CACHE", str(tmp_path))
    return tmp_path


def page_seen(at) -> tuple:
    """What the home page shows of its decode: the input, every markdown text and the chart."""
    return at.text_input(key=INPUT).value, [m.value for m in at.markdown], spec(at, CHART)


def no_decode(monkeypatch):
    """From now on a decode fails the test: what the page shows must come from the kept file."""
    def refuse(*_):
        raise AssertionError("decoded although a glance was kept")
    monkeypatch.setattr(decodes, "greedy", refuse)


def test_a_kept_glance_draws_the_page_the_model_drew(app, kept, monkeypatch):
    computed = page_seen(app())
    files = list(kept.glob("*.json"))
    assert len(files) == 1
    glance.clear()  # a new server: only the file is left
    no_decode(monkeypatch)
    assert page_seen(app()) == computed


def test_the_kept_numbers_are_the_models_to_the_bit(bundle):
    text = bundle.examples()[0]
    from transformer.network.decoding import greedy_decode

    made = glance.Glance.of(bundle.task, text, greedy_decode(bundle.model, bundle.tokenizer, text))
    read = glance.Glance.from_json(made.to_json("stamp"), "stamp")
    assert read is not None and read.cross.dtype == np.float32
    assert np.array_equal(read.cross, made.cross) and read.focus == made.focus
    assert (read.input, read.output_text, read.output_pieces, read.source_pieces, read.answer) == \
        (made.input, made.output_text, made.output_pieces, made.source_pieces, made.answer)
    assert glance.Glance.from_json(made.to_json("stamp"), "another code") is None


def tampered(record: dict) -> list[str]:
    """Files a hostile or stale folder may hold in a glance's place."""
    def with_(**change) -> str:
        return json.dumps({**record, **change})
    cross = np.asarray(record["cross"])
    return [
        "", "not json", "[]", json.dumps({"code": record["code"]}), "{" * 100_000,
        with_(code="an older code"),  # stale: another code, torch or CPU computed it
        with_(cross=(cross * 0 + 0.5).tolist(), code="an older code"),
        with_(cross=cross[:, :, :1].tolist()),  # shapes that do not match the tokens
        with_(focus=[99, 0]), with_(focus=[0, 99]), with_(output_pieces=[1, 2]), with_(answer=["a"]),
        with_(extra="field"),
    ]


def test_a_stale_broken_or_hostile_file_is_computed_afresh_and_rewritten(app, kept):
    computed = page_seen(app())
    (file,) = kept.glob("*.json")
    record = json.loads(file.read_text())
    for text in tampered(record):
        file.write_text(text)
        glance.clear()
        at = app()
        assert page_seen(at) == computed, text[:80]
        assert json.loads(file.read_text()) == record  # rewritten as the model computed it


def test_an_oversized_file_is_not_read(app, kept, monkeypatch):
    computed = page_seen(app())
    (file,) = kept.glob("*.json")
    monkeypatch.setattr(glance, "MAX_BYTES", file.stat().st_size - 1)
    glance.clear()
    assert page_seen(app()) == computed


def test_a_folder_that_cannot_be_written_keeps_nothing_and_the_page_still_draws(app, tmp_path, monkeypatch,
                                                                             clean_caches):
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv("AP_FIRST_PAGE_CACHE", str(blocked / "glances"))
    at = app()
    assert spec(at, CHART)["data"][0]["type"] == "heatmap"


def test_a_typed_input_is_decoded_not_read_from_the_kept_file(app, kept, monkeypatch):
    at = app()
    at.text_input(key=INPUT).set_value("abc").run()
    assert any("`cba`" in m.value for m in at.markdown)
    assert len(list(kept.glob("*.json"))) == 1  # only the default input is kept


FIRST_PAGE = """
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({app!r}, default_timeout=60)
at.run()
assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
assert any(el.proto.id.endswith("-fig-home-cross") for el in at.get("bidi_component"))
print("torch" in sys.modules)
"""


def test_a_fresh_server_draws_its_first_page_without_torch(app, kept):
    app()  # an earlier server kept the default input's decode
    first_page = FIRST_PAGE.format(app=str(ROOT / "app.py"))
    assert fresh_python(first_page).split()[-1] == "False"  # torch never imported
    for file in kept.glob("*.json"):
        file.unlink()
    assert fresh_python(first_page).split()[-1] == "True"  # nothing kept: the model decodes


def test_the_header_says_what_the_loaded_model_says():
    for info in list_checkpoints(ROOT / "assets" / "checkpoints"):
        header, loaded = info.facts(), load_bundle(info.path).facts()
        assert header.name == loaded.name and header.parameters == loaded.parameters
        assert header.config == loaded.config and header.card == loaded.card and header.notes == loaded.notes
        assert (header.task.name, header.task.params, header.task.title) == \
            (loaded.task.name, loaded.task.params, loaded.task.title)


def test_a_kept_glance_is_valid_for_the_code_that_computed_it_wherever_it_is_installed(tmp_path, monkeypatch):
    def digest(folder) -> str:
        monkeypatch.setattr(glance, "CODE", [folder / "transformer", folder / "ui" / "glance.py"])
        glance.code_digest.cache_clear()
        return glance.code_digest()

    for place in ("here", "there"):
        (tmp_path / place / "transformer" / "network").mkdir(parents=True)
        (tmp_path / place / "ui").mkdir()
        (tmp_path / place / "transformer" / "network" / "model.py").write_text("WEIGHTS = 1\n")
        (tmp_path / place / "ui" / "glance.py").write_text("")
    try:
        first = digest(tmp_path / "here")
        assert digest(tmp_path / "there") == first  # the same code elsewhere: the same stamp
        (tmp_path / "there" / "transformer" / "network" / "model.py").write_text("WEIGHTS = 2\n")
        assert digest(tmp_path / "there") != first  # a line of the library changed: every kept glance is stale
    finally:
        glance.code_digest.cache_clear()
