"""Hostile models and settings in the app (AppTest), issue 11; the files are crafted as tests/unit/test_hostile.py
crafts them for the library:

* a model card with wrong-typed fields (`"exact_match": "0.5"`, `"steps": "many"`), shipped beside good
  checkpoints and uploaded: every page opens, the card's notes show (literally) on the checkpoints page and
  in the sidebar, the others stay listed, the uploader stays;
* a huge-trace model (12+12 layers x 16 heads, d_model 16, max_len 1024, never emits </s>): the pages that
  trace a decode show the budget's message within seconds, allocating nothing of the traces;
* the Train page's own widgets set to a run of ~11.6 GB: refused with the estimate, Start refused.

Memory is the process's peak RSS (VmHWM) growth while the page runs, the peak reset first through
/proc/self/clear_refs, so earlier tests' peaks do not hide it."""

from __future__ import annotations

import io
import json
import re
import shutil
import time

import pandas as pd
import pytest
import torch
from helpers.hostile import endless, tiny_bundle, with_card
from helpers.repo import REVERSE, ROOT, needs_reverse

from transformer.network import budget
from transformer.store.checkpoints import bundle_metadata, bundle_to_bytes
from transformer.training.config import run_estimate
from ui import model_registry as registry
from ui import runs, uploads
from ui.catalog import PAGES
from ui.markdown import plain
from ui.run_settings import RunSettings, settings_problem
from ui.tables.checkpoints import CHECKPOINTS
from ui.tables.train import TRAIN

CHECKPOINTS_PAGE, TRAIN_PAGE = "pages/models/checkpoints.py", "pages/models/train.py"
INSPECT = CHECKPOINTS.view().widget_key("inspect")
BAD_CARD = {"exact_match": "0.5", "steps": "many", "seconds": 12.0}
NOTES = ("card field 'exact_match' was dropped: it must be a number in 0..1",
         "card field 'steps' was dropped: it must be a whole number in 0..1,000,000,000")
HOSTILE_RUN = {"n_enc_layers": 6, "n_dec_layers": 6, "n_heads": 16, "d_model": 512, "d_ff": 2048, "batch_size": 1024}
DECODING_PAGES = ("pages/learn/home.py", "pages/explore/decode.py", "pages/explore/attention.py")
MB = 2**20

pytestmark = needs_reverse


# --------------------------------------------------------------------------------------------- helpers


def peak_mb() -> float:
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read())[1]) / 1024


