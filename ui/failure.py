"""What a page shows when a run of it meets an error nobody expected (a bug, here or in a library): a note in the
reader's language that names the error's kind and says what to do, never a traceback; the traceback goes to the
server's log. The pages' own checks say what is wrong with an input or a link; this is for everything else.
A page's code runs in three places, each guarded: its run (app.py wraps it in `noted`), a fragment's own run
(`fragment`) and, before the run, a widget's callback (`callback`; `ui.state.View.widget` wraps its own);
tests/unit/test_house.py holds every page and panel to the last two.

Where the server says so: with `client.showErrorDetails` at "full" (Streamlit's default, which the tests and a
developer's `streamlit run app.py --client.showErrorDetails full` use) the error is Streamlit's to show, traceback
and all; .streamlit/config.toml sets "type", so a learner sees the note."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import streamlit as st
from streamlit import config
from streamlit.logger import get_logger

from transformer.i18n import t

_LOGGER = get_logger(__name__)


def _details_shown() -> bool:
    """Whether the server shows an error's message and traceback in the browser (its `client.showErrorDetails`)."""
    details = config.get_option("client.showErrorDetails")
    return details == config.ShowErrorDetailsConfigOptions.FULL or \
        config.ShowErrorDetailsConfigOptions.is_true_variation(details)


@contextmanager
def noted():
    """Around a page's run or a fragment's: an unexpected error ends it with the note and a log entry. Streamlit's
    st.rerun and st.stop are not errors (BaseException) and pass through. Also a decorator."""
    try:
        yield
    except Exception as exc:
        if _details_shown():
            raise
        _LOGGER.exception("A page's run failed")
        st.error(t("app.unexpected", kind=type(exc).__name__), icon=":material/error:")


def callback(func: Callable) -> Callable:
    """A widget's on_click or on_change, which Streamlit calls before the page's run (outside app.py's guard): an
    unexpected error in it ends in the note at the top of the page, which then draws as usual."""
    return noted()(func)


def fragment(func: Callable, *, run_every: float | None = None):
    """`st.fragment` whose own runs (after the page's, which app.py guards) end in the note too."""
    return st.fragment(noted()(func), run_every=run_every)
