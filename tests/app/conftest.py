"""Fixtures of the page tests (AppTest): the Train page that stops every run a test started."""

from __future__ import annotations

import pytest
from helpers.train_page import PAGE, opened, train_page_from

from ui import runs


@pytest.fixture
def train_page(app):
    """The Train page; every run started by a test is stopped and joined afterwards."""
    opened.clear()

    def open_page():
        return train_page_from(app(PAGE))

    yield open_page
    for at in opened:
        if runs.RUN in at.session_state:
            job = at.session_state[runs.RUN].job
            job.stop()
            assert job.join(30)