def reset_peak() -> float:
    """Reset this process's VmHWM to its current RSS (Linux: write 5 to clear_refs); returns it in MB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return peak_mb()


def measured_run(at) -> tuple[float, float]:
    """Run `at`; (seconds, peak RSS growth in MB)."""
    before, started = reset_peak(), time.perf_counter()
    at.run()
    return time.perf_counter() - started, peak_mb() - before


def texts(at, *kinds: str) -> list[str]:
    """What the reader sees in the elements of these kinds (markdown escapes removed), sidebar included."""
    return [plain(e.value) for kind in kinds for e in getattr(at, kind)]


def sidebar_captions(at) -> list[str]:
    return [plain(c.value) for c in at.sidebar.caption]


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def open_page(at, path: str):
    at.switch_page(path)
    at.run()
    no_exception(at)
    return at


def upload(at, name: str, data: bytes):
    at.file_uploader(key=uploads.FILE).upload(name, data).run()
    no_exception(at)
    return at


@pytest.fixture(scope="module")
def bad_card_bytes() -> bytes:
    return with_card(tiny_bundle(), BAD_CARD)


@pytest.fixture
def assets(monkeypatch, tmp_path, bad_card_bytes):
    """A shipped folder of its own: the default model, a checkpoint with a bad card and a broken file."""
    shutil.copyfile(REVERSE, tmp_path / "reverse.safetensors")
    (tmp_path / "bad_card.safetensors").write_bytes(bad_card_bytes)
    (tmp_path / "broken.safetensors").write_bytes(b"\x80\x04 not a checkpoint")
    monkeypatch.setattr(registry, "ASSETS", tmp_path)
    return tmp_path


def shows_notes(lines: list[str]) -> bool:
    return any(all(note in line.lower() for note in NOTES) for line in lines)


# ---------------------------------------------------------------------------------------- bad cards


def test_a_bad_card_never_hides_a_page_a_model_or_the_uploader(app, assets, bad_card_bytes):
    at = app(CHECKPOINTS_PAGE)
    table = at.dataframe[0].value
    assert list(table.index) == ["shipped:bad_card", "shipped:reverse"]  # the bad card hides nothing
    assert table.loc["shipped:bad_card", "Model"] == "bad_card"
    assert pd.isna(table.loc["shipped:bad_card", "Exact match"])  # the dropped figure is not shown
    (warning,) = texts(at, "warning")
    assert "“broken.safetensors” cannot be used" in warning
    at.selectbox(key=INSPECT).set_value("shipped:bad_card").run()
    no_exception(at)
    assert shows_notes(texts(at, "caption"))  # on the card
    assert not shows_notes(sidebar_captions(at))  # the active model is still the sound one
    at.button(key="ckpt_activate").click().run()
    no_exception(at)
    assert at.sidebar.selectbox[0].value == "shipped:bad_card" and shows_notes(sidebar_captions(at))
    for page in PAGES:  # every page with the bad-card model active
        open_page(at, page.path)
        assert shows_notes(sidebar_captions(at)), page.path
    for caption in at.sidebar.caption:  # shown literally: every punctuation mark escaped
        assert "'exact_match'" not in caption.value or "\\'exact\\_match\\'" in caption.value

    open_page(at, CHECKPOINTS_PAGE)
    pt = io.BytesIO()
    bundle = tiny_bundle(d_ff=64)  # models not in the list yet (one in it would be named, not added)
    torch.save(json.loads(json.dumps(bundle_metadata(bundle) | {"card": BAD_CARD}))
               | {"state_dict": bundle.model.state_dict()}, pt)
    for name, data in (("uploaded_bad_card.safetensors", with_card(tiny_bundle(d_ff=48), BAD_CARD)),
                       ("uploaded_bad_card.pt", pt.getvalue())):
        upload(at, name, data)
        (message,) = texts(at, "success")
        assert f"“{name}” loaded as “uploaded_bad_card”" in message and "Its model card was cleaned" in message
        assert all(note in message for note in NOTES) and "many" not in message
        key = at.session_state[registry.ACTIVE]
        assert key.startswith("uploaded:") and at.selectbox(key=INSPECT).value == key
        assert shows_notes(texts(at, "caption")) and shows_notes(sidebar_captions(at))
        assert at.file_uploader(key=uploads.FILE) is not None  # the uploader stays
    assert list(at.dataframe[0].value.index)[:2] == ["shipped:bad_card", "shipped:reverse"]
    for page in PAGES:  # every page with the uploaded bad-card model active
        open_page(at, page.path)
        assert shows_notes(sidebar_captions(at)), page.path
    open_page(at, CHECKPOINTS_PAGE)
    assert len(at.get("file_uploader")) == 2


# ------------------------------------------------------------------------------------ huge-trace model


@pytest.fixture(scope="module")
def huge_trace_bytes() -> bytes:
    """A valid 0.3 MB checkpoint whose every traced decode would need ~1.5 GB (1024 steps, no </s> ever)."""
    return bundle_to_bytes(endless(tiny_bundle(n_enc_layers=12, n_dec_layers=12, n_heads=16, max_len=1024)))


def test_a_huge_trace_model_is_refused_by_the_pages_that_trace_it(app, huge_trace_bytes):
    assert len(huge_trace_bytes) < MB
    at = upload(app(CHECKPOINTS_PAGE), "huge_trace.safetensors", huge_trace_bytes)
    (message,) = texts(at, "success")
    assert "loaded as “huge_trace”" in message  # a valid model: kept, with what the pages will do
    refusal = ("The pages that trace a decode will refuse it: tracing the decode of a one-token input would need "
               "about 1.5 GB, mostly attention traces")
    assert refusal in message and "the limit is 1.0 GB" in message
    figures = {}
    for path in DECODING_PAGES:
        at.switch_page(path)
        seconds, grown = measured_run(at)
        no_exception(at)
        (error,) = texts(at, "error")
        assert "would need about 1.5 GB, mostly attention traces" in error, error
        assert "the limit is 1.0 GB (set AP_MODEL_BUDGET_MB to change it)" in error
        figures[path] = (seconds, grown)
    for path in ("pages/concepts/masks.py", "pages/concepts/positions.py"):  # traces of the inputs only
        at.switch_page(path)
        seconds, grown = measured_run(at)
        no_exception(at)
        assert not texts(at, "error"), texts(at, "error")
        figures[path] = (seconds, grown)
    print("\n" + "\n".join(f"{path}: {s:.1f} s, peak RSS +{mb:.0f} MB" for path, (s, mb) in figures.items()))
    for path, (seconds, grown) in figures.items():
        assert grown < 200 and seconds < 30, (path, seconds, grown)  # 1.5 GB of traces never allocated


def test_masks_with_greedy_targets_of_a_huge_trace_model_are_refused(app, huge_trace_bytes):
    at = upload(app(CHECKPOINTS_PAGE), "huge_trace.safetensors", huge_trace_bytes)
    at.switch_page("pages/concepts/masks.py")
    at.query_params["model"] = at.session_state[registry.ACTIVE]
    at.query_params["targets"] = "greedy"
    seconds, grown = measured_run(at)
    no_exception(at)
    assert any("would need about" in e for e in texts(at, "error"))
    assert grown < 200 and seconds < 30


# ------------------------------------------------------------------------------------------ Train page


def test_the_train_page_refuses_a_run_over_the_run_budget(clean_caches):
    from streamlit.testing.v1 import AppTest

    assert settings_problem(RunSettings()) is None
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(TRAIN_PAGE)
    for name, value in HOSTILE_RUN.items():  # a link that sets the page's own widgets
        at.query_params[name] = str(value)
    seconds, grown = measured_run(at)
    no_exception(at)
    view = TRAIN.view()
    for name, value in HOSTILE_RUN.items():  # every value is within the widgets' ranges: adopted
        assert at.number_input(key=view.widget_key(name)).value == value, name
    (error,) = texts(at, "error")
    assert error.startswith("Fix this setting before starting: this training run would need about 11.6 GB, "
                            "mostly activations (batch 1024"), error
    assert "the limit is 2.0 GB (set AP_RUN_BUDGET_MB to change it)" in error
    assert at.button(key="train_start").disabled
    at.session_state[runs.START] = {"steps": None}  # a forged Start (what its callback records) starts nothing
    at.run()
    no_exception(at)
    assert runs.START not in at.session_state  # taken, and refused
    assert runs.RUN not in at.session_state or at.session_state[runs.RUN] is None
    assert any("11.6 GB" in e for e in texts(at, "error"))
    limit = budget.run_limit_mb()
    print(f"\nTrain page over the run budget ({limit:.0f} MB): {seconds:.1f} s, peak RSS +{grown:.0f} MB")
    assert grown < 200, grown


def test_the_run_budget_follows_the_environment(monkeypatch):
    hostile = RunSettings()
    monkeypatch.setenv("AP_RUN_BUDGET_MB", "1")
    assert "this training run would need about" in settings_problem(hostile) and "the limit is 1 MB" in \
        settings_problem(hostile)
    monkeypatch.setenv("AP_RUN_BUDGET_MB", "lots")
    assert "AP_RUN_BUDGET_MB must be a number above 0" in settings_problem(hostile)


def test_evaluate_follows_the_model_budget(app, monkeypatch):
    """The checkpoints page checks an evaluation against AP_MODEL_BUDGET_MB before drawing any input, as the
    CLI's eval does; here a budget that holds the model (2 MB to load) but not 500 sequences at once (36 MB)."""
    monkeypatch.setenv("AP_MODEL_BUDGET_MB", "10")
    at = app(CHECKPOINTS_PAGE)
    at.button(key="ckpt_evaluate").click().run()
    no_exception(at)
    (error,) = texts(at, "error")
    assert error.startswith("Cannot evaluate: evaluating this model would need about 36 MB") and \
        "the limit is 10 MB (set AP_MODEL_BUDGET_MB to change it)" in error, error
    assert not at.metric
    monkeypatch.setenv("AP_MODEL_BUDGET_MB", "1024")
    at.button(key="ckpt_evaluate").click().run()
    assert not texts(at, "error") and len(at.metric) == 3


def test_the_batch_size_range_follows_the_run_budget(clean_caches):
    from helpers.repo import open_link

    from ui.run_settings import largest_batch
    from ui.tables.train import settings_of

    view = TRAIN.view()
    big_shape = {**HOSTILE_RUN, "batch_size": 16}
    at = open_link(TRAIN_PAGE, {name: str(value) for name, value in big_shape.items()})
    no_exception(at)
    values = {p.name: p.default for p in TRAIN.props} | big_shape
    fits = largest_batch(settings_of(values), 1024)
    assert 16 <= fits < 1024  # this shape leaves room for some batches, not for 1024
    box = at.number_input(key=view.widget_key("batch_size"))
    assert box.proto.max == fits and f"allows at most {fits:,}" in box.proto.help  # the widget's own range
    assert not run_estimate(settings_of(values | {"batch_size": fits + 1}).train, settings_of(values).model
                                   ).fits()
    assert run_estimate(settings_of(values | {"batch_size": fits}).train, settings_of(values).model).fits()
    default = open_link(TRAIN_PAGE, {})
    assert default.number_input(key=view.widget_key("batch_size")).proto.max == 1024  # the default model fits all
