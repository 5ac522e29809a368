"""Shared fixtures: AppTest runs of the app, a live Streamlit server on loopback, headless Chromium (their code is in
tests/helpers/); every test is marked by its folder."""

from __future__ import annotations

import os
import tempfile

import pytest

# Models trained or uploaded by the tests (and the servers they start) go to a store of their own, not the
# repository's .model_store/ (the app reads this when it is first imported); so do the home page's kept decodes.
os.environ.setdefault("AP_MODEL_STORE", tempfile.mkdtemp(prefix="ap-test-store-"))
os.environ.setdefault("AP_FIRST_PAGE_CACHE", tempfile.mkdtemp(prefix="ap-test-first-page-"))  # ui/glance.py

from streamlit import config  # noqa: E402

config.get_option("client.showErrorDetails")  # reads .streamlit/config.toml first, which the next line overrides
config.set_option("client.showErrorDetails", "full")  # AppTest sees a page's unexpected error (ui/failure.py)

from benchmarks.timing import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (the benchmarks' browser, started alike)
from helpers.browser import count_runs, offline, require_chromium, serving  # noqa: E402  (after the store is set)
from helpers.repo import REVERSE, ROOT  # noqa: E402

SUITES = ("unit", "app", "browser")  # the folders, and the markers pyproject.toml declares: `-m "not browser"` skips


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything
def pytest_collection_modifyitems(config, items):
    """Mark each test by its folder (tests/unit, tests/app, tests/browser), unless it already carries one of the
    three (e.g. the @pytest.mark.browser test in tests/app/test_app_frame.py)."""
    for item in items:
        if any(item.get_closest_marker(name) for name in SUITES):
            continue
        folder = item.path.parent.name
        assert folder in SUITES, f"{item.path}: tests live in tests/unit, tests/app or tests/browser"
        item.add_marker(getattr(pytest.mark, folder))


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """The app and the trainer run torch on one thread (ui/runtime.py); so do the tests. On a busy
    2-core machine the model tests ran 2x faster and the beam tests 100x faster than with two threads."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def bundle():
    """The shipped reverse model, loaded independently of the app (test files may override this)."""
    from transformer.store.checkpoints import load_bundle

    return load_bundle(REVERSE)


@pytest.fixture
def clean_caches():
    """Streamlit's caches and the app's decode cache outlive an AppTest instance: start and end each app test
    with them empty."""
    import streamlit as st

    from ui import decodes, glance

    for clear in (st.cache_data.clear, st.cache_resource.clear, decodes.clear, glance.clear):
        clear()
    yield
    for clear in (st.cache_data.clear, st.cache_resource.clear, decodes.clear, glance.clear):
        clear()


@pytest.fixture
def app(clean_caches):
    """`app(page)` -> an AppTest of app.py already run on `page` (a path like "pages/explore/decode.py")."""
    from streamlit.testing.v1 import AppTest

    def run(page: str | None = None):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.run()
        if page:
            at.switch_page(page)
            at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return run


@pytest.fixture
def fresh_server():
    """A new server per test: its first request is whatever the test opens."""
    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def module_server():
    """One server for a module's tests that walk pages and need no fresh one: each test after the first finds
    the pages' models loaded and decodes cached (a fresh server per test took 10-15 s more of each)."""
    with serving() as server:
        yield server


@pytest.fixture(scope="session")
def _browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(_browser):
    """A fresh browser page (1400x900) with downloads accepted, offline (issue 12: the app needs no network once
    installed): a request to any host but the app's server on loopback is refused, and fails the test. So every
    page every browser test opens, in both languages and at every size, is checked for it."""
    context = _browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    asked = offline(context)
    count_runs(context)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()
    assert not asked, f"{len(asked)} request(s) to hosts other than the app's server:\n" + "\n".join(asked)


@pytest.fixture(scope="module")
def small_reverse():
    """An untrained reverse model of 2+2 layers (d_model 32, 2 heads, seeded: the same weights every time) and its
    tokenizer."""
    import torch  # function-local: torch only for the tests that use it

    from transformer.network.config import ModelConfig  # function-local: as above
    from transformer.network.model import EncoderDecoder  # function-local: as above
    from transformer.tasks import make_task  # function-local: as above

    task = make_task("reverse", max_len=8)
    tokenizer = task.make_tokenizer()
    torch.manual_seed(0)
    config = ModelConfig(src_vocab=tokenizer.vocab_size, tgt_vocab=tokenizer.vocab_size, n_enc_layers=2,
                         n_dec_layers=2, d_model=32, n_heads=2, d_ff=64, max_len=10)
    return EncoderDecoder(config).eval(), tokenizer
